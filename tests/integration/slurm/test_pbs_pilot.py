"""Pilot mode through the PBS commands: ``hpcflow run WF --profile pbs-test`` submits with
qsub, follows with qstat and cancels with qdel (SLURM's PBS/Torque wrappers over the
private test cluster); mpirun starts the ranks, as on a PBS site."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import write_workflow
from tests.integration.slurm.conftest import queue_drains, queued_jobs, run_logs

pytestmark = pytest.mark.slurm


@pytest.mark.parametrize("nodes", [1, 2])
def test_hello_through_qsub_qstat(example, hpcflow_slurm, slurm_cluster, nodes):
    wf = example("hello")
    result = hpcflow_slurm("run", str(wf), "--profile", "pbs-test", "--nodes", str(nodes), "-q")
    assert result.returncode == 0, result.output + run_logs(wf.parent)
    assert "submitted allocation" in result.stdout and "(pbs)" in result.stdout
    assert (wf.parent / "results" / "count.txt").read_text().strip() == "3"
    status = json.loads(hpcflow_slurm("status", "--json").stdout)
    assert status["status"] == "succeeded"
    assert all(set(c) == {"succeeded"} for c in status["counts"].values())
    (allocation,) = status["allocations"]
    assert allocation["backend"] == "pbs" and allocation["native_id"].isdigit()
    # The script that was qsub'ed: Torque resources; the scheduler and driver on its node,
    # the workers started by mpirun, one per node.
    script = (Path(status["run_dir"]) / "allocations" / "1.sh").read_text()
    assert f"#PBS -l nodes={nodes}:ppn=2\n" in script and "#PBS -q debug\n" in script
    assert " --role head " in script and "#SBATCH" not in script
    assert f" -- mpirun -n {nodes} --map-by ppr:1:node " in script
    info = slurm_cluster.run(["scontrol", "show", "job", allocation["native_id"]]).stdout
    assert f"NumNodes={nodes} " in info
    assert queue_drains(slurm_cluster) == []


def test_detach_status_and_cancel_through_qstat_qdel(tmp_path, hpcflow_slurm, slurm_cluster):
    """``hpcflow status`` and ``hpcflow cancel`` find the backend by name only (no
    profile): they poll the wrappers' qstat and cancel with qdel all the same."""
    wf = write_workflow(
        tmp_path,
        """
name: long
tasks:
  - name: long
    command: sleep 120
""",
    )
    submitted = hpcflow_slurm("run", str(wf), "--profile", "pbs-test", "--detach")
    assert submitted.returncode == 0, submitted.output
    deadline = time.monotonic() + 30
    allocation: dict = {}
    while time.monotonic() < deadline:
        status = json.loads(hpcflow_slurm("status", "--json").stdout)
        (allocation,) = status["allocations"]
        if allocation["state"] == "running":
            break
        time.sleep(0.5)
    assert (allocation["state"], allocation["native_state"]) == ("running", "R"), allocation
    cancelled = hpcflow_slurm("cancel", status["run_id"])
    assert cancelled.returncode == 0, cancelled.output
    assert allocation["native_id"] in cancelled.stdout
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and queued_jobs(slurm_cluster):
        time.sleep(0.3)
    assert queue_drains(slurm_cluster) == []
    assert slurm_cluster.job_state(allocation["native_id"]) == "CANCELLED"


def test_bad_queue_is_a_user_error(example, hpcflow_slurm):
    wf = example("hello")
    bad = hpcflow_slurm("run", str(wf), "--profile", "pbs-test", "--partition", "nosuch")
    assert bad.returncode == 2, bad.output
    assert "partition" in bad.stderr and "Traceback" not in bad.stderr
