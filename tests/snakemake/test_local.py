"""``snakemake --executor hpcflow`` on the local hpcflow cluster, as real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tests.snakemake.helpers import (
    SNAKEMAKE,
    fanout_snakefile,
    run_dirs,
    sum_of_squares,
    write_snakefile,
)

pytestmark = pytest.mark.slow


def test_fanout_of_200_jobs_and_a_reduce(tmp_path: Path, snakemake):
    n = 200
    write_snakefile(tmp_path, fanout_snakefile(n))
    started = time.monotonic()
    result = snakemake(
        "--executor", "hpcflow", "--hpcflow-local-groups", "--jobs", "50",
        "--group-components", "fan=100",
        cwd=tmp_path,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.output[-4000:]
    assert (tmp_path / "results" / "total.txt").read_text().strip() == str(sum_of_squares(n))
    assert (tmp_path / "results" / "chunk_b.txt").read_text() == "chunk b\n"
    assert f"{n + 4} of {n + 4} steps (100%) done" in result.output
    (run_dir,) = run_dirs(tmp_path)
    task_dirs = {p.name for p in (run_dir / "tasks").iterdir()}
    # Two groups of 100 square jobs, two chunk jobs and the reduce: five hpcflow tasks.
    assert sum(name.startswith("group_fan") for name in task_dirs) == 2
    assert {name.split("-")[0] for name in task_dirs} >= {"chunk.c=a", "chunk.c=b"}
    assert any(name.startswith("total") for name in task_dirs)
    assert elapsed < 150


def test_a_failed_job_names_its_log_files_in_the_run_directory(tmp_path: Path, snakemake):
    write_snakefile(
        tmp_path,
        'rule all:\n    input: "out/bad.txt"\n'
        'rule bad:\n    output: "out/{name}.txt"\n'
        '    shell: "echo about to fail >&2; exit 3"\n',
    )
    result = snakemake(
        "--executor", "hpcflow", "--hpcflow-local-groups", "--jobs", "2", cwd=tmp_path
    )  # fmt: skip
    assert result.returncode != 0
    (run_dir,) = run_dirs(tmp_path)
    (task_dir,) = (run_dir / "tasks").iterdir()
    assert task_dir.name.startswith("bad.name=bad-")
    stderr_log = task_dir / "1.err"
    assert str(stderr_log) in result.output
    assert "exit code 3" in result.output or "exited with" in result.output
    assert "about to fail" in stderr_log.read_text()


def test_jobs_larger_than_the_worker_run_as_with_the_local_executor(tmp_path: Path, snakemake):
    """Local mode: a job wanting more cpus than the worker has runs (its slot holds all of
    them, said once), with the threads Snakemake's own job gives it; ``threads: 0`` runs;
    ``gpu=1`` on a machine without GPUs is a plain counter. (Pilot mode still refuses:
    ``test_local_fit.test_batch_modes_still_refuse_what_no_worker_holds_with_the_hint``.)"""
    write_snakefile(
        tmp_path,
        'rule all:\n    input: "big.txt", "zero.txt", "gpu.txt"\n'
        'rule big:\n    output: "big.txt"\n    threads: 4096\n'
        '    shell: "echo {threads} > {output}"\n'
        'rule zero:\n    output: "zero.txt"\n    threads: 0\n'
        '    shell: "echo {threads} > {output}"\n'
        'rule gpu:\n    output: "gpu.txt"\n    resources: gpu=1\n'
        '    shell: "echo {resources.gpu} > {output}"\n',
    )
    result = snakemake("--executor", "hpcflow", "--jobs", "3", "--cores", "4096", cwd=tmp_path)
    assert result.returncode == 0, result.output[-4000:]
    assert (tmp_path / "big.txt").read_text().strip() == "4096"  # as --cores 4096 locally
    assert (tmp_path / "zero.txt").read_text().strip() == "0"
    assert (tmp_path / "gpu.txt").read_text().strip() == "1"
    assert result.output.count("asks for 4096 cpus") == 1
    assert "plain Snakemake resource" in result.output


#: Two grouped rules and what each job's own Snakemake was started as.
GROUPED = (
    'rule all:\n    input: "b.txt"\n'
    'rule a:\n    output: "a.{groupid}.txt"\n    group: "g"\n'
    "    shell: \"cat /proc/$PPID/cmdline | tr '\\\\0' ' ' > {output}\"\n"
    "def a_out(wildcards, groupid):\n    return f'a.{groupid}.txt'\n"
    'rule b:\n    input: a_out\n    output: "b.txt"\n    group: "g"\n'
    '    shell: "cp {input} {output}"\n'
)


@pytest.mark.parametrize("groups", [False, True])
def test_local_mode_runs_jobs_as_snakemakes_local_executor_unless_groups_are_asked_for(
    tmp_path: Path, snakemake, groups
):
    """Local mode is a local executor to Snakemake: no group job (``{groupid}`` is
    ``local``), each job its own hpcflow task, run as the local executor's job processes
    (``--mode subprocess``), ``--cores`` as with the local executor (no ``--jobs``). With
    ``--hpcflow-local-groups`` the group is one task of a remote job (``--mode remote``)."""
    write_snakefile(tmp_path, GROUPED)
    flags = ("--hpcflow-local-groups", "--jobs", "2") if groups else ("--cores", "2")
    result = snakemake("--executor", "hpcflow", "--hpcflow-runner", "command", *flags, cwd=tmp_path)
    assert result.returncode == 0, result.output[-4000:]
    (made,) = tmp_path.glob("a.*.txt")
    (run_dir,) = run_dirs(tmp_path)
    tasks = sorted(p.name.split("-")[0] for p in (run_dir / "tasks").iterdir())
    if groups:
        assert made.name != "a.local.txt"
        assert "--mode remote" in made.read_text()
        assert len(tasks) == 1 and tasks[0].startswith("group_g")
    else:
        assert made.name == "a.local.txt"
        assert "--mode subprocess" in made.read_text()
        assert "--local-groupid local" in made.read_text()


def test_a_failed_group_job_names_its_log_files(tmp_path: Path, snakemake):
    write_snakefile(
        tmp_path,
        'rule all:\n    input: "b.txt"\n'
        'rule a:\n    output: "a.txt"\n    group: "g"\n    shell: "touch {output}"\n'
        'rule b:\n    input: "a.txt"\n    output: "b.txt"\n    group: "g"\n'
        '    shell: "echo group member fails >&2; exit 3"\n',
    )
    result = snakemake(
        "--executor", "hpcflow", "--hpcflow-local-groups", "--jobs", "2", cwd=tmp_path
    )  # fmt: skip
    assert result.returncode != 0
    (run_dir,) = run_dirs(tmp_path)
    (task_dir,) = (run_dir / "tasks").iterdir()
    assert task_dir.name.startswith("group_g")
    stderr_log = task_dir / "1.err"
    assert f"Its output is in {task_dir / '1.out'} and {stderr_log}" in result.output
    assert "group member fails" in stderr_log.read_text()


def test_ended_jobs_and_the_end_of_the_run_wait_for_no_status_check(tmp_path: Path, snakemake):
    """The status thread is woken when a job's future ends and when Snakemake shuts the
    executor down: with an hour between checks, two jobs in a row still finish (without
    the wake-up the run would sit out the first hour-long wait: the timeout fails it)."""
    write_snakefile(
        tmp_path,
        'rule all:\n    input: "b.txt"\n'
        'rule a:\n    output: "a.txt"\n    shell: "echo a > {output}"\n'
        'rule b:\n    input: "a.txt"\n    output: "b.txt"\n    shell: "cat {input} > {output}"\n',
    )
    result = snakemake(
        "--executor", "hpcflow", "--jobs", "1", "--hpcflow-poll-interval", "3600",
        cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.output[-4000:]
    assert (tmp_path / "b.txt").read_text() == "a\n"


def test_a_run_with_nothing_to_do_starts_no_cluster_and_ends_quietly(tmp_path: Path, snakemake):
    """Snakemake creates the executor but never shuts it down when it finds nothing to do:
    that run makes no run directory (no cluster), and the executor's status thread, still
    waiting when the interpreter exits, leaves no trace (a helper thread it waited in once
    printed ``cannot schedule new futures after shutdown`` on stdout)."""
    write_snakefile(tmp_path, 'rule a:\n    output: "a.txt"\n    shell: "echo a > {output}"\n')
    first = snakemake("--executor", "hpcflow", "--jobs", "1", cwd=tmp_path)
    assert first.returncode == 0, first.output[-4000:]
    again = snakemake("--executor", "hpcflow", "--jobs", "1", cwd=tmp_path)
    assert again.returncode == 0, again.output[-4000:]
    assert "Nothing to be done" in again.stderr
    assert again.stdout == ""
    assert len(run_dirs(tmp_path)) == 1


def test_ctrl_c_cancels_running_jobs_and_closes_the_cluster(tmp_path: Path, snakemake_env):
    # A unique sleep duration identifies the job's own process.
    marker = f"119.{os.getpid() % 10000:04d}{int(time.time()) % 1000:03d}"
    write_snakefile(
        tmp_path,
        'rule all:\n    input: "slow.txt"\n'
        'rule slow:\n    output: "slow.txt"\n'
        f'    shell: "sleep {marker}; touch {{output}}"\n',
    )
    proc = subprocess.Popen(
        [*SNAKEMAKE, "--executor", "hpcflow", "--jobs", "1"],
        cwd=tmp_path, env=snakemake_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not _sleepers(marker):
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            time.sleep(0.3)
        assert _sleepers(marker), "the job never started"
        tree = [proc.pid, *(p.pid for p in psutil.Process(proc.pid).children(recursive=True))]
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 45  # a busy machine takes a while to stop a cluster
    while time.monotonic() < deadline and (_sleepers(marker) or _alive(tree)):
        time.sleep(0.2)
    assert not _sleepers(marker), "the job's process outlived Ctrl-C"
    assert not _alive(tree), "Dask processes outlived Ctrl-C"
    assert proc.returncode != 0
    assert not (tmp_path / "slow.txt").exists()


def _sleepers(marker: str) -> list[psutil.Process]:
    from tests.conftest import processes_with

    found = []
    for proc in processes_with(marker):
        try:
            if proc.cmdline()[:1] == ["sleep"] and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            continue
    return alive


def test_the_status_thread_checks_nothing_more_once_the_interpreter_exits(monkeypatch):
    """When Snakemake finds nothing to do it never shuts the executor down, and its status
    thread wakes while the interpreter exits: a check then needs a thread pool that no
    longer takes work, and Snakemake prints that error on stdout (seen under load in
    test_a_run_with_nothing_to_do_starts_no_cluster_and_ends_quietly). The plugin's sleep
    does not return once the main thread has ended."""
    import asyncio
    import threading
    import types

    from snakemake_executor_plugin_hpcflow import executor as ex

    fake = types.SimpleNamespace(
        next_seconds_between_status_checks=0.01,
        _wakeup=threading.Event(),
        _sleeping=None,
        wait=True,
    )

    async def sleeps(limit: float) -> bool:
        try:
            await asyncio.wait_for(ex.Executor.sleep(fake), limit)
        except asyncio.TimeoutError:
            return False
        return True

    assert asyncio.run(sleeps(30)), "a sleep while the main thread runs returns"
    ended = types.SimpleNamespace(is_alive=lambda: False)
    monkeypatch.setattr(ex.threading, "main_thread", lambda: ended)
    assert not asyncio.run(sleeps(0.5)), "a sleep after the main thread ended returned"
