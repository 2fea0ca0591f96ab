"""One live hpcflow run per Snakemake workflow: the plugin holds the workflow's lease.

Snakemake's own lock (``.snakemake/locks``) is lifted by ``--nolock`` and by ``--unlock``
after a killed run; the plugin's lease is not: a second run is refused while the first
lives, and taken over, saying so, once its holder is dead. Counted from the lines each
job's shell writes when it starts and ends, not from hpcflow's records.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import psutil

from tests.snakemake.helpers import (
    SNAKEMAKE,
    WAITING_SNAKEFILE,
    job_lines,
    run_dirs,
    wait_for_starts,
    write_snakefile,
)


def _start(workdir: Path, env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*SNAKEMAKE, "--executor", "hpcflow", "--jobs", "1", *extra],
        cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip


def _finish(proc: subprocess.Popen[str]) -> str:
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return out


def test_a_second_run_of_a_live_workflow_is_refused_and_starts_no_job(
    tmp_path: Path, snakemake_env
):
    write_snakefile(tmp_path, WAITING_SNAKEFILE)
    first = _start(tmp_path, snakemake_env)
    try:
        wait_for_starts(tmp_path, first, 1)
        (run_dir,) = run_dirs(tmp_path)
        # Snakemake's own lock would refuse too: --nolock lifts it, not the plugin's lease.
        second = subprocess.run(
            [*SNAKEMAKE, "--executor", "hpcflow", "--jobs", "1", "--nolock", "--forceall"],
            cwd=tmp_path, env=snakemake_env, capture_output=True, text=True, timeout=240,
        )  # fmt: skip
        out = second.stdout + second.stderr
        assert second.returncode != 0, out[-3000:]
        assert f"another run of this workflow is active: run {run_dir.name}" in out, out[-3000:]
        assert f"hpcflow cancel {run_dir.name}" in out, out[-3000:]
        assert "Traceback" not in out, out[-3000:]
        assert run_dirs(tmp_path) == [run_dir]  # the refused run created nothing
        assert [what for what, _ in job_lines(tmp_path)] == ["start"]  # and started no job
    finally:
        (tmp_path / "go").touch()
        out = _finish(first)
    assert first.returncode == 0, out[-3000:]
    assert [what for what, _ in job_lines(tmp_path)] == ["start", "end"]
    # Released at the end: the next run is not refused.
    assert not list((tmp_path / ".hpcflow" / "locks").glob("*.lease"))


def test_a_run_after_a_killed_one_takes_over_its_lease_and_says_so(tmp_path: Path, snakemake_env):
    write_snakefile(tmp_path, WAITING_SNAKEFILE)
    first = _start(tmp_path, snakemake_env)
    try:
        wait_for_starts(tmp_path, first, 1)
        (old_run,) = run_dirs(tmp_path)
        tree = [p.pid for p in psutil.Process(first.pid).children(recursive=True)]
        os.kill(first.pid, signal.SIGKILL)  # Snakemake's main process alone
        first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.communicate()
    (tmp_path / "go").touch()  # an attempt still alive would now end
    second = _start(tmp_path, snakemake_env, "--nolock")  # Snakemake's own lock was left
    out = _finish(second)
    assert second.returncode == 0, out[-3000:]
    assert f"took over the workflow's lease from run {old_run.name}" in out, out[-3000:]
    lines = job_lines(tmp_path)
    starts = [pid for what, pid in lines if what == "start"]
    assert len(starts) == 2, lines
    # The killed run's attempt never ended: it died with its run, before the second began.
    assert [pid for what, pid in lines if what == "end"] == [starts[1]], lines
    for pid in tree:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie", pid
