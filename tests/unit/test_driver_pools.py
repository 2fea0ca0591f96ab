"""The driver with pools, on a real Dask cluster in this process: tasks of a pool whose
workers have not arrived (its allocation still queued) wait in Dask without holding back
the tasks of a pool that has workers; once the last task of a releasable pool has ended,
the driver says so, once."""

from __future__ import annotations

import os
import threading
import time

import pytest

from hpcflow.engine.drive import drive
from hpcflow.engine.driver import PoolPlan
from hpcflow.engine.lifecycle import RunLife
from hpcflow.engine.pools import POOL_CAPACITY, pool_resource
from hpcflow.engine.prepare import RunOptions, prepare
from tests.conftest import write_workflow

WORKFLOW = """
name: pools
tasks:
  - name: later
    foreach: {i: {range: [0, 12]}}
    command: echo {i} > {outputs}
    outputs: ["later/{i}.txt"]
  - name: now
    foreach: {i: {range: [0, 6]}}
    command: echo {i} > {outputs}
    outputs: ["now/{i}.txt"]
"""


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_pool_without_workers_does_not_hold_back_another(tmp_path, monkeypatch):
    from distributed import Client, LocalCluster, Worker

    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    wf = write_workflow(tmp_path, WORKFLOW)
    options = RunOptions()
    prepared = prepare(wf, options)
    index = {t.spec.name: i for i, t in enumerate(prepared.graph.templates)}
    released: list[str] = []
    pools = PoolPlan(
        {index["later"]: "b", index["now"]: "a"},
        {"a": 1, "b": 1},
        frozenset({"a"}),
        on_done=released.append,
    )
    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None,
        resources={"cpus": 1, pool_resource("a"): POOL_CAPACITY},
    ) as cluster, Client(cluster) as client:  # fmt: skip
        seen: dict[str, object] = {}
        workers: list[Worker] = []

        async def pool_b_arrives() -> None:
            workers.append(
                await Worker(
                    cluster.scheduler_address,
                    nthreads=1,
                    dashboard=False,
                    resources={"cpus": 1, pool_resource("b"): POOL_CAPACITY},
                )  # fmt: skip
            )

        def watch() -> None:
            # Pool b has no worker: its 12 tasks wait, and pool a's 6 still all run.
            try:
                _wait_for(
                    lambda: (tmp_path / "now").exists()
                    and len(os.listdir(tmp_path / "now")) == 6,
                    60, "pool a's tasks did not run while pool b had no worker",
                )  # fmt: skip
                _wait_for(lambda: released == ["a"], 30, f"pool a was not released: {released}")
                seen["later before b"] = (tmp_path / "later").exists()
            finally:
                # Pool b's worker arrives (its allocation started): its tasks run.
                client.sync(pool_b_arrives)

        with RunLife(prepared, options) as life:
            prepared = life.create()
            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            summary = drive(prepared, life.db, life.run_id, client, 1, pools=pools)
            watcher.join(timeout=10)
        for worker in workers:
            client.sync(worker.close)
    assert seen == {"later before b": False}
    assert summary.ok, summary
    assert len(os.listdir(tmp_path / "later")) == 12
    assert released == ["a"]  # b is not releasable (the head's own pool)


@pytest.mark.parametrize("pool", ["a", None])
def test_tasks_ask_dask_for_their_pool(pool):
    from hpcflow.engine.driver import GroupKey

    wanted = GroupKey(2, 0.5, pool).dask_resources()
    assert wanted == {"cpus": 2.0, "GPU": 0.5, **({"pool-a": 1.0} if pool else {})}
