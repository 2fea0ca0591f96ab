"""``snakemake --executor hpcflow --hpcflow-mode pilot`` on the real local test SLURM.

The whole Snakemake run uses ONE allocation: the test counts ``sbatch`` calls through a
wrapper on PATH that logs each call and then runs the real ``sbatch``.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import processes_with
from tests.snakemake.helpers import (
    SNAKEMAKE,
    WAITING_SNAKEFILE,
    clean_env,
    fanout_snakefile,
    job_lines,
    run_dirs,
    run_snakemake,
    sum_of_squares,
    wait_for_starts,
    write_snakefile,
)

importlib.import_module("snakemake")  # missing, it fails (never a skip)

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

#: How an allocation the plugin released may end (see the fan-out test).
ENDED = ("COMPLETED", "CANCELLED", "FAILED")

COUNTED = ("sbatch", "squeue", "sacct", "scontrol", "scancel", "qsub", "qstat", "qdel")


def counting_wrappers(directory: Path, path: str) -> Path:
    """``directory/bin/PROGRAM`` for each batch command: log the call, run the real one."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True)
    log = directory / "calls.log"
    for program in COUNTED:
        real = shutil.which(program, path=path)
        if real is None:
            continue
        wrapper = bin_dir / program
        wrapper.write_text(f'#!/bin/sh\necho "{program}" >> "{log}"\nexec "{real}" "$@"\n')
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return log


def test_fanout_of_200_jobs_uses_exactly_one_sbatch(tmp_path: Path, env, slurm_cluster):
    n = 200
    workdir = tmp_path / "wf"
    write_snakefile(workdir, fanout_snakefile(n))
    env = {**clean_env(env), **slurm_cluster.extra_env}
    calls_log = counting_wrappers(tmp_path, env["PATH"])
    env["PATH"] = f"{tmp_path / 'bin'}:{env['PATH']}"
    result = run_snakemake(
        "--executor", "hpcflow", "--jobs", "100", "--group-components", "fan=100",
        "--hpcflow-mode", "pilot", "--hpcflow-profile", "slurm-test", "--hpcflow-nodes", "2",
        "--hpcflow-walltime", "10m", "--set-resources", "chunk:slurm_partition=gpu",
        cwd=workdir, env=env, timeout=240,
    )  # fmt: skip
    (run_dir,) = run_dirs(workdir)
    logs = "\n".join(p.read_text() for p in sorted((run_dir / "allocations").glob("*.err")))
    assert result.returncode == 0, result.output[-4000:] + logs
    assert (workdir / "results" / "total.txt").read_text().strip() == str(sum_of_squares(n))
    # A job's own partition cannot move it out of the one allocation: said once.
    assert result.output.count("asks for slurm_partition 'gpu'") == 1, result.output[-3000:]
    calls = calls_log.read_text().split()
    assert calls.count("sbatch") == 1, calls
    # The allocation ended by itself once the plugin shut its Dask cluster down. (Usually
    # COMPLETED; FAILED when PMIx aborts the step because ranks exit without MPI_Finalize at
    # slightly different times: the work is done either way.)
    native_id = json.loads((run_dir / "scheduler.json").read_text())["allocation"]
    assert slurm_cluster.wait_for_job(native_id, timeout=30) in ENDED
    assert "an external client drives this run" in logs
    assert json.loads((run_dir / "scheduler.json").read_text())["address"].startswith("tls://")
    # Job logs sit in the run directory, as for local runs.
    assert any(p.name.startswith("group_fan") for p in (run_dir / "tasks").iterdir())
    # The jobs ran through the workers' warm runners (their logs: RUN_DIR/warm/).
    assert list((run_dir / "warm").glob("*.log"))
    assert "runs Snakemake's own job command" not in result.output
    # ... and the run is an hpcflow run: `hpcflow status` shows it, with its allocation.
    snap = hpcflow_status(run_dir, env)
    assert snap["status"] == "succeeded", snap
    assert snap["engine"] == "snakemake"
    # Snakemake names a group job after its group and rules ("fan_square").
    groups = {name: c for name, c in snap["counts"].items() if name.startswith("group:fan")}
    assert list(groups.values()) == [{"succeeded": 2}], snap["counts"]
    assert snap["counts"]["total"] == {"succeeded": 1}
    (allocation,) = snap["allocations"]
    assert allocation["native_id"] == str(native_id) and allocation["backend"] == "slurm"
    assert allocation["state"] in ("completed", "failed", "cancelled")


