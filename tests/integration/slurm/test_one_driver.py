"""One live driver per workflow on the test SLURM cluster (issue 37, part 2).

A pilot run's driver runs on a node (another host name and PID namespace), its
submitter on this machine; the workflow's lease must keep a second run out in every
stage: while the allocation is queued or running after ``--detach`` returned, and after
the attached submitting command was killed with SIGKILL. Allocations are counted from
what the scheduler lists (``squeue -t all``: pending, running and recently ended jobs),
never from hpcflow's records.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import write_workflow
from tests.integration.slurm.conftest import queue_drains
from tests.integration.slurm.test_cancel_modes import LONG  # two tasks of 300 s

pytestmark = pytest.mark.slurm


def _jobs_ever(slurm_cluster) -> list[str]:
    """Every job the scheduler knows: queued, running, or ended in the last minutes."""
    out = slurm_cluster.run(["squeue", "-h", "-t", "all", "-o", "%i %T"], check=False).stdout
    return [line for line in out.splitlines() if line.strip()]


def _wait(what: str, predicate, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.3)


def _running(hpcflow_slurm, n: int) -> dict | None:
    answer = hpcflow_slurm("status", "--json")
    if answer.returncode != 0:
        return None
    status = json.loads(answer.stdout)
    return status if status["counts"].get("nap", {}).get("running") == n else None


def _refused(answer, run_id: str) -> None:
    assert answer.returncode == 2, answer.output
    assert f"another run of this workflow is active: run {run_id}" in answer.stderr, answer.output
    assert f"hpcflow cancel {run_id}" in answer.stderr, answer.output
    assert "Traceback" not in answer.stderr, answer.stderr


def test_a_second_detached_submission_is_refused(tmp_path, hpcflow_slurm, slurm_cluster):
    wf = write_workflow(tmp_path, LONG)
    before = _jobs_ever(slurm_cluster)
    first = hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "--detach")
    assert first.returncode == 0, first.output
    run_id = json.loads(hpcflow_slurm("status", "--json").stdout)["run_id"]
    try:
        # Right after --detach returned (the allocation queued or starting) ...
        _refused(hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "--detach"), run_id)
        # ... and once the driver on the node holds the lease.
        status = _wait("both tasks running on the node", lambda: _running(hpcflow_slurm, 2))
        assert status["run_id"] == run_id
        _refused(hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "--detach"), run_id)
        _refused(hpcflow_slurm("run", str(wf), "-q"), run_id)  # nor may a local run start
        new = [job for job in _jobs_ever(slurm_cluster) if job not in before]
        assert len(new) == 1, new
    finally:
        hpcflow_slurm("cancel", run_id)
    assert queue_drains(slurm_cluster, timeout=60) == []


def test_a_rerun_after_the_follower_was_killed_waits_for_the_allocation(
    tmp_path, slurm_env, hpcflow_slurm, slurm_cluster
):
    wf = write_workflow(tmp_path, LONG)
    before = _jobs_ever(slurm_cluster)
    follower = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile", "slurm-test",
         "-q"],
        env=slurm_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        status = _wait("both tasks running on the node", lambda: _running(hpcflow_slurm, 2))
        run_id = status["run_id"]
        os.kill(follower.pid, signal.SIGKILL)
        follower.wait(timeout=30)
        _refused(hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "--detach"), run_id)
        _refused(hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "--detach"), run_id)
        new = [job for job in _jobs_ever(slurm_cluster) if job not in before]
        assert len(new) == 1, new  # no second allocation while the first lives
        cancelled = hpcflow_slurm("cancel", run_id)
        assert cancelled.returncode == 0, cancelled.output
        assert queue_drains(slurm_cluster, timeout=60) == []
        # The allocation has ended (its driver stopped the run and let the lease go): the
        # re-run is a run like any other.
        again = hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "--detach")
        assert again.returncode == 0, again.output
        after = [job for job in _jobs_ever(slurm_cluster) if job not in before]
        assert len(after) == 2, after
        rerun = json.loads(hpcflow_slurm("status", "--json").stdout)["run_id"]
        assert rerun != run_id
        assert hpcflow_slurm("cancel", rerun).returncode == 0
    finally:
        if follower.poll() is None:
            os.kill(follower.pid, signal.SIGKILL)
            follower.wait()
    assert queue_drains(slurm_cluster, timeout=60) == []


def test_a_lease_whose_driver_was_killed_with_its_allocation_is_taken_over(
    tmp_path, hpcflow_slurm, slurm_cluster
):
    wf = write_workflow(tmp_path, LONG)
    before = _jobs_ever(slurm_cluster)
    first = hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "--detach")
    assert first.returncode == 0, first.output
    status = _wait("both tasks running on the node", lambda: _running(hpcflow_slurm, 2))
    run_id = status["run_id"]
    (job,) = [line.split()[0] for line in _jobs_ever(slurm_cluster) if line not in before]
    # Every process of the allocation, the driver too, killed at once: nothing lets the
    # lease go, and the driver's host cannot be asked about its pid.
    slurm_cluster.run(["scancel", "--signal=KILL", "--full", job])
    assert queue_drains(slurm_cluster, timeout=60) == []
    again = hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "--detach")
    try:
        assert again.returncode == 0, again.output
        assert f"took over the workflow's lease from run {run_id}" in again.stderr, again.output
        assert f"its holder's allocation {job} has ended" in again.stderr, again.output
    finally:
        rerun = json.loads(hpcflow_slurm("status", "--json").stdout)["run_id"]
        hpcflow_slurm("cancel", rerun)
    assert queue_drains(slurm_cluster, timeout=60) == []


def test_an_allocation_still_queued_keeps_the_workflow(
    tmp_path, slurm_env, hpcflow_slurm, slurm_cluster
):
    """No driver has started anywhere yet and the submitting command has returned: the
    lease names the queued allocation, and a re-run asks the scheduler about it."""
    wf = write_workflow(tmp_path, LONG)
    before = _jobs_ever(slurm_cluster)
    later = {**slurm_env, "HPCFLOW_EXTRA_DIRECTIVES": "--begin=now+1hour"}
    submitted = subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile", "slurm-test",
         "--detach"],
        env=later, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    status = json.loads(hpcflow_slurm("status", "--json").stdout)
    run_id = status["run_id"]
    (allocation,) = status["allocations"]
    try:
        assert [job for job in _jobs_ever(slurm_cluster) if job not in before] == [
            f"{allocation['native_id']} PENDING"
        ]
        _refused(hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "--detach"), run_id)
        new = [job for job in _jobs_ever(slurm_cluster) if job not in before]
        assert new == [f"{allocation['native_id']} PENDING"], new
    finally:
        assert hpcflow_slurm("cancel", run_id).returncode == 0
    assert queue_drains(slurm_cluster, timeout=60) == []
    again = hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "--detach", "-q")
    assert again.returncode == 0, again.output
    assert f"took over the workflow's lease from run {run_id}" in again.stderr, again.output
    rerun = json.loads(hpcflow_slurm("status", "--json").stdout)["run_id"]
    assert hpcflow_slurm("cancel", rerun).returncode == 0
    assert queue_drains(slurm_cluster, timeout=60) == []


#: Each attempt of a task appends its start (and, were it let through, its end) to a file
#: of the task's own: side effects counted outside hpcflow's records.
COUNTED = """
name: counted
tasks:
  - name: nap
    foreach: {i: [1, 2]}
    command: echo "start $SLURM_JOB_ID" >> starts-{i}; sleep 300; echo end >> starts-{i}
