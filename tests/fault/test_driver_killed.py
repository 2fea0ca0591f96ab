"""The driver is killed with SIGKILL in the middle of batched tiny tasks; a re-run must run
every task that had not finished and none that had.

Each task appends a line to a file of its own every time it executes, so the assertions
count executions on disk, not what hpcflow recorded. All 200 tasks are ready at once and
there is one slot, so they run in chunks of many tasks, each chunk in one shell, and a
chunk returns to the driver only when all of its tasks are done: what a kill must not
lose is the tasks that finished inside the chunk that was running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import processes_with, write_workflow

N = 200

WORKFLOW = """
name: tiny
tasks:
  - name: tick
    foreach: {{i: {{range: [0, {n}]}}}}
    command: echo {marker} >> {{i}}.count; sleep {sleep}
    workdir: counts
"""


def executions(counts: Path) -> dict[int, int]:
    """How many times each task ran: the lines in its count file."""
    found: dict[int, int] = {}
    for path in counts.glob("*.count"):
        found[int(path.stem)] = len(path.read_text().splitlines())
    return found


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def wait_until_gone(marker: str, timeout: float = 60) -> None:
    """Until no process of the killed run is left (its shells end at their next write)."""
    wait_for(lambda: not processes_with(marker), timeout, f"the processes of {marker}")


def check_counts(before: dict[int, int], after: dict[int, int], running: int) -> None:
    """Every task ran; a task that had finished before the kill did not run again, except
    at most ``running`` tasks that were running at that instant."""
    assert sorted(after) == list(range(N)), f"tasks never run: {set(range(N)) - set(after)}"
    twice = sorted(i for i, n in after.items() if n > 1)
    assert all(n <= 2 for n in after.values()), after
    assert len(twice) <= running, (
        f"{len(twice)} tasks ran again after the kill (at most {running} were running): "
        f"{twice}; {len(before)} had run before it"
    )


@pytest.mark.parametrize("engine", ["pool", "dask"])
def test_sigkill_of_a_local_driver_loses_no_finished_task(tmp_path, env, hpcflow, engine):
    marker = f"hpcflow-kill-{engine}-{time.time_ns()}"
    counts = tmp_path / "counts"
    counts.mkdir()
    wf = write_workflow(tmp_path, WORKFLOW.format(n=N, marker=marker, sleep=0.1))
    args = ["--threads", "1", "--engine", engine]
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "-q", *args],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(lambda: len(executions(counts)) >= 20, 120, "20 tasks to run")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    wait_until_gone(marker)
    before = executions(counts)
    assert 20 <= len(before) < N, "the kill came too late to test anything"
    rerun = hpcflow("run", str(wf), "-q", "--threads", "1", "--engine", engine)
    assert rerun.returncode == 0, rerun.output
    after = executions(counts)
    check_counts(before, after, running=1)
    ran_again = sum(after.values()) - sum(before.values())
    assert f"{ran_again} ran, {N - ran_again} up to date" in rerun.stdout, rerun.stdout


def kill_pilot_driver(
    proc: subprocess.Popen, workdir: Path, cluster: object, ready: Callable[[], bool], what: str
) -> float:
    """Once ``ready()``, SIGKILL the driver rank of the pilot run that ``proc`` (``hpcflow
    run`` in ``workdir``) follows: the allocation ends, the follower says the run failed
    (no traceback), and the queue drains. Returns when the driver was killed (``time.time()``)."""
    from tests.integration.slurm.conftest import queue_drains

    try:
        wait_for(ready, 240, what)
        run_dir = next((workdir / ".hpcflow" / "runs").iterdir())
        pid = _driver_process(run_dir)
        assert pid is not None, "the driver rank was not found"
        os.kill(pid, signal.SIGKILL)
        killed_at = time.time()
        _, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert "Traceback" not in err, err
    assert queue_drains(cluster, timeout=120) == []
    return killed_at


def _driver_process(run_dir: Path) -> int | None:
    """The pid (on this machine) of the pilot's driver for ``run_dir``, if it is running."""
    import psutil

    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if "hpcflow.bootstrap" in cmd and "driver" in cmd and str(run_dir) in cmd:
            return proc.pid
    return None


@pytest.mark.slurm
def test_sigkill_of_a_pilot_driver_loses_no_finished_task(
    tmp_path, slurm_env, hpcflow_slurm, slurm_cluster
):
    marker = f"hpcflow-kill-pilot-{time.time_ns()}"
    counts = tmp_path / "counts"
    counts.mkdir()
    wf = write_workflow(tmp_path, WORKFLOW.format(n=N, marker=marker, sleep=0.1))
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "-q",
         "--profile", "slurm-test", "--nodes", "2"],
        env=slurm_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    kill_pilot_driver(
        proc, tmp_path, slurm_cluster, lambda: len(executions(counts)) >= 20, "20 tasks to run"
    )
    before = executions(counts)
    assert 20 <= len(before) < N, "the kill came too late to test anything"
    rerun = hpcflow_slurm("run", str(wf), "-q", "--profile", "slurm-test", "--nodes", "2")
    assert rerun.returncode == 0, rerun.output
    after = executions(counts)
    # Tasks running when the driver died, or when the allocation was ended after it:
    # at most one per worker slot (2 nodes x 2 cpus).
    check_counts(before, after, running=4)
