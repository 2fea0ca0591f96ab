"""A pilot allocation whose workers' launch dies (srun killed: every worker rank goes with
it) while tasks run: the driver sees that no worker is left nor will come and ends the run
at once, saying so (it used to wait for workers until the walltime), and the re-run does
the tasks that did not finish. Found by the fault campaign's cluster faults
(tests/fault/campaign_cluster.py).

Counted from the lines each attempt writes: every task started once in the first run and
never ended there, and once more in the re-run, which ended it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import write_workflow
from tests.fault.campaign_cluster import worker_launch
from tests.fault.test_driver_killed import wait_for

pytestmark = [pytest.mark.slurm]

N = 4  # 2 nodes x 2 CPUs: all running at once

WF = f"""
name: workers-lost
tasks:
  - name: step
    foreach: {{i: {{range: [0, {N}]}}}}
    command: >-
      echo start >> attempts/{{i}};
      until [ -e release ]; do sleep 0.1; done;
      echo done > {{outputs}};
      echo end >> attempts/{{i}}
    outputs: ["out/{{i}}.txt"]
"""


def lines(workdir: Path) -> dict[int, list[str]]:
    return {int(path.name): path.read_text().split() for path in (workdir / "attempts").iterdir()}


def test_a_run_whose_workers_launch_died_ends_and_its_rerun_finishes(tmp_path, slurm_env):
    (tmp_path / "attempts").mkdir()
    wf = write_workflow(tmp_path, WF)
    args = [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "-q",
            "--profile", "slurm-test", "--nodes", "2"]  # fmt: skip
    first = subprocess.Popen(
        args, env=slurm_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for(lambda: len(lines(tmp_path)) == N, 240, f"all {N} tasks to start")
        run_dir = next((tmp_path / ".hpcflow" / "runs").iterdir())
        launch = worker_launch(run_dir)
        assert launch is not None, "the workers' srun was not found"
        launch.send_signal(signal.SIGKILL)
        # The run ends by itself: no release, no cancel (it used to wait until walltime).
        wait_for(lambda: first.poll() is not None, 120, "the run to end after its workers")
        _, err = first.communicate(timeout=10)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode != 0, err
    assert "every worker of this allocation is gone" in err, err
    assert "Traceback" not in err, err
    assert all(found == ["start"] for found in lines(tmp_path).values()), lines(tmp_path)

    (tmp_path / "release").touch()
    started = time.monotonic()
    again = subprocess.run(args, env=slurm_env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert lines(tmp_path) == {i: ["start", "start", "end"] for i in range(N)}, (
        lines(tmp_path),
        time.monotonic() - started,
    )
    assert all((tmp_path / "out" / f"{i}.txt").read_text() == "done\n" for i in range(N))
