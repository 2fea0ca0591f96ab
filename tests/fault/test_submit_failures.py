"""Fault 5: sbatch fails. Transient failures are retried with backoff; a permanent one
stops the run before any work is lost, naming the setting to fix."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import write_workflow
from tests.integration.slurm.conftest import queue_drains

pytestmark = pytest.mark.slurm

FLAKY = """#!/bin/bash
# Fails like an overloaded slurmctld for the first {fails} calls, then is the real sbatch.
count_file={count}
n=$(($(cat "$count_file" 2>/dev/null || echo 0) + 1))
echo "$n" > "$count_file"
if [ "$n" -le {fails} ]; then
    echo "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation" >&2
    exit 1
fi
exec {real} "$@"
"""


def _flaky_sbatch(tmp_path, fails: int) -> tuple[dict[str, str], object]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    count = tmp_path / "sbatch-calls"
    wrapper = bin_dir / "sbatch"
    wrapper.write_text(FLAKY.format(fails=fails, count=count, real=shutil.which("sbatch")))
    wrapper.chmod(0o755)
    return {"PATH": f"{bin_dir}:"}, count


def test_transient_sbatch_failures_are_retried(tmp_path, slurm_env, slurm_cluster):
    path, count = _flaky_sbatch(tmp_path, fails=2)
    wf = write_workflow(
        tmp_path,
        "name: f\ntasks:\n  - name: a\n    command: echo ok > a.txt\n    outputs: [a.txt]\n",
    )
    env = {**slurm_env, "PATH": path["PATH"] + slurm_env["PATH"]}
    result = subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile", "slurm-test", "-q"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "a.txt").read_text() == "ok\n"
    assert count.read_text().strip() == "3"  # two failures, then the submission
    assert "retrying" in result.stderr
    assert queue_drains(slurm_cluster) == []


def test_permanent_sbatch_failure_stops_before_anything_runs(tmp_path, slurm_env, slurm_cluster):
    wf = write_workflow(
        tmp_path,
        "name: f\ntasks:\n  - name: a\n    command: echo ok > a.txt\n    outputs: [a.txt]\n",
    )
    result = subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile", "slurm-test",
         "--partition", "nosuch-partition", "-q"],
        cwd=tmp_path, env=slurm_env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "partition" in result.stderr and "hint:" in result.stderr
    assert not (tmp_path / "a.txt").exists()
    assert queue_drains(slurm_cluster, timeout=5) == []
