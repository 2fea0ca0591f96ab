"""Fault 1 (pilot): a worker process of the allocation is SIGKILLed mid-task.

Its nanny (the worker rank's own process) restarts it, Dask re-runs the task, the run
completes, and the killed attempt's processes are reaped instead of writing on.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import write_workflow
from tests.fault.test_worker_killed import WF, kill_a_worker_mid_task, outputs_are_the_retries_only

pytestmark = pytest.mark.slurm
# The default profile (worker_nanny: true); with false the run dies with its only worker.
EXTRA: dict[str, str] = {}


def test_killed_pilot_worker_task_is_rerun_and_its_output_not_trusted(tmp_path, slurm_env):
    (tmp_path / "pids").mkdir()
    wf = write_workflow(tmp_path, WF.replace("worker-kill", "pilot-worker-kill"))
    run = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "-q", "--profile",
         "slurm-test"],
        cwd=tmp_path, env={**slurm_env, **EXTRA}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    kill_a_worker_mid_task(tmp_path, timeout=90)
    out, err = run.communicate(timeout=180)
    assert run.returncode == 0, out + err
    outputs_are_the_retries_only(tmp_path)
