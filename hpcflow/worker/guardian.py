"""A watcher that kills a process's tasks when that process dies, however it dies.

Each process that starts tasks (the driver with the pool engine, a Dask worker, a pilot's
worker) has one :class:`Guardian`: a small child process, in a session of its own, that
holds the read end of a pipe only its owner writes to. When the owner dies (``kill -9``,
the OOM killer, a crash) the kernel closes the pipe, the guardian reads EOF and kills:

* every process whose environment carries the owner's token (:data:`MARK_VAR`), with the
  process group it leads: each task gets it (:meth:`Guardian.env`), and whatever a task
  starts inherits it, even in a session of its own (``setsid``), a double fork or an MPI
  launcher's ranks;
* every process group the owner registered (:meth:`Guardian.watch`): a task that cleared
  its environment (``env -i``, a container's ``--cleanenv``) is still killed with its
  group.

It sweeps until a round finds nothing left (a task forking while it is being killed), then
exits. A task process that its owner's death leaves running would run on unseen and write
the outputs its re-run writes too. Linux only (``/proc``), as hpcflow is.

The guardian is started with the interpreter's ``-c`` and imports nothing from hpcflow: it
is running within a few hundredths of a second, in whatever environment the owner has.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Callable

from hpcflow.store.process import MARK_VAR

log = logging.getLogger(__name__)

# MARK_VAR (hpcflow.store.process) marks a process as a task (or a task's descendant)
# of one owner process: its value is the owner's token.

#: What the guardian runs (standard library only): wait for EOF on stdin while noting the
#: groups the owner registers ("+pgid" / "-pgid" lines), then kill every marked process
#: and every registered group, round after round until none is left.
_WATCH = r"""
import os, signal, sys, time
for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGPIPE"):
    signal.signal(getattr(signal, name), signal.SIG_IGN)
token = sys.argv[1].encode()
prefix = sys.argv[2].encode() + b"="
groups = set()
pending = b""
while True:
    data = os.read(0, 65536)
    if not data:
        break
    *lines, pending = (pending + data).split(b"\n")
    for line in lines:
        if line[:1] == b"+":
            groups.add(int(line[1:]))
        elif line[:1] == b"-":
            groups.discard(int(line[1:]))
me = os.getpid()


def marked():
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        for entry in data.split(b"\0"):
            if entry.startswith(prefix) and token in entry[len(prefix) :].split(b":"):
                found.append(int(name))
    return found


def kill(pgid_or_pid, group):
    try:
        if group:
            os.killpg(pgid_or_pid, signal.SIGKILL)
        else:
            os.kill(pgid_or_pid, signal.SIGKILL)
    except OSError:
        pass


killed = 0
for _ in range(100):
    victims = marked()
    for pgid in groups:
        kill(pgid, True)
    groups = set()
    for pid in victims:
        try:
            pgid = os.getpgid(pid)
        except OSError:
            continue
        # Its group too where it leads one (a task does); never a group it only joined,
        # such as its driver's, which may hold the shell script that started the driver.
        kill(pid, pgid == pid)
    killed += len(victims)
    if not victims:
        break
    time.sleep(0.02)
if killed:
    sys.stderr.write("hpcflow: killed %d task process(es) whose run's process died\n" % killed)
"""


class Guardian:
    """This process's guardian, started on first use (one per process, for its life)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._write: int | None = None
        self._failed = False
        self.token = ""

    def _start(self) -> None:
        token = f"{os.getpid()}-{secrets.token_hex(8)}"
        if not sys.executable:  # an embedded interpreter names no program to start
            raise OSError("no Python interpreter to start the guardian with")
        proc = subprocess.Popen(
            [sys.executable, "-c", _WATCH, token, MARK_VAR],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,  # not killed with its owner's process group
            close_fds=True,
        )
        if proc.stdin is None:
            raise RuntimeError("the guardian's pipe is missing")
        self._proc, self.token = proc, token
        self._write = proc.stdin.fileno()
        log.debug("guardian %d watches process %d (token %s)", proc.pid, os.getpid(), token)

    def env(self) -> dict[str, str]:
        """The variable a task's environment gets, so that it dies with this process."""
        with self._lock:
            if self._proc is None:
                if self._failed:
                    return {}
                try:
                    self._start()
                except OSError as exc:  # no interpreter to start: tasks run unguarded
                    self._failed = True  # (said once)
                    log.warning("cannot start the guardian of process %d: %s", os.getpid(), exc)
                    return {}
        return {MARK_VAR: self.token}

    def with_env(self, env: dict[str, str] | None) -> dict[str, str]:
        """``env`` (None: this process's environment) with this process's mark added to
        the marks it has (a run inside a task of another run: its tasks die with either)."""
        base = os.environ if env is None else env
        mine = self.env().get(MARK_VAR)
        if not mine:
            return dict(base)
        outer = base.get(MARK_VAR)
        return {**base, MARK_VAR: f"{outer}:{mine}" if outer and mine not in outer else mine}

    def watch(self, pgid: int) -> None:
        """Kill process group ``pgid`` too if this process dies before :meth:`forget`."""
        self._send(f"+{pgid}\n")

    def forget(self, pgid: int) -> None:
        """Group ``pgid`` has ended (its number may be reused)."""
        self._send(f"-{pgid}\n")

    def _send(self, line: str) -> None:
        with self._lock:
            if self._write is None:
                return
            with contextlib.suppress(OSError):  # a guardian that died cannot be told
                os.write(self._write, line.encode())

    def _forked(self) -> None:
        """In a forked child: the parent's guardian watches the parent, not this child."""
        self._lock = threading.Lock()
        if self._proc is not None and self._proc.stdin is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
        self._proc, self._write, self.token, self._failed = None, None, "", False


#: This process's guardian.
GUARDIAN = Guardian()

os.register_at_fork(after_in_child=GUARDIAN._forked)


def marked_by(match: Callable[[list[str]], bool]) -> list[int]:
    """The processes whose marks (:data:`MARK_VAR`, one per owner they run under) satisfy
    ``match``."""
    prefix = f"{MARK_VAR}=".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        for entry in data.split(b"\0"):
            if entry.startswith(prefix):
                marks = entry[len(prefix) :].decode("ascii", "replace").split(":")
                if match(marks):
                    found.append(int(name))
    return found


def marked(mark: str) -> list[int]:
    """The processes that carry ``mark``."""
    return marked_by(lambda marks: mark in marks)


def current_mark() -> str:
    """The mark this process's tasks carry: its guardian's, or (a pool's worker, which
    has none) the one its environment was given."""
    return GUARDIAN.token or os.environ.get(MARK_VAR, "")


def claim_environment() -> None:
    """Mark this process's own environment, so that anything started from it (a Python
    task's subprocesses) carries the token too. Only in processes hpcflow owns (a worker),
    never in a user's process that drives a run."""
    os.environ.update(GUARDIAN.env())
