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
    if "slurm" in profile.stem:
        assert "#SBATCH --partition=gpu" in text and "#SBATCH --account=proj-1234" in text
        assert "#SBATCH --gpus-per-node=4" in text or "gpu:4" in text, text
        assert "module load cuda/12.4" in text
        # Overcommit: the node's 4 GPU workers x 16 threads share the 64 cores asked for.
        assert "#SBATCH --cpus-per-task=64\n" in text and "#SBATCH --overcommit" in text
    else:
        assert "#PBS -q workq" in text and "#PBS -A PRJ-42" in text
        # Overcommit: the node's 8 workers x 16 threads share the 128 cores asked for.
        assert "#PBS -l select=4:ncpus=128:" in text, text
        assert "#PBS -l place=scatter:excl" in text
    dry = hpcflow("run", str(wf), "--profile", str(profile), "--dry-run")
    assert dry.returncode == 0, dry.output
    assert "pilot allocation:" in dry.stdout and "core-hours" in dry.stdout
