"""Return values that stay on the Dask worker that made them (``from:`` in Dask runs).

In a run on Dask (``--engine dask``, pilot, elastic) a python task whose value other
tasks receive is a Dask task of its own that returns a :class:`Made`: its outcome and
its value. The value stays in that worker's memory; a consumer's task names the
producers' futures, so Dask moves each value straight from the worker that holds it to
the one that needs it, over the run's transport (TCP, TLS or UCX, with Dask's own
serialisers: NumPy arrays as buffers, CuPy arrays device to device on UCX). The driver
reads only the outcome (:func:`outcome_of`, run where the value is).

A producer that did not run in this run (it was up to date) hands its value on as its
file instead (:mod:`hpcflow.store.values`).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from hpcflow.store.states import TaskState
from hpcflow.store.values import load_value, save_value
from hpcflow.worker.calls import Outcome, TaskCall
from hpcflow.worker.execute import in_process, run_call_for_value
from hpcflow.worker.values import assemble

log = logging.getLogger(__name__)

#: Argument name → (shape, [(key, a producer's Made, or the path of its value file)]).
Received = dict[str, tuple[str, list[tuple[Any, Any]]]]


@dataclass(slots=True)
class Made:
    """A python task's outcome, and its return value while other tasks need it."""

    outcome: Outcome
    value: Any = None


def run_made(call: TaskCall, received: Received) -> Made:
    """Run ``call`` on this worker with the values it receives (Dask has fetched the
    producers' :class:`Made` here); keep its value in the result."""
    given = {
        name: assemble(shape, [(key, _value_of(source)) for key, source in sources])
        for name, (shape, sources) in received.items()
    }
    if given and not in_process(call):
        # It runs as a child process (a timeout, another folder): hand the values over
        # as files beside its logs.
        call.values_in = _spill(call, given)
        given = {}
    outcome, value = run_call_for_value(call, True, given)
    if outcome.state == TaskState.SUCCEEDED and call.received:
        if value is None and call.value_out and os.path.exists(call.value_out):
            value = load_value(call.value_out)  # made by a child process
        too_big = _beyond_memory(value)
        if too_big is not None:
            outcome.state, outcome.message, value = TaskState.FAILED, too_big, None
    return Made(outcome, value)


def outcome_of(made: Made) -> list[Outcome]:
    """What the driver needs of a :class:`Made`: its outcome (as a chunk's list)."""
    return [made.outcome]


def _value_of(source: Any) -> Any:
    return source.value if isinstance(source, Made) else load_value(source)


def _spill(call: TaskCall, given: dict[str, Any]) -> dict[str, tuple[str, list[tuple[Any, str]]]]:
    folder = os.path.join(os.path.dirname(call.result), f"{call.attempt}.received")
    out = {}
    for name, value in given.items():
        path = os.path.join(folder, f"{name}.pickle")
        save_value(path, value)
        out[name] = ("value", [(None, path)])
    return out


def _beyond_memory(value: Any) -> str | None:
    """Why ``value`` cannot stay on this worker: larger than its memory limit."""
    if value is None:
        return None
    try:
        from dask.sizeof import sizeof
        from distributed import get_worker

        limit = get_worker().memory_manager.memory_limit
    except (ImportError, ValueError, AttributeError):  # not on a Dask worker
        return None
    size = int(sizeof(value))
    if limit and size > limit:
        return (
            f"its return value is {size / 2**30:.2f} GiB, more than the worker's memory "
            f"limit of {limit / 2**30:.2f} GiB (raise worker memory in the profile, or "
            "return less)"
        )
    return None
