"""A 1,000-task sweep runs in ONE allocation: one sbatch, status queries bounded by time."""

from __future__ import annotations

import json
import time

import pytest

from hpcflow.backends._commands import CommandRunner
from hpcflow.backends.slurm.backend import SlurmBackend
from hpcflow.engine.prepare import RunOptions, prepare
from hpcflow.modes.pilot import run_pilot
from hpcflow.modes.pilot_stats import pilot_timings
from hpcflow.settings import resolve_profile
from tests.conftest import REPO, write_workflow

pytestmark = pytest.mark.slurm

N = 1000


def test_thousand_task_sweep_in_one_allocation(tmp_path, slurm_cluster, monkeypatch):
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))
    wf = write_workflow(
        tmp_path,
        f"""
name: thousand
tasks:
  - name: t
    foreach: {{i: {{range: [0, {N}]}}}}
    command: echo {{i}} > {{outputs}}
    outputs: ["out/{{i}}.txt"]
""",
    )
    runner = CommandRunner(env=slurm_cluster.extra_env)
    profile = resolve_profile("slurm-test", environ={}).profile
    options = RunOptions()
    started = time.monotonic()
    summary = run_pilot(prepare(wf, options), options, profile, SlurmBackend(runner))
    elapsed = time.monotonic() - started
    assert summary.ok, summary
    assert summary.totals == {"succeeded": N}
    assert len(list((tmp_path / "out").iterdir())) == N
    assert runner.calls["sbatch"] == 1
    # One status query per poll interval at most (plus the first), never one per task.
    bound = elapsed / profile.poll_interval + 2
    assert runner.calls["squeue"] <= bound, (runner.calls, elapsed)
    timings = pilot_timings(summary.paths.state_db)
    # The driver and the scheduler report what they cost (bench/pilot.py: per task).
    assert timings.driver_cpu_s and timings.driver_cpu_s > 0, timings
    assert timings.scheduler_cpu_s and timings.scheduler_cpu_s > 0, timings
    record = {
        "tasks": N,
        "sbatch_calls": runner.calls["sbatch"],
        "squeue_calls": runner.calls["squeue"],
        "sacct_calls": runner.calls["sacct"],
        "wall_seconds": round(elapsed, 2),
        "submit_to_first_task_seconds": round(timings.submit_to_first_task or -1, 2),
        "poll_interval": profile.poll_interval,
        "driver_cpu_seconds": timings.driver_cpu_s,
        "scheduler_cpu_seconds": timings.scheduler_cpu_s,
    }
    # Kept for bench/RESULTS.md (bench/pilot.py runs the same measurement and writes it there).
    (REPO / "bench" / "pilot-last-test.json").write_text(json.dumps(record, indent=2) + "\n")
