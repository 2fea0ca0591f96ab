"""Fault scenario 2 on SLURM: the pilot allocation is cancelled (``scancel``) at a random
point of the run; running the workflow again resumes it and executes exactly the tasks
that had not finished, each once."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import write_workflow

pytestmark = pytest.mark.slurm

N = 24

WORKFLOW = f"""
name: cancelled
tasks:
  - name: step
    foreach: {{i: {{range: [0, {N}]}}}}
    command: sleep 1; echo {{i}} > {{outputs}}
    outputs: ["out/{{i}}.txt"]
"""


def _succeeded(root: Path) -> int:
    """Tasks the run has recorded as succeeded so far (read-only, as `status` reads)."""
    for db in (root / ".hpcflow" / "runs").glob("*/state.sqlite"):
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        try:
            row = conn.execute("SELECT COUNT(*) FROM tasks WHERE state = 'succeeded'").fetchone()
            return int(row[0])
        except sqlite3.OperationalError:
            return 0
        finally:
            conn.close()
    return 0


def _run(wf: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile", "slurm-test",
         "-q"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.parametrize("cancel_after", [2, 11])
def test_cancelled_allocation_then_rerun_runs_exactly_the_unfinished(
    tmp_path, slurm_env, slurm_cluster, cancel_after
):
    wf = write_workflow(tmp_path, WORKFLOW)
    proc = _run(wf, slurm_env)
    deadline = time.monotonic() + 180
    while _succeeded(tmp_path) < cancel_after:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run did not get going"
        time.sleep(0.1)
    jobs = slurm_cluster.run(["squeue", "-h", "-o", "%i %j"], timeout=30).stdout.split("\n")
    ours = [line.split()[0] for line in jobs if " hpcflow-" in line]
    assert len(ours) == 1, jobs
    slurm_cluster.run(["scancel", ours[0]], timeout=30)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode != 0, out + err
    assert "Traceback" not in err, err
    done = _succeeded(tmp_path)
    assert cancel_after <= done < N, (done, out, err)

    rerun = subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile", "slurm-test",
         "-q"],
        env=slurm_env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    # What state.sqlite had committed is up to date, and so are successes that only the
    # workers' journals held when the allocation died; the rest ran.
    ran, up_to_date = map(int, re.search(r"(\d+) ran, (\d+) up to date", rerun.stdout).groups())
    assert ran + up_to_date == N and up_to_date >= done, (rerun.stdout, done)
    assert sorted(int(p.stem) for p in (tmp_path / "out").iterdir()) == list(range(N))
    for i in range(N):
        assert (tmp_path / "out" / f"{i}.txt").read_text() == f"{i}\n"
