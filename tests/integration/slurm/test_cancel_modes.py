"""`hpcflow cancel RUN` from the submit side, for every batch mode: exit 0, no traceback,
nothing left in the queue, the run recorded as cancelled.

On the namespaced test cluster a pilot's driver runs on a node of its own (another host
name, another PID namespace): cancel must never signal the pid it recorded there. Jobs
mode: tests/integration/slurm/test_jobs_mode.py (test_cancel_stops_the_jobs_and_the_run).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.conftest import write_workflow
from tests.integration.slurm.conftest import queue_drains

pytestmark = pytest.mark.slurm

LONG = """
name: long
tasks:
  - name: nap
    foreach: {i: [1, 2]}
    command: sleep 300
"""


def _status(hpcflow_slurm) -> dict:
    answer = hpcflow_slurm("status", "--json")
    assert answer.returncode == 0, answer.output
    return json.loads(answer.stdout)


def _wait_running(hpcflow_slurm, n: int, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    status: dict = {}
    while time.monotonic() < deadline:
        answer = hpcflow_slurm("status", "--json")
        if answer.returncode == 0:
            status = json.loads(answer.stdout)
            if status["counts"].get("nap", {}).get("running") == n:
                return status
        else:  # the run has not registered yet
            assert "no runs yet" in answer.stderr, answer.output
        time.sleep(0.3)
    raise AssertionError(f"tasks not running after {timeout}s: {status}")


def test_cancel_of_a_detached_pilot_run(tmp_path, hpcflow_slurm, slurm_cluster):
    wf = write_workflow(tmp_path, LONG)
    submitted = hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "--detach")
    assert submitted.returncode == 0, submitted.output
    status = _wait_running(hpcflow_slurm, 2)
    cancelled = hpcflow_slurm("cancel", status["run_id"])
    assert cancelled.returncode == 0, cancelled.output
    assert "Traceback" not in cancelled.stderr, cancelled.stderr
    assert queue_drains(slurm_cluster, timeout=60) == []
    final = _status(hpcflow_slurm)
    assert final["status"] == "cancelled", final
    assert final["counts"] == {"nap": {"cancelled": 2}}, final
    again = hpcflow_slurm("cancel", status["run_id"])
    assert again.returncode == 0 and "not active" in again.stdout, again.output


def test_cancel_of_an_elastic_run(tmp_path, slurm_env, hpcflow_slurm, slurm_cluster):
    wf = write_workflow(tmp_path, LONG)
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile", "slurm-test",
         "--mode", "elastic", "-q"],
        env=slurm_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        status = _wait_running(hpcflow_slurm, 2, timeout=180)
        cancelled = hpcflow_slurm("cancel", status["run_id"])
        assert cancelled.returncode == 0, cancelled.output
        assert "Traceback" not in cancelled.stderr, cancelled.stderr
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err, err
    assert queue_drains(slurm_cluster, timeout=60) == []
    final = _status(hpcflow_slurm)
    assert final["status"] == "cancelled", final
    assert final["counts"] == {"nap": {"cancelled": 2}}, final