def hpcflow_status(run_dir: Path, env: dict[str, str]) -> dict:
    """``hpcflow status RUN_DIR --json``, as a real process."""
    proc = subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", "status", str(run_dir), "--json"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def test_pilot_mode_through_pbs_qsub_qstat(tmp_path: Path, env, slurm_cluster):
    """``--hpcflow-profile pbs-test``: the one allocation goes through qsub (SLURM's
    PBS/Torque wrappers over the test cluster) and mpirun starts its ranks."""
    n = 10
    workdir = tmp_path / "wf"
    write_snakefile(workdir, fanout_snakefile(n))
    env = {**clean_env(env), **slurm_cluster.extra_env}
    calls_log = counting_wrappers(tmp_path, env["PATH"])
    env["PATH"] = f"{tmp_path / 'bin'}:{env['PATH']}"
    result = run_snakemake(
        "--executor", "hpcflow", "--jobs", "20", "--group-components", f"fan={n}",
        "--hpcflow-mode", "pilot", "--hpcflow-profile", "pbs-test", "--hpcflow-walltime", "10m",
        cwd=workdir, env=env, timeout=240,
    )  # fmt: skip
    (run_dir,) = run_dirs(workdir)
    logs = "\n".join(p.read_text() for p in sorted((run_dir / "allocations").glob("*.err")))
    assert result.returncode == 0, result.output[-4000:] + logs
    assert (workdir / "results" / "total.txt").read_text().strip() == str(sum_of_squares(n))
    calls = calls_log.read_text().split()
    assert calls.count("qsub") == 1, calls
    script = (run_dir / "allocations" / "1.sh").read_text()
    assert "#PBS -l nodes=1:ppn=2\n" in script and "#SBATCH" not in script
    # The scheduler and driver on the script's node; mpirun starts the workers.
    assert " --role head " in script and " -- mpirun -n 1 --map-by ppr:1:node " in script
    snap = hpcflow_status(run_dir, env)
    assert snap["status"] == "succeeded", snap
    (allocation,) = snap["allocations"]
    assert allocation["backend"] == "pbs"
    assert slurm_cluster.wait_for_job(allocation["native_id"], timeout=30) in ENDED


