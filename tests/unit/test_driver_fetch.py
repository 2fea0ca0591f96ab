"""The driver fetching an ended engine task's result whose worker has died since: with
no worker left, Dask would wait to make it again for ever (a pilot whose workers' launch
died hung so until its walltime, found by the fault campaign). The fetch ends the run at
once (WorkersGone) when the driver's check says no worker is left; untold, it gives up
after FETCH_SECONDS, counts the chunk as lost and cancels it, so Dask does not run it
again behind the driver's back. A real local Dask cluster; its one worker process is SIGKILLed."""

from __future__ import annotations

import subprocess
import sys
import time
from types import SimpleNamespace

import distributed
import pytest

from hpcflow.engine import driver as driver_module
from hpcflow.errors import WorkersGone


def test_a_result_lost_with_the_last_worker_is_given_up_not_waited_for(monkeypatch):
    with distributed.LocalCluster(
        n_workers=0, processes=False, protocol="tcp", host="127.0.0.1", dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:  # fmt: skip
        worker = _worker(cluster.scheduler_address)
        try:
            client.wait_for_workers(1, timeout=60)
            future = client.submit(pow, 7, 2, pure=False)  # (a builtin: the worker has it)
            distributed.wait(future, timeout=60)
            assert future.status == "finished"
            worker.kill()
            worker.wait()
            deadline = time.monotonic() + 60
            while client.scheduler_info()["workers"] and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not client.scheduler_info()["workers"], "the worker did not go"
            # The driver's loop asks whether any worker is left while it waits: no.
            gone = SimpleNamespace(client=client, workers_gone=lambda: "every worker is gone")
            monkeypatch.setattr(driver_module, "FETCH_SECONDS", 60.0)
            started = time.monotonic()
            with pytest.raises(WorkersGone, match="every worker is gone"):
                driver_module.Driver._results(gone, [future])
            assert time.monotonic() - started < 10, "it waited for the result all the same"
            # Not told (a run with pools: other workers may come): given up after a while.
            monkeypatch.setattr(driver_module, "FETCH_SECONDS", 2.0)
            started = time.monotonic()
            plain = SimpleNamespace(client=client, workers_gone=None)
            (result,) = driver_module.Driver._results(plain, [future])
            assert isinstance(result, Exception), result
            assert time.monotonic() - started < 30
            assert future.status == "cancelled"
        finally:
            worker.kill()
            worker.wait()


def _worker(address: str) -> subprocess.Popen:
    """A Dask worker process of its own, no nanny: killed, it is not started again."""
    return subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", address,
         "--no-nanny", "--nthreads", "1", "--no-dashboard"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def test_a_result_lost_while_another_worker_is_there_is_waited_for(monkeypatch):
    """Another worker is there: Dask makes the lost result again on it, and the driver
    waits for that however long it takes (giving the chunk up would have the driver's
    retry run it a third time, beside Dask's second). Here the task sleeps 3 s, and the
    fetch would give up after 1 s with no worker."""
    monkeypatch.setattr(driver_module, "FETCH_SECONDS", 1.0)
    with distributed.LocalCluster(
        n_workers=0, processes=False, protocol="tcp", host="127.0.0.1", dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:  # fmt: skip
        first = _worker(cluster.scheduler_address)
        second = None
        try:
            client.wait_for_workers(1, timeout=60)
            future = client.submit(time.sleep, 3, pure=False)  # (a builtin: the worker has it)
            distributed.wait(future, timeout=60)
            first.kill()
            first.wait()
            second = _worker(cluster.scheduler_address)
            client.wait_for_workers(1, timeout=60)
            driver = SimpleNamespace(client=client, workers_gone=None)
            (result,) = driver_module.Driver._results(driver, [future])
            assert result is None, result  # time.sleep's: made again, not given up
        finally:
            for proc in (first, second):
                if proc is not None:
                    proc.kill()
                    proc.wait()
