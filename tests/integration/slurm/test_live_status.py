"""`hpcflow status --json` and `hpcflow logs`, polled from the submit side while a run goes
on, in every mode: never an error, never a count going back, exact final counts.

The run directory is written by the driver (inside the allocation in pilot mode) and read
here by other processes, through another client of the shared file system on the
namespaced test cluster.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import write_workflow
from tests.integration.slurm.conftest import queue_drains, run_logs

pytestmark = pytest.mark.slurm

WORKFLOW = """
name: live
tasks:
  - name: tick
    foreach: {{i: {{range: [0, {n}]}}}}
    command: echo {{i}} > {{outputs}}
    outputs: ["out/{{i}}.txt"]
"""


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", *args],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _run_dir(root: Path) -> Path | None:
    runs = sorted((root / ".hpcflow" / "runs").glob("*/state.sqlite"))
    return runs[0].parent if runs else None


def poll_while_running(
    proc: subprocess.Popen[bytes], env: dict[str, str], root: Path, timeout: float = 420
) -> list:
    """Ask status and logs until ``proc`` (the run) has ended; every answer must be clean
    and no count may go back. Returns the samples (succeeded counts)."""
    samples: list[int] = []
    best: dict[str, int] = {}
    polls = 0
    deadline = time.monotonic() + timeout
    while True:
        assert time.monotonic() < deadline, f"the run did not end within {timeout}s: {samples}"
        ended = proc.poll() is not None
        run_dir = _run_dir(root)
        if run_dir is not None:
            status = _cli(env, "status", "--json", str(run_dir))
            assert status.returncode == 0, status.stdout + status.stderr
            assert "Traceback" not in status.stderr, status.stderr
            snap = json.loads(status.stdout)
            done = {"succeeded": 0, "final": 0}
            for counts in snap["counts"].values():
                done["succeeded"] += counts.get("succeeded", 0)
                done["final"] += sum(
                    n for s, n in counts.items() if s in ("succeeded", "failed", "cached")
                )
            for key, value in done.items():
                assert value >= best.get(key, 0), (key, value, best, samples)
                best[key] = value
            samples.append(done["succeeded"])
            logs = _cli(env, "logs", str(run_dir))
            assert logs.returncode == 0, logs.stdout + logs.stderr
            assert "Traceback" not in logs.stderr, logs.stderr
            polls += 1
        if ended:
            break
        time.sleep(0.2)
    assert polls >= 3, "the run ended before it could be watched"
    return samples


def watch(cmd: list[str], cwd: Path, env: dict[str, str], root: Path) -> tuple[int, str, list[int]]:
    """Run ``cmd`` and poll status and logs of its run (under ``root``) until it ends:
    (exit status, its output, the succeeded counts seen). The output goes to a file: a
    pipe nobody reads while the run goes on fills up and stops a chatty run (Snakemake)."""
    log = root / "watched.log"
    with open(log, "w") as sink:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=sink, stderr=subprocess.STDOUT)
        try:
            samples = poll_while_running(proc, env, root)
            proc.wait(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return proc.returncode, log.read_text(errors="replace"), samples


def _final_counts(env: dict[str, str], root: Path) -> dict[str, int]:
    run_dir = _run_dir(root)
    assert run_dir is not None
    snap = json.loads(_cli(env, "status", "--json", str(run_dir)).stdout)
    totals: dict[str, int] = {}
    for counts in snap["counts"].values():
        for state, n in counts.items():
            totals[state] = totals.get(state, 0) + n
    assert snap["status"] == "succeeded", snap
    return totals


@pytest.mark.parametrize(
    ("mode", "n", "extra"),
    [
        ("pilot", 3000, ["--nodes", "3"]),
        ("jobs", 150, []),
        ("elastic", 1000, []),
    ],
)
def test_status_and_logs_polled_while_a_run_goes_on(
    tmp_path, slurm_env, slurm_cluster, mode, n, extra
):
    wf = write_workflow(tmp_path, WORKFLOW.format(n=n))
    returncode, output, samples = watch(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile", "slurm-test",
         "--mode", mode, "-q", *extra],
        tmp_path, slurm_env, tmp_path,
    )  # fmt: skip
    assert returncode == 0, output + run_logs(tmp_path)
    assert _final_counts(slurm_env, tmp_path) == {"succeeded": n}
    assert samples[-1] == n
    assert sorted(int(p.stem) for p in (tmp_path / "out").iterdir()) == list(range(n))
    assert queue_drains(slurm_cluster) == []


def test_status_and_logs_polled_while_the_snakemake_plugin_runs(tmp_path, env, slurm_cluster):
    pytest.importorskip("snakemake")
    from tests.snakemake.helpers import (
        SNAKEMAKE,
        clean_env,
        fanout_snakefile,
        sum_of_squares,
        write_snakefile,
    )

    n = 30  # every Snakemake job starts a Snakemake process: about 1 CPU-second each
    workdir = tmp_path / "wf"
    write_snakefile(workdir, fanout_snakefile(n))
    run_env = {**clean_env(env), **slurm_cluster.extra_env}
    returncode, output, samples = watch(
        [*SNAKEMAKE, "--executor", "hpcflow", "--jobs", "100", "--hpcflow-mode", "pilot",
         "--hpcflow-profile", "slurm-test", "--hpcflow-nodes", "2", "--hpcflow-walltime", "10m"],
        workdir, run_env, workdir,
    )  # fmt: skip
    assert returncode == 0, output[-4000:]
    assert (workdir / "results" / "total.txt").read_text().strip() == str(sum_of_squares(n))
    totals = _final_counts(run_env, workdir)
    # Every Snakemake job is one task of the run: n squares, two chunks, the total.
    assert totals == {"succeeded": n + 3}, totals
    assert samples[-1] == n + 3
