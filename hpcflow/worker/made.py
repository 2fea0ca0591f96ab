"""Return values that stay on the Dask worker that made them (``from:`` in Dask runs).

In a run on Dask (``--engine dask``, pilot, elastic) a python task whose value other
tasks receive is a Dask task of its own that returns a :data:`Made`: its value and its
outcome. The value stays in that worker's memory; a consumer's task names the
producers' futures, so Dask moves each value straight from the worker that holds it to
the one that needs it, over the run's transport (TCP, TLS or UCX, with Dask's own
serialisers: NumPy arrays as buffers, CuPy arrays device to device on UCX). The driver
reads only the outcome (:func:`outcome_of`, run where the value is).

A :data:`Made` is a plain tuple on purpose: Dask serialises the items of a plain tuple
each with its own serialiser family (a CuPy array with the ``cuda`` one on UCX, not
pickled through host memory) and counts its size as the sum of theirs, so the worker's
memory limits, spilling and the scheduler's placement near the data see the value's
real size.

A producer that did not run in this run (it was up to date) hands its value on as its
file instead (:mod:`hpcflow.store.values`).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from hpcflow.store.states import TaskState
from hpcflow.store.values import load_value, save_value, worker_key
from hpcflow.worker.calls import Outcome, TaskCall, ValueStats
from hpcflow.worker.execute import in_process, run_call_for_value
from hpcflow.worker.value_writes import save_later
from hpcflow.worker.values import assemble, size_of, type_name

log = logging.getLogger(__name__)

#: A python task's return value (None unless other tasks receive it) and its outcome.
Made = tuple[Any, Outcome]

#: Argument name → (shape, [(key, a producer's Made, or the path of its value file)]).
Received = dict[str, tuple[str, list[tuple[Any, Any]]]]


def run_made(call: TaskCall, received: Received) -> Made:
    """Run ``call`` on this worker with the values it receives (Dask has fetched the
    producers' :data:`Made` here); keep its value in the result."""
    values = {
        id(source): _value_of(source, call.value_key)
        for _, sources in received.values()
        for _, source in sources
    }
    given = {
        name: assemble(shape, [(key, values[id(source)]) for key, source in sources])
        for name, (shape, sources) in received.items()
    }
    child = not in_process(call)
    if given and child:
        # It runs as a child process (a timeout, another folder): hand the values over
        # as files beside its logs.
        call.values_in = _spill(call, given)
        given = {}
    # Run here, the value's file is written in the background (a child process writes
    # its own: that is how its value comes back).
    later, call.value_out = ("", call.value_out) if child else (call.value_out, "")
    # A value too big to stay here fails the attempt before it is journalled as a success
    # (a resumed run would take it as done and find no value). A child's value is loaded
    # from the file it wrote.
    outcome, value = run_call_for_value(
        call, True, given, lambda made: _beyond_memory(size_of(made)) if call.received else None
    )
    if outcome.state != TaskState.SUCCEEDED:
        return None, outcome
    known = not child or call.value_out != ""  # a child's value is known by its file
    outcome.values = ValueStats(
        type=type_name(value) if known else None,
        nbytes=size_of(value) if known else None,
        received=sum(size_of(v) for v in values.values()),
        moved=_moved(),
    )
    if later:
        save_later(later, value, worker_key(call.value_key))
    return (value if call.received else None), outcome


def outcome_of(made: Made) -> list[Outcome]:
    """What the driver needs of a :data:`Made`: its outcome (as a chunk's list)."""
    return [made[1]]


def _value_of(source: Any, key_file: str) -> Any:
    return load_value(source, worker_key(key_file)) if isinstance(source, str) else source[0]


def _spill(call: TaskCall, given: dict[str, Any]) -> dict[str, tuple[str, list[tuple[Any, str]]]]:
    folder = os.path.join(os.path.dirname(call.result), f"{call.attempt}.received")
    out = {}
    for name, value in given.items():
        path = os.path.join(folder, f"{name}.pickle")
        save_value(path, value, worker_key(call.value_key))
        out[name] = ("value", [(None, path)])
    return out


def _moved() -> int:
    """Bytes of this task's inputs that Dask fetched from other workers (the transfers it
    caused, from the worker's log of incoming transfers; 0 off a Dask worker)."""
    try:
        from distributed import get_worker

        worker = get_worker()
        wanted = {dep.key for dep in worker.state.tasks[worker.get_current_task()].dependencies}
        log = list(worker.transfer_incoming_log)
    except (ImportError, ValueError, AttributeError, KeyError):
        return 0
    moved = 0
    for entry in reversed(log):
        for key, nbytes in entry.get("keys", {}).items():
            if key in wanted:
                moved += int(nbytes or 0)
                wanted.discard(key)
        if not wanted:
            break
    return moved


def _beyond_memory(size: int | None) -> str | None:
    """Why a value of ``size`` bytes cannot stay on this worker: larger than its memory
    limit."""
    if size is None:
        return None
    try:
        from distributed import get_worker

        limit = get_worker().memory_manager.memory_limit
    except (ImportError, ValueError, AttributeError):  # not on a Dask worker
        return None
    if limit and size > limit:
        return (
            f"its return value is {size / 2**30:.2f} GiB, more than the worker's memory "
            f"limit of {limit / 2**30:.2f} GiB (raise worker memory in the profile, or "
            "return less)"
        )
    return None
