"""Checkpoint signals: the driver asks every worker to signal the tasks that asked for a
warning before the walltime (``checkpoint:``), and a task stopped that way is
*interrupted*, not failed. Standard library only: Dask workers import it."""

from __future__ import annotations

import threading

from hpcflow.worker.groups import signal_group

_LOCK = threading.Lock()
#: (task index, attempt) → process group of the attempt running on this worker.
_RUNNING: dict[tuple[int, int], int] = {}
#: Attempts this worker has signalled.
_SIGNALLED: set[tuple[int, int]] = set()


def started(index: int, attempt: int, pgid: int) -> None:
    """An attempt that asked for a checkpoint signal runs in group ``pgid``."""
    with _LOCK:
        _RUNNING[(index, attempt)] = pgid


def ended(index: int, attempt: int) -> bool:
    """The attempt's process has ended; whether it had been signalled."""
    with _LOCK:
        _RUNNING.pop((index, attempt), None)
        signalled = (index, attempt) in _SIGNALLED
        _SIGNALLED.discard((index, attempt))
    return signalled


def signal_attempts(attempts: list[tuple[int, int]], signum: int) -> list[tuple[int, int]]:
    """Send ``signum`` to those of ``attempts`` that run on this worker (the driver runs
    this on every worker); return the ones signalled here."""
    sent = []
    with _LOCK:
        for key in map(tuple, attempts):
            pgid = _RUNNING.get(key)  # type: ignore[arg-type]
            if pgid is not None:
                _SIGNALLED.add(key)  # type: ignore[arg-type]
                sent.append((pgid, key))
    for pgid, _ in sent:
        signal_group(pgid, signum)
    return [key for _, key in sent]  # type: ignore[misc]
