"""A value that stays on its Dask worker (worker/made.py): kept with its outcome, counted
at its real size by Dask, measured when another worker fetches it, and refused, naming
the task's value size and the worker's limit, when it cannot fit."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hpcflow.store.states import TaskState
from hpcflow.worker.made import outcome_of, run_made
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
        n_workers=2, threads_per_worker=1, processes=False, memory_limit="64MiB",
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
    value, made_outcome = made.result(timeout=60)
    assert value.shape == (1000,) and made_outcome.values.nbytes == value.nbytes
    assert made_outcome.values.type == "numpy.ndarray" and outcome.values.received == 8000


def test_dask_counts_a_value_at_its_size_and_the_bytes_fetched_from_another_worker(
    tmp_path, client
):
    first, second = sorted(client.scheduler_info()["workers"])
    made = client.submit(run_made, _ones(tmp_path, 4, 100_000), {}, workers=[first], pure=False)
    consumer = task_call(tmp_path, 5, "", kind="python", python="numpy:sum", kwargs={})
    consumer.workdir = os.getcwd()
    received = {"a": ("value", [(None, made)])}
    used = client.submit(run_made, consumer, received, workers=[second], pure=False)
    _, outcome = used.result(timeout=60)
    assert outcome.state == TaskState.SUCCEEDED, outcome.message
    # Dask sees the value's 800 kB (placement near the data, spilling, memory limits
    # depend on it), and the consumer's transfer of it from the other worker is counted.
    assert client.nbytes(summary=False)[made.key] >= 800_000
    assert 800_000 <= outcome.values.moved < 801_000, outcome.values
    assert outcome.values.received == 800_000


@pytest.mark.parametrize("child", [False, True], ids=["in-process", "child-process"])
def test_a_value_beyond_the_worker_memory_limit_fails_its_task(tmp_path, client, child):
    call = _ones(tmp_path, 3, 20_000_000)  # 160 MB
    call.journal = str(tmp_path / "journal" / "run")
    call.task_id, call.fingerprint = "ones", "f"
    if child:  # a timeout makes it a child process, which writes its value to a file
        call.timeout = 600.0
        call.value_out = str(tmp_path / "value.pickle")
    made = client.submit(run_made, call, {}, pure=False)
    value, outcome = made.result(timeout=60)
    assert outcome.state == TaskState.FAILED and value is None
    assert "0.15 GiB" in outcome.message and "limit of 0.06 GiB" in outcome.message
    # Never journalled as a success: a resumed run must not take it as done.
    # (The folder also holds the record of the attempt's leader: hpcflow/worker/leaders.py.)
    assert not list((tmp_path / "journal").glob("*.jsonl"))
