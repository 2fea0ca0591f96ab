"""The worked site profiles in profiles/examples resolve, render and price a plan."""

from __future__ import annotations

import pytest

from tests.conftest import REPO

EXAMPLES = sorted((REPO / "profiles" / "examples").glob("*.yaml"))


@pytest.mark.parametrize("profile", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_profile_renders(profile, hpcflow, example):
    assert len(EXAMPLES) >= 2
    wf = example("sweep")
    shown = hpcflow("profiles", "show", str(profile))
    assert shown.returncode == 0, shown.output
    script = hpcflow("render", str(wf), "--profile", str(profile))
    assert script.returncode == 0, script.output
    text = script.stdout
    if profile.stem == "slurm-apptainer-lmod-site":
        assert "#SBATCH --partition=compute" in text and "#SBATCH --account=proj-1234" in text
        assert "container_runtime" in shown.stdout and "singularity" in shown.stdout
        _runs_tasks_in_singularity(hpcflow, wf.parent, profile)
    elif profile.stem == "slurm-gpu-site":
        assert "#SBATCH --partition=gpu" in text and "#SBATCH --account=proj-1234" in text
        assert "#SBATCH --gpus-per-node=4" in text or "gpu:4" in text, text
        assert "module load cuda/12.4" in text
        # Overcommit: the node's 4 GPU workers x 16 threads share the 64 cores asked for.
        assert "#SBATCH --cpus-per-task=64\n" in text and "#SBATCH --overcommit" in text
    elif profile.stem == "slurm-cpu-gpu-pools-site":
        # The sweep's tasks need no GPU: the smallest pool that fits them is cpu.
        assert "#SBATCH --partition=compute" in text and "--partition=gpu" not in text, text
        assert "pools" in shown.stdout and "partition=gpu" in shown.stdout, shown.stdout
        dry = hpcflow("run", str(wf), "--profile", str(profile), "--dry-run")
        assert dry.returncode == 0 and "slurm jobs mode, in pool cpu:" in dry.stdout, dry.output
        return
    else:
        assert profile.stem == "pbs-pro-site", "a new example profile needs its checks here"
        assert "#PBS -q workq" in text and "#PBS -A PRJ-42" in text
        # Overcommit: the node's 8 workers x 16 threads share the 128 cores asked for.
        assert "#PBS -l select=4:ncpus=128:" in text, text
        assert "#PBS -l place=scatter:excl" in text
    dry = hpcflow("run", str(wf), "--profile", str(profile), "--dry-run")
    assert dry.returncode == 0, dry.output
    assert "pilot allocation:" in dry.stdout and "core-hours" in dry.stdout


def _runs_tasks_in_singularity(hpcflow, folder, profile) -> None:
    """A task with a docker:// image goes to the site's singularity, with the site's
    binds and options, and --dry-run says so."""
    from tests.conftest import write_workflow

    wf = write_workflow(
        folder / "apptainer",
        "name: c\ntasks:\n  - name: t\n    container: docker://alpine:3.20\n    command: 'true'\n",
    )
    dry = hpcflow("run", str(wf), "--profile", str(profile), "--dry-run")
    assert dry.returncode == 0, dry.output
    assert "t: singularity docker://alpine:3.20" in dry.stdout, dry.stdout
