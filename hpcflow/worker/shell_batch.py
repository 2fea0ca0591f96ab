"""Which shell tasks of a chunk share a long-lived shell, and their outcomes.

Starting ``bash -c CMD`` costs about 1 ms of exec and start-up per task, more than a
tiny task itself (``echo i > out_i.txt``). The chunk's plain shell tasks run instead in
one of the process's long-lived job-control shells (:mod:`hpcflow.worker.shells`),
each still a process group of its own with its own logs, folder and environment. Inputs
are checked, stale outputs removed, outputs checked and failed outputs quarantined per
task, as for any task (:func:`hpcflow.worker.execute.prepare_call` / ``conclude_call``).
Not kept: the peak memory of each task (the shell cannot tell it).

Only shell tasks without a timeout (a timeout needs its own timer process), without
``scratch`` (:mod:`hpcflow.worker.scratch` wraps each run) and with
plain environment variable names take part, and only with bash 5 or newer (for
``$EPOCHREALTIME``); a chunk of one such task only when the driver expects it to be
tiny (:attr:`TaskCall.tiny`: its first tasks always run alone, so each task definition's
peak memory is measured). Everything else runs one process per task.
"""

from __future__ import annotations

import functools
import re
import signal
import subprocess
import time
from collections.abc import Sequence

from hpcflow.worker.calls import Outcome, TaskCall
from hpcflow.worker.execute import cancelled, conclude_call, prepare_call
from hpcflow.worker.groups import LIVE
from hpcflow.worker.shells import SHELLS

#: Fewest shell tasks worth a shared shell (one is, if it is tiny).
MIN_BATCH = 2

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@functools.lru_cache(maxsize=1)
def bash_supports_batches() -> bool:
    """Whether ``bash`` here is 5 or newer (``$EPOCHREALTIME``)."""
    try:
        out = subprocess.run(
            ["bash", "-c", "echo ${BASH_VERSINFO[0]}"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return False
    return out.isdigit() and int(out) >= 5


def _fits(call: TaskCall) -> bool:
    return (
        call.kind == "shell"
        and call.timeout is None
        and not call.gpus  # its own CUDA_VISIBLE_DEVICES
        and not call.checkpoint_signal  # a process group of its own to signal
        and call.scratch is None  # a folder of its own made and copied back around it
        and all(_NAME.fullmatch(name) for name in (call.env or {}))
    )


def batchable(calls: Sequence[TaskCall]) -> list[TaskCall]:
    """The calls of a chunk that run together in shells (none if too few)."""
    together = [c for c in calls if _fits(c)]
    if not together or not bash_supports_batches():
        return []
    if len(together) < MIN_BATCH and not all(c.tiny for c in together):
        return []
    return together


def run_batch(calls: list[TaskCall]) -> list[Outcome]:
    """Run shell ``calls`` in one of this process's shells; one outcome each, in order."""
    outcomes: list[Outcome] = []
    ready: list[tuple[TaskCall, dict[str, list[int]]]] = []
    for call in calls:
        if LIVE.cancelled:
            outcomes.append(cancelled(call, time.time()))
            continue
        try:
            inputs_sig, failed = prepare_call(call)
        except OSError as exc:
            now = time.time()
            outcomes.append(Outcome.failed(call, now, f"cannot start: {exc}"))
            continue
        if failed is not None:
            outcomes.append(failed)
        else:
            ready.append((call, inputs_sig))
    if ready:
        group = [call for call, _ in ready]
        signatures = {call.index: sig for call, sig in ready}
        if LIVE.cancelled:
            outcomes.extend(cancelled(call, time.time()) for call in group)
        else:
            outcomes.extend(_run_group(group, signatures))
    order = {call.index: k for k, call in enumerate(calls)}
    return sorted(outcomes, key=lambda o: order[o.index])


def _run_group(group: list[TaskCall], signatures: dict[int, dict[str, list[int]]]) -> list[Outcome]:
    try:
        shell = SHELLS.acquire()
    except OSError as exc:
        now = time.time()
        return [Outcome.failed(c, now, f"cannot start: {exc}") for c in group]
    healthy = False
    concluded: dict[int, Outcome] = {}
    started: dict[int, float] = {}
    ended: dict[int, tuple[int, float]] = {}

    def on_end(k: int) -> None:
        # Concluded (outputs checked, success journaled) the moment the task ends, not when
        # the chunk does: a driver killed now loses only the tasks still running.
        call = group[k]
        concluded[k] = _outcome(k, call, started, ended, signatures[call.index])

    try:
        started, ended, healthy = shell.run(group, on_end, started, ended)
    finally:
        SHELLS.release(shell, healthy)
    return [
        concluded.get(k) or _outcome(k, call, started, ended, signatures[call.index])
        for k, call in enumerate(group)
    ]


def _outcome(
    k: int,
    call: TaskCall,
    started: dict[int, float],
    ended: dict[int, tuple[int, float]],
    inputs_sig: dict[str, list[int]],
) -> Outcome:
    begin = started.get(k, time.time())
    if k not in ended:
        if LIVE.cancelled or k not in started:
            return cancelled(call, begin) if LIVE.cancelled else _lost(call, begin)
        return _lost(call, begin)
    code, end = ended[k]
    message = None
    if code:
        message = f"exited with {code}"
        if code > 128 and (code - 128) in signal.valid_signals():
            message += f" (128 + {signal.Signals(code - 128).name}: killed by a signal)"
    return conclude_call(call, begin, code, None, message, inputs_sig, ended=end)


def _lost(call: TaskCall, started: float) -> Outcome:
    now = time.time()
    return Outcome.failed(
        call, now, "the shell running this task ended before it did", started=started
    )