def test_ctrl_c_releases_the_allocation(tmp_path: Path, env, slurm_cluster):
    marker = f"118.{os.getpid() % 10000:04d}{int(time.time()) % 1000:03d}"
    workdir = tmp_path / "wf"
    write_snakefile(
        workdir,
        'rule all:\n    input: "slow.txt"\n'
        'rule slow:\n    output: "slow.txt"\n'
        f'    shell: "sleep {marker}; touch {{output}}"\n',
    )
    proc = subprocess.Popen(
        [*SNAKEMAKE, "--executor", "hpcflow", "--jobs", "1", "--hpcflow-mode", "pilot",
         "--hpcflow-profile", "slurm-test", "--hpcflow-walltime", "10m"],
        cwd=workdir, env={**clean_env(env), **slurm_cluster.extra_env},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not processes_with(marker):
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            time.sleep(0.3)
        assert processes_with(marker), "the job never started in the allocation"
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0, output
    (run_dir,) = run_dirs(workdir)
    native_id = json.loads((run_dir / "scheduler.json").read_text())["allocation"]
    assert slurm_cluster.wait_for_job(native_id, timeout=30) in ENDED
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and processes_with(marker):
        time.sleep(0.2)
    assert not processes_with(marker), "the job's process outlived Ctrl-C"
    assert not (workdir / "slow.txt").exists()


def test_one_snakemake_run_drives_a_workflow_and_a_killed_one_s_allocation_ends(
    tmp_path: Path, env, slurm_cluster
):
    """The plugin holds the workflow's lease with its allocation named in it: a second run
    (``--nolock`` lifts Snakemake's own lock) is refused, naming the run, its allocation
    and the cancel command. ``kill -9`` of Snakemake's main process (the allocation's Dask
    client): the allocation ends its tasks and itself within seconds, not at its walltime;
    the re-run takes the lease over, saying so, and the killed run's attempt never ends
    (counted from the lines the job writes)."""
    workdir = tmp_path / "wf"
    write_snakefile(workdir, WAITING_SNAKEFILE)
    env = {**clean_env(env), **slurm_cluster.extra_env}
    argv = [*SNAKEMAKE, "--executor", "hpcflow", "--jobs", "1", "--hpcflow-mode", "pilot",
            "--hpcflow-profile", "slurm-test", "--hpcflow-walltime", "10m"]  # fmt: skip
    first = subprocess.Popen(
        argv, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    try:
        wait_for_starts(workdir, first, 1)
        (run_dir,) = run_dirs(workdir)
        native_id = json.loads((run_dir / "scheduler.json").read_text())["allocation"]
        refused = subprocess.run(
            [*argv, "--nolock"], cwd=workdir, env=env, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        out = refused.stdout + refused.stderr
        assert refused.returncode != 0, out[-3000:]
        assert f"another run of this workflow is active: run {run_dir.name}" in out, out[-3000:]
        assert f"slurm allocation(s) {native_id})" in out, out[-3000:]
        assert f"hpcflow cancel {run_dir.name}" in out, out[-3000:]
        assert run_dirs(workdir) == [run_dir]
        os.kill(first.pid, signal.SIGKILL)
        first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.communicate()
    # Its walltime is 10 minutes: only the allocation's own watch ends it this soon.
    assert slurm_cluster.wait_for_job(native_id, timeout=90) in ENDED
    (workdir / "go").touch()  # a killed run's attempt still alive would now end
    again = subprocess.run(
        [*argv, "--nolock"], cwd=workdir, env=env, capture_output=True, text=True, timeout=240
    )
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-4000:]
    assert f"took over the workflow's lease from run {run_dir.name}" in out, out[-3000:]
    lines = job_lines(workdir)
    starts = [pid for what, pid in lines if what == "start"]
    assert len(starts) == 2 and [p for w, p in lines if w == "end"] == [starts[1]], lines
    head_log = "\n".join(p.read_text() for p in (run_dir / "allocations").glob("*.err"))
    assert "the run's client (the process that submitted this allocation) is gone" in head_log


def test_a_rejected_allocation_is_a_clear_error(tmp_path: Path, env, slurm_cluster):
    workdir = tmp_path / "wf"
    write_snakefile(workdir, fanout_snakefile(3))
    result = run_snakemake(
        "--executor", "hpcflow", "--jobs", "5", "--hpcflow-mode", "pilot",
        "--hpcflow-profile", "slurm-test", "--hpcflow-partition", "no-such-partition",
        cwd=workdir, env={**clean_env(env), **slurm_cluster.extra_env}, timeout=120,
    )  # fmt: skip
    assert result.returncode != 0
    assert "sbatch rejected the allocation" in result.output
    assert "no-such-partition" in result.output
    assert "hint:" in result.output
    assert not (workdir / "results" / "total.txt").exists()


@pytest.mark.exclusive  # a 1-minute allocation: bound to the walltime, not to the CPU
def test_an_allocation_killed_at_its_walltime_is_continued(tmp_path: Path, env, slurm_cluster):
    """``resubmit: true``: SLURM kills the one allocation at its 1-minute time limit with a
    job still running; the plugin submits a continuation allocation and sends the job
    there again (the same Snakemake attempt), and the Snakemake run succeeds."""
    workdir = tmp_path / "wf"
    write_snakefile(
        workdir,
        'rule all:\n    input: "quick.txt", "out.txt"\n'
        'rule quick:\n    output: "quick.txt"\n    shell: "echo quick > {output}"\n'
        'rule stubborn:\n    output: "out.txt"\n'
        # The first run outlives the allocation; the one in the continuation is quick.
        '    shell: "if [ -e tried ]; then echo done > {output}; '
        'else touch tried; sleep 600; fi"\n',
    )
    env = {**clean_env(env), **slurm_cluster.extra_env, "HPCFLOW_RESUBMIT": "true"}
    result = run_snakemake(
        "--executor", "hpcflow", "--jobs", "2", "--hpcflow-mode", "pilot",
        "--hpcflow-profile", "slurm-test", "--hpcflow-walltime", "1m",
        cwd=workdir, env=env, timeout=420,
    )  # fmt: skip
    (run_dir,) = run_dirs(workdir)
    logs = "\n".join(p.read_text() for p in sorted((run_dir / "allocations").glob("*.err")))
    assert result.returncode == 0, result.output[-4000:] + logs
    assert (workdir / "out.txt").read_text() == "done\n"
    assert "hit its walltime; submitting continuation 2" in result.output
    assert len(list((run_dir / "allocations").glob("*.sh"))) == 2
    snap = hpcflow_status(run_dir, env)
    assert snap["status"] == "succeeded", snap
    assert [a["state"] for a in snap["allocations"]][0] == "timeout", snap["allocations"]
    assert snap["counts"]["stubborn"] == {"succeeded": 1}, snap["counts"]
    # The second allocation ended once Snakemake was done: nothing left in the queue.
    native_id = json.loads((run_dir / "scheduler.json").read_text())["allocation"]
    assert str(native_id) == snap["allocations"][1]["native_id"]
    assert slurm_cluster.wait_for_job(native_id, timeout=30) in ENDED
