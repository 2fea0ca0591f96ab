"""A value that stays on its Dask worker (worker/made.py): kept with its outcome, and
refused, naming the task's value size and the worker's limit, when it cannot fit."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hpcflow.store.states import TaskState
from hpcflow.worker.made import Made, outcome_of, run_made
from tests.conftest import task_call


@pytest.fixture(scope="module")
def client():
    import dask
    from distributed import Client, LocalCluster

    # The worker shares this test's process, whose memory is far above the limit: only
    # the limit itself is under test, not pausing or spilling.
    off = {
        f"distributed.worker.memory.{k}": False for k in ("target", "spill", "pause", "terminate")
    }
    with dask.config.set(off), LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, memory_limit="64MiB",
        dashboard_address=None,
    ) as cluster, Client(cluster) as client:  # fmt: skip
        yield client


def _ones(tmp_path, index: int, n: int):  # type: ignore[no-untyped-def]
    call = task_call(tmp_path, index, "", kind="python", python="numpy:ones", kwargs={"shape": n})
    call.workdir = os.getcwd()  # runs in the worker's process
    call.received = True
    return call


def test_a_value_stays_with_its_outcome_and_reaches_its_consumer(tmp_path, client):
    made = client.submit(run_made, _ones(tmp_path, 1, 1000), {}, pure=False)
    consumer = task_call(tmp_path, 2, "", kind="python", python="numpy:sum", kwargs={})
    consumer.workdir = os.getcwd()
    used = client.submit(run_made, consumer, {"a": ("value", [(None, made)])}, pure=False)
    (outcome,) = client.submit(outcome_of, used, pure=False).result(timeout=60)
    assert outcome.state == TaskState.SUCCEEDED, outcome.message
    assert json.loads(Path(consumer.result).read_text()) == 1000.0  # it summed the ones
    result = made.result(timeout=60)
    assert isinstance(result, Made) and result.value.shape == (1000,)


def test_a_value_beyond_the_worker_memory_limit_fails_its_task(tmp_path, client):
    made = client.submit(run_made, _ones(tmp_path, 3, 20_000_000), {}, pure=False)  # 160 MB
    result = made.result(timeout=60)
    assert result.outcome.state == TaskState.FAILED
    assert result.value is None
    assert "0.15 GiB" in result.outcome.message and "limit of 0.06 GiB" in result.outcome.message
