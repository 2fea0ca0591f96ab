"""The driver fetching an ended engine task's result whose worker has died since: with
no worker left, Dask would wait to make it again for ever (a pilot whose workers' launch
died hung so until its walltime, found by the fault campaign). The fetch gives up after
FETCH_SECONDS, counts the chunk as lost and cancels it, so Dask does not run it again
behind the driver's back. A real local Dask cluster; its one worker process is SIGKILLed."""

from __future__ import annotations

import subprocess
import sys
import time
from types import SimpleNamespace

import distributed

from hpcflow.engine import driver as driver_module


def test_a_result_lost_with_the_last_worker_is_given_up_not_waited_for(monkeypatch):
    monkeypatch.setattr(driver_module, "FETCH_SECONDS", 2.0)
    with distributed.LocalCluster(
        n_workers=0, processes=False, protocol="tcp", host="127.0.0.1", dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:  # fmt: skip
        # One worker process of its own, no nanny: killed, it is not started again.
        worker = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", cluster.scheduler_address,
             "--no-nanny", "--nthreads", "1", "--no-dashboard"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
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
            started = time.monotonic()
            (result,) = driver_module.Driver._results(SimpleNamespace(client=client), [future])
            assert isinstance(result, Exception), result
            assert time.monotonic() - started < 30
            assert future.status == "cancelled"
        finally:
            worker.kill()
            worker.wait()
