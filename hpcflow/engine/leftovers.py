"""Before a run starts any task: end what earlier runs of the workflow left running.

Earlier runs wrote down who leads each attempt's processes (:mod:`hpcflow.worker.leaders`).
A run that ended cleanly removed its records with its journal; records that are left
belong to a run whose driver died. Normally its tasks died with it (each process's
guardian, :mod:`hpcflow.worker.guardian`), but a ``kill -9`` of the guardian too, or a
guardian that could not start, leaves them running, and a task started again beside
its earlier attempt writes the same outputs at the same time.

So for each record of another run, on this machine (same host, boot and PID namespace):

* a process that wrote records and still lives (a worker still dying) is waited for, up
  to :data:`OWNER_WAIT` seconds; then the run refuses to start, naming it;
* every process that carries the dead process's mark, and every recorded leader that
  still lives (pid and start time: never a reused pid), is sent SIGTERM (its process
  group with it when it leads one), then SIGKILL after :data:`GRACE` seconds, and the
  run says so on stderr, naming the tasks.

A record from another machine cannot be checked from here: the run says so, and relies
on that machine's guardians. Linux only (``/proc``), as hpcflow is.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from hpcflow.errors import RunError
from hpcflow.store.process import ProcessIdentity
from hpcflow.worker.guardian import marked
from hpcflow.worker.leaders import SUFFIX
from hpcflow.worker.lifelines import is_alive, start_ticks

log = logging.getLogger(__name__)

#: Seconds between SIGTERM and SIGKILL.
GRACE = 5.0
#: Seconds a run waits for a process of an earlier run that is still ending.
OWNER_WAIT = 10.0


@dataclass
class Record:
    """One process's record of the attempts it started."""

    path: Path
    owner: ProcessIdentity | None
    mark: str
    #: (task id, attempt, leader pid, leader start ticks) of each attempt.
    attempts: list[tuple[str, int, int, int | None]] = field(default_factory=list)


def read_record(path: Path) -> Record:
    """A record file; lines cut short by a kill are skipped."""
    owner: ProcessIdentity | None = None
    mark = ""
    attempts: list[tuple[str, int, int, int | None]] = []
    try:
        data = path.read_bytes()
    except OSError as exc:
        log.warning("cannot read %s: %s", path, exc)
        data = b""
    for raw in data.split(b"\n"):
        try:
            item = json.loads(raw)
        except ValueError:
            continue
        if isinstance(item, dict) and isinstance(item.get("owner"), dict):
            owner = ProcessIdentity.from_meta(item["owner"])
            mark = str(item["owner"].get("mark") or "")
        elif isinstance(item, list) and len(item) == 4:
            task_id, attempt, pid, ticks = item
            attempts.append((str(task_id), int(attempt), int(pid), ticks))
    return Record(path=path, owner=owner, mark=mark, attempts=attempts)


def end_leftovers(journal_dir: Path, run_id: str) -> int:
    """End the task processes that earlier runs (not ``run_id``) recorded and left
    running on this machine; how many processes were ended. Removes the records dealt
    with."""
    try:
        paths = sorted(p for p in journal_dir.iterdir() if p.name.endswith(SUFFIX))
    except FileNotFoundError:
        return 0
    runs: dict[str, list[Record]] = {}
    for path in paths:
        run = path.name.split(".", 1)[0]
        if run != run_id:
            record = read_record(path)
            if record.owner is not None:  # (else being written: its first line not there yet)
                runs.setdefault(run, []).append(record)
    ended = 0
    for run, records in runs.items():
        here = [r for r in records if r.owner is not None and r.owner.on_this_machine()]
        for host in sorted({r.owner.host for r in records if r.owner and r not in here}):
            log.warning(
                "run %s's tasks on %s cannot be checked from here; they die with their "
                "worker there",
                run,
                host,
            )
        ended += _end_run(run, here)
        for record in records:
            try:
                record.path.unlink()
            except FileNotFoundError:
                pass
    return ended


def _end_run(run: str, records: list[Record]) -> int:
    """End what the processes of ``run`` that wrote ``records`` (on this machine) left."""
    for record in records:
        _wait_for_owner(run, record)
    victims: dict[int, int] = {}
    for record in records:
        victims.update(_survivors(record))
    for pid in _ancestors():  # never this process or what runs it
        victims.pop(pid, None)
    if not victims:
        return 0
    tasks = sorted({a[0] for r in records for a in r.attempts if a[2] in victims})
    _terminate(victims)
    named = ", ".join(tasks[:10]) + (f" and {len(tasks) - 10} more" if len(tasks) > 10 else "")
    log.warning(
        "run %s's driver died but %d of its task process(es) still ran on this host%s: "
        "ended them (SIGTERM, then SIGKILL after %gs) before starting any task",
        run,
        len(victims),
        f" (tasks {named})" if named else "",
        GRACE,
    )
    return len(victims)


def _wait_for_owner(run: str, record: Record) -> None:
    """Wait for the process that wrote ``record`` to end (a worker of a dead driver
    takes a moment), or refuse to start beside it."""
    owner = record.owner
    if owner is None or owner.pid == os.getpid():
        return
    deadline = time.monotonic() + OWNER_WAIT
    while owner.alive_here() and time.monotonic() < deadline:
        time.sleep(0.1)
    if owner.alive_here():
        raise RunError(
            f"process {owner.pid} of run {run} still runs on this host, and so may "
            "that run's tasks",
            hint=f"wait for it to end, or end it (hpcflow cancel {run}, or kill "
            f"{owner.pid}), then run again",
        )


def _survivors(record: Record) -> dict[int, int]:
    """The live processes of ``record``'s attempts: pid → its start ticks."""
    found: dict[int, int] = {}
    for _task, _attempt, pid, ticks in record.attempts:
        if ticks is not None and is_alive(pid, ticks):
            found[pid] = ticks
    if record.mark:
        for pid in marked(record.mark):
            ticks = start_ticks(pid)
            if ticks is not None:  # (not one that has just ended)
                found.setdefault(pid, ticks)
    return found


def _ancestors() -> set[int]:
    """This process and its ancestors."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read()
            pid = int(stat[stat.rfind(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def _terminate(victims: dict[int, int]) -> None:
    """SIGTERM each victim (and the group it leads), SIGKILL after :data:`GRACE`."""

    def send(sig: int) -> None:
        for pid, ticks in victims.items():
            if not is_alive(pid, ticks):
                continue
            try:
                if os.getpgid(pid) == pid:
                    os.killpg(pid, sig)
                else:
                    os.kill(pid, sig)
            except OSError:
                continue

    send(signal.SIGTERM)
    deadline = time.monotonic() + GRACE
    while time.monotonic() < deadline:
        if not any(is_alive(pid, ticks) for pid, ticks in victims.items()):
            return
        time.sleep(0.05)
    send(signal.SIGKILL)
