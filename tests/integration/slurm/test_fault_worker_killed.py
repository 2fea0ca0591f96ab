"""Fault 1 (pilot): a worker process of the allocation is SIGKILLed mid-task.

Its nanny (the worker rank's own process) restarts it, Dask re-runs the task, the run
completes, and the killed attempt's processes are reaped instead of writing on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import processes_with, write_workflow
from tests.fault.test_worker_killed import MARKER, WF

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
    deadline = time.monotonic() + 90
    victim = None
    while time.monotonic() < deadline and victim is None:
        for pid_file in (tmp_path / "pids").iterdir():
            text = pid_file.read_text().strip()
            if text:
                victim = int(text)
                break
        time.sleep(0.05)
    assert victim is not None, "no task started"
    time.sleep(0.5)  # mid-task
    os.kill(victim, signal.SIGKILL)
    out, err = run.communicate(timeout=180)
    assert run.returncode == 0, out + err
    for i in range(4):
        assert (tmp_path / "out" / f"{i}.txt").read_text() == "begin\nend\n"
    time.sleep(3.5)  # longer than the killed attempt would have run on
    for i in range(4):
        assert (tmp_path / "out" / f"{i}.txt").read_text() == "begin\nend\n"
    assert processes_with(MARKER) == []
