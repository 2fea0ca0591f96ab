"""Jobs mode against a REAL QOS limit: sbatch refusals are waited out, not failures.

A private cluster with slurmdbd and enforced limits (``start_cluster(accounting=True,
enforce_limits=True)``); the QOS allows 2 submitted jobs per user, the workflow has 5
independent tasks: SLURM refuses the third sbatch with QOSMaxSubmitJobPerUserLimit
until one of ours ends, and the run finishes with every task done.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import write_workflow
from tests.integration.slurm.conftest import queue_drains
from tests.slurm_cluster import start_test_cluster

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def limited_cluster():
    cluster = start_test_cluster(
        "with enforced limits",
        nodes=2, cpus=2, gpus=0, timeout=60, accounting=True, enforce_limits=True,
    )  # fmt: skip
    try:
        cluster.run(["sacctmgr", "-i", "modify", "qos", "normal", "set",
                     "MaxSubmitJobsPerUser=2"])  # fmt: skip
        yield cluster
    finally:
        cluster.stop()


def test_a_qos_submit_limit_means_waiting(tmp_path, limited_cluster, env):
    tasks = "\n".join(
        f"  - name: t{k}\n    command: sleep 1; echo {k} > {{outputs}}\n    outputs: [out/{k}.txt]"
        for k in range(5)
    )
    wf = write_workflow(tmp_path, f"name: limited\ntasks:\n{tasks}\n")
    run_env = {
        **env,
        **limited_cluster.extra_env,
        "HPCFLOW_SUBMIT_RATE": "20",
        "HPCFLOW_POLL_INTERVAL": "0.5",
        "HPCFLOW_MAX_POLL_INTERVAL": "2",
    }
    result = subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile", "slurm-test",
         "--mode", "jobs", "-q"],
        cwd=tmp_path, env=run_env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    logs = "\n".join(p.read_text() for p in tmp_path.glob(".hpcflow/runs/*/driver.log"))
    assert result.returncode == 0, result.stdout + result.stderr + logs
    assert sorted(os.listdir(tmp_path / "out")) == [f"{k}.txt" for k in range(5)]
    # SLURM really refused (the limit was real), and the run waited instead of failing.
    assert "queue limit reached" in logs and "QOSMaxSubmitJobPerUserLimit" in logs, logs
    # A job's record stays COMPLETING for a moment after the run has seen it end: wait for
    # the queue to empty rather than expect it empty the instant the command returns.
    assert queue_drains(limited_cluster) == []
