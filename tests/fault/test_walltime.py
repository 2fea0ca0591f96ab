"""Fault scenario 6: the walltime. An allocation that runs out of time is continued by a
new one (``resubmit: true``), which resumes the run and finishes it; nothing is lost."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import status_json, write_workflow

#: exclusive: allocations of 1 minute must start tasks before they drain; on a machine
#: loaded by other tests the pilot boots too late and every continuation drains idle.
pytestmark = [pytest.mark.slurm, pytest.mark.exclusive]


def _run_with_resubmit(
    wf: Path, slurm_env: dict[str, str], timeout: float, profile: str = "slurm-test"
):
    """``hpcflow run`` of ``wf`` on the test cluster with a 1 min walltime and
    continuation allocations allowed."""
    from tests.conftest import run_cli

    try:
        return run_cli(
            ("run", str(wf), "--profile", profile, "--walltime", "1m", "-q"),
            {**slurm_env, "HPCFLOW_RESUBMIT": "true"}, None, timeout,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        subprocess.run(["scancel", "--user", "root"], env=slurm_env, check=False)
        logs = []
        for run_dir in sorted((wf.parent / ".hpcflow" / "runs").glob("*")):
            for path in [run_dir / "driver.log", *sorted(run_dir.glob("allocations/*"))]:
                if path.is_file():
                    logs.append(f"--- {path.name}\n{path.read_text()[-3000:]}")
        raise AssertionError(f"hpcflow run did not end in {timeout}s\n" + "\n".join(logs))


def test_walltime_drain_then_continuation_allocation(tmp_path, slurm_env):
    """Tasks that would not finish before the walltime are not started (drain); the
    continuation allocation runs them."""
    wf = write_workflow(
        tmp_path,
        """
name: drain
tasks:
  - name: slow
    foreach: {i: {range: [0, 6]}}
    resources: {walltime: 20s}
    command: sleep 5; echo {i} > {outputs}
    outputs: ["out/{i}.txt"]
""",
    )
    result = _run_with_resubmit(wf, slurm_env, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(list((tmp_path / "out").iterdir())) == 6
    run_dir = next((tmp_path / ".hpcflow" / "runs").iterdir())
    scripts = sorted((run_dir / "allocations").glob("*.sh"))
    assert len(scripts) >= 2, "no continuation allocation was submitted"
    assert "walltime drain" in (run_dir / "driver.log").read_text()
    assert "#SBATCH --time=0:01:00" in scripts[0].read_text()


@pytest.mark.slow
def test_allocation_killed_at_walltime_is_continued(tmp_path, slurm_env):
    """SLURM kills the allocation at its time limit (TIMEOUT, ~60-90 s on the test
    cluster); the continuation allocation resumes the run and finishes it."""
    wf = write_workflow(
        tmp_path,
        """
name: timeout
tasks:
  - name: quick
    command: echo quick > quick.txt
    outputs: [quick.txt]
  - name: stubborn
    needs: [quick]
    # First attempt outlives the allocation; the retry in the continuation is fast.
    command: if [ -e tried ]; then echo done > out.txt; else touch tried; sleep 600; fi
    outputs: [out.txt]
""",
    )
    result = _run_with_resubmit(wf, slurm_env, timeout=400)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "out.txt").read_text() == "done\n"
    run_dir = next((tmp_path / ".hpcflow" / "runs").iterdir())
    assert len(list((run_dir / "allocations").glob("*.sh"))) == 2
    assert "hit its walltime" in result.stderr + (run_dir / "driver.log").read_text()
    status = status_json(slurm_env, None, str(run_dir))
    assert [a["state"] for a in status["allocations"]] == ["timeout", "completed"]
    assert status["counts"] == {"quick": {"succeeded": 1}, "stubborn": {"succeeded": 1}}


@pytest.mark.parametrize("profile", ["slurm-test", "pbs-test"])
def test_a_task_warned_before_the_walltime_continues_from_its_checkpoint(
    tmp_path, slurm_env, profile
):
    """``checkpoint: {signal: SIGUSR1, before: 45s}`` in a 1-minute allocation: the task
    is signalled, saves its count and exits; its attempt is interrupted (not failed), the
    allocation ends early, and the continuation runs it with HPCFLOW_CONTINUATION=1,
    where it finishes from its checkpoint. The same through the PBS front ends (qsub
    with -l walltime)."""
    import sqlite3

    wf = write_workflow(
        tmp_path,
        """
name: checkpoint
tasks:
  - name: long
    checkpoint: {signal: SIGUSR1, before: 45s}
    command: >-
      if [ "${HPCFLOW_CONTINUATION:-}" = 1 ]; then
      echo "continued from $(cat ckpt)" > out.txt; exit 0; fi;
      n=0; trap 'echo $n > ckpt; exit 1' USR1;
      while true; do n=$((n+1)); sleep 0.2; done
    outputs: [out.txt]
""",
    )
    result = _run_with_resubmit(wf, slurm_env, timeout=300, profile=profile)
    assert result.returncode == 0, result.stdout + result.stderr
    words = (tmp_path / "out.txt").read_text().split()
    assert words[:2] == ["continued", "from"] and int(words[2]) > 0, words
    run_dir = next((tmp_path / ".hpcflow" / "runs").iterdir())
    with sqlite3.connect(run_dir / "state.sqlite") as db:
        attempts = db.execute("SELECT state, message FROM attempts ORDER BY attempt").fetchall()
    assert [a[0] for a in attempts] == ["interrupted", "succeeded"], attempts
    assert attempts[0][1].startswith("interrupted by SIGUSR1 before the walltime"), attempts
    status = status_json(slurm_env, None, str(run_dir))
    # The first allocation ended early (drained), not at its time limit.
    assert [a["state"] for a in status["allocations"]] == ["completed", "completed"], status