"""


def test_a_jobs_mode_rerun_after_its_driver_was_killed_waits_for_its_jobs(
    tmp_path, slurm_env, hpcflow_slurm, slurm_cluster
):
    """Jobs mode: the `hpcflow run` process is the driver and its tasks are batch jobs,
    which outlive it. The jobs are named in the workflow's lease as they are submitted, so
    a re-run right after `kill -9` of the driver is refused while they are queued or
    running (it used to take the stale lease over and submit every task again, a second
    attempt beside the first); after `hpcflow cancel` it starts."""
    wf = write_workflow(tmp_path, COUNTED)
    args = ("run", str(wf), "--profile", "slurm-test", "--mode", "jobs", "-q")
    driver = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", *args],
        cwd=tmp_path, env=slurm_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    starts = [tmp_path / f"starts-{i}" for i in (1, 2)]
    try:
        _wait("both tasks to start", lambda: all(p.exists() and p.read_text() for p in starts))
        run_id = json.loads(hpcflow_slurm("status", "--json").stdout)["run_id"]
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
        _refused(hpcflow_slurm(*args), run_id)
        time.sleep(2)  # what a second run would have started by now
        assert [p.read_text().count("start") for p in starts] == [1, 1]
        cancelled = hpcflow_slurm("cancel", run_id)
        assert cancelled.returncode == 0, cancelled.output
        assert queue_drains(slurm_cluster, timeout=60) == []
        again = subprocess.Popen(
            [sys.executable, "-m", "hpcflow.cli.main", *args],
            cwd=tmp_path, env=slurm_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True,
        )  # fmt: skip
        try:
            _wait("the re-run's tasks to start", lambda: all(
                p.read_text().count("start") == 2 for p in starts
            ))  # fmt: skip
        finally:
            os.killpg(again.pid, signal.SIGINT)  # Ctrl-C: the run cancels its jobs
            again.communicate(timeout=60)
    finally:
        if driver.poll() is None:
            os.kill(driver.pid, signal.SIGKILL)
            driver.wait()
    assert queue_drains(slurm_cluster, timeout=60) == []
    assert all("end" not in p.read_text() for p in starts)
