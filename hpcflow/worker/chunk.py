"""A chunk of task calls on one worker: what the driver hands Dask (or the pool) as one task.

The chunk's plain shell tasks run several to a long-lived shell
(:mod:`hpcflow.worker.shell_batch`) when there are enough of them; every other call runs
on its own (:func:`hpcflow.worker.execute.run_call`). This module sits above both, so that
neither imports the other's caller.
"""

from __future__ import annotations

import pickle
import time

from hpcflow.worker.calls import Outcome, TaskCall
from hpcflow.worker.execute import cancelled, run_call
from hpcflow.worker.groups import LIVE
from hpcflow.worker.shell_batch import batchable, run_batch


def run_chunk(calls: list[TaskCall], inline: bool = True) -> list[Outcome]:
    """Run ``calls`` in order and return one outcome each (cancelled ones included).

    Tiny shell tasks run several to a shell (:mod:`hpcflow.worker.shell_batch`) when
    there are enough of them. ``inline=False``: Python tasks always run as child
    processes (the pool engine, where this process is the driver).
    """
    together = batchable(calls)
    outcomes: dict[int, Outcome] = {}
    if together:
        for outcome in run_batch(together):
            outcomes[outcome.index] = outcome
    for call in calls:
        if call.index in outcomes:
            continue
        if LIVE.cancelled:
            outcomes[call.index] = cancelled(call, time.time())
            continue
        outcomes[call.index] = run_call(call, inline)
    return [outcomes[call.index] for call in calls]


def pack_chunk(calls: list[TaskCall]) -> bytes:
    """``calls`` as one pickle, for a Dask task's argument: the scheduler passes bytes on
    as they are, where it would unpickle and pickle again every call of a chunk."""
    try:
        return pickle.dumps(calls, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - a value pickle cannot take (a lambda, a local class)
        import cloudpickle

        return bytes(cloudpickle.dumps(calls, protocol=pickle.HIGHEST_PROTOCOL))


def run_packed_chunk(packed: bytes) -> list[Outcome]:
    """:func:`run_chunk` of the calls :func:`pack_chunk` packed (in a Dask worker)."""
    # The driver packed it; Dask hands every task's arguments over as pickles too, on
    # connections only the run's own processes can open (TLS with the run's keys).
    calls: list[TaskCall] = pickle.loads(packed)  # noqa: S301
    return run_chunk(calls)
