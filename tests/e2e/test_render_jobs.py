"""`hpcflow render --mode jobs`: every job script a jobs-mode run would submit, with
arrays for sweeps and dependencies on the upstream jobs (no batch system needed)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("profile", "array", "after"),
    [
        ("slurm-test", "#SBATCH --array=0-119\n", "#SBATCH --dependency=afterok:JOB1\n"),
        ("pbs-test", "#PBS -t 0-119\n", "#PBS -W depend=afterok:JOB1\n"),
        ("pbs", "#PBS -J 0-119\n", "#PBS -W depend=afterok:JOB1\n"),
    ],
)
def test_render_jobs_mode(example, hpcflow, env, profile, array, after):
    wf = example("sweep")
    result = hpcflow("render", str(wf), "--profile", profile, "--mode", "jobs")
    assert result.returncode == 0, result.output
    jobs = result.stdout.split("# ---- job ")[1:]
    assert [j.split("\n", 1)[0] for j in jobs] == ["1 (120 instances) ----", "2 (1 instance) ----"]
    assert array in jobs[0] and "depend" not in jobs[0]
    assert after in jobs[1]
    assert "hpcflow.modes.jobtask" in jobs[1] and "hpcflow.bootstrap" not in result.stdout
    # Released by the submit host instead: no dependency in the scripts.
    env["HPCFLOW_DEPENDENCIES"] = "driver"
    env["HPCFLOW_MAX_ARRAY_SIZE"] = "50"
    released = hpcflow("render", str(wf), "--profile", profile, "--mode", "jobs")
    assert released.returncode == 0, released.output
    assert released.stdout.count("# ---- job ") == 4  # 50 + 50 + 20, then reduce
    assert "afterok" not in released.stdout


@pytest.mark.parametrize(
    ("how", "expected", "absent"),
    [
        # The profile's own mode decides, as it does for `hpcflow run`.
        ({"HPCFLOW_MODE": "elastic"}, "distributed.cli.dask_worker", "hpcflow.bootstrap"),
        ({"HPCFLOW_MODE": "jobs"}, "hpcflow.modes.jobtask", "dask_worker"),
        ({}, "hpcflow.bootstrap", "dask_worker"),
    ],
)
def test_render_follows_the_mode_run_would_take(example, hpcflow, env, how, expected, absent):
    wf = example("sweep")
    env.update(how)
    result = hpcflow("render", str(wf), "--profile", "slurm-test")
    assert result.returncode == 0, result.output
    assert expected in result.stdout and absent not in result.stdout
    if how.get("HPCFLOW_MODE") == "elastic":
        assert result.stdout.startswith("# ---- elastic worker job")
        assert "#SBATCH" in result.stdout and "SCHEDULER:PORT" in result.stdout
