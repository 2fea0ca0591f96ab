"""The warm runner on its own, driven as a worker drives it (:func:`warm.run_warm`):
stale Snakefiles, options it was not loaded with, a runner that dies or cannot start,
a job's timeout and a cancel. Real runner processes, real Snakemake jobs; no Dask."""

from __future__ import annotations

import os
import shlex
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from hpcflow.store import statedb as st
from hpcflow.worker.calls import TaskCall
from hpcflow.worker.groups import LIVE, kill_running
from snakemake_executor_plugin_hpcflow import warm
from snakemake_executor_plugin_hpcflow.jobcommand import read_job_command
from tests.snakemake.helpers import write_snakefile

pytestmark = pytest.mark.slow

SNAKEFILE = textwrap.dedent(
    """
    rule r:
        output: "out/{i}.txt"
        shell: "echo {wildcards.i} > {output}; echo said {wildcards.i} >&2"

    rule slow:
        output: "slow/{i}.txt"
        shell: "sleep 60; touch {output}"

    rule slow_script:
        output: "slow_script/{i}.txt"
        script: "slow.py"
    """
)

#: Says its pid and whether it runs forked from the job (warm_script), then sleeps.
SLOW_SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    forked = "snakemake_executor_plugin_hpcflow.warm_script" in sys.modules
    os.makedirs("pids", exist_ok=True)
    with open(f"pids/{snakemake.wildcards.i}.tmp", "w") as f:
        f.write(f"{os.getpid()} {forked}")
    os.rename(f"pids/{snakemake.wildcards.i}.tmp", f"pids/{snakemake.wildcards.i}")
    time.sleep(60)
    """
)


@pytest.fixture(autouse=True)
def _fresh_runners(monkeypatch):
    """Each test has runners of its own, and a worker that was not cancelled."""
    runners = warm.Runners()
    monkeypatch.setattr(warm, "RUNNERS", runners)
    LIVE.cancelled = False
    yield runners
    for runner in list(runners._runners.values()):
        runners.drop(runner)
    LIVE.cancelled = False


def _command(work: Path, target: str, rule: str, python: str = sys.executable) -> str:
    args = [
        "--snakefile", str(work / "Snakefile"), "--target-jobs", target,
        "--allowed-rules", rule, "--cores", "1", "--attempt", "1", "--force-use-threads",
        "--force", "--target-files-omit-workdir-adjustment", "--max-inventory-time", "0",
        "--retries", "0", "--nocolor", "--no-hooks", "--nolock", "--ignore-incomplete",
        "--latency-wait", "1", "--mode", "remote",
    ]  # fmt: skip
    return shlex.join([python, "-m", "snakemake", *args])


def _call(work: Path, command: str, index: int, timeout: float | None = None) -> TaskCall:
    logs = work / "logs"
    return TaskCall(
        index=index, attempt=1, kind="shell", command=command, argv=None, python=None,
        kwargs=None, workdir=str(work), env=None, timeout=timeout, inputs=(), outputs=(),
        stdout=str(logs / f"{index}.out"), stderr=str(logs / f"{index}.err"),
        result=str(logs / f"{index}.json"), quarantine_dir=str(work / "quarantine"),
        task_id=f"job{index}",
    )  # fmt: skip


def _run(work: Path, i: int, rule: str = "r", python: str = sys.executable, **kw):
    command = _command(work, f"{rule}:i={i}", rule, python)
    call = _call(work, command, i, **kw)
    (outcome,) = warm.run_warm(call, read_job_command(command, str(work)), str(work / "warm"))
    return outcome, call


@pytest.fixture
def work(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    write_snakefile(work, SNAKEFILE)
    (work / "slow.py").write_text(SLOW_SCRIPT)
    return work


def _runner_logs(work: Path) -> list[Path]:
    return sorted((work / "warm").iterdir()) if (work / "warm").exists() else []


def test_jobs_share_one_runner_and_each_gets_its_own_logs(work: Path):
    for i in range(3):
        outcome, call = _run(work, i)
        assert outcome.state == st.SUCCEEDED, (outcome, Path(call.stderr).read_text())
        assert (work / "out" / f"{i}.txt").read_text() == f"{i}\n"
        assert f"said {i}" in Path(call.stderr).read_text()
        assert not os.path.exists(call.stdout)  # nothing on stdout: no file
    assert len(_runner_logs(work)) == 1


def test_a_changed_snakefile_gets_a_fresh_runner(work: Path):
    assert _run(work, 1)[0].state == st.SUCCEEDED
    time.sleep(0.05)
    write_snakefile(work, SNAKEFILE.replace("echo {wildcards.i}", "echo new {wildcards.i}"))
    outcome, call = _run(work, 2)
    assert outcome.state == st.SUCCEEDED, Path(call.stderr).read_text()
    assert (work / "out" / "2.txt").read_text() == "new 2\n"
    assert len(_runner_logs(work)) == 2


def test_options_the_runner_was_not_loaded_with_run_the_command(work: Path, monkeypatch):
    assert _run(work, 1)[0].state == st.SUCCEEDED
    # Same key, other general options (a key collision): the runner refuses the job.
    command = _command(work, "r:i=2", "r").replace("--latency-wait 1", "--latency-wait 2")
    job = read_job_command(_command(work, "r:i=2", "r"), str(work))
    forged = type(job)(job.python, job.env, read_job_command(command, str(work)).argv, job.key)
    fallbacks: list[TaskCall] = []
    real = warm.run_call
    monkeypatch.setattr(warm, "run_call", lambda call: fallbacks.append(call) or real(call))
    (outcome,) = warm.run_warm(_call(work, command, 2), forged, str(work / "warm"))
    assert outcome.state == st.SUCCEEDED
    assert len(fallbacks) == 1
    assert (work / "out" / "2.txt").read_text() == "2\n"


def test_a_runner_that_cannot_start_leaves_the_jobs_to_their_command(work: Path, monkeypatch):
    fallbacks: list[TaskCall] = []
    real = warm.run_call
    monkeypatch.setattr(warm, "run_call", lambda call: fallbacks.append(call) or real(call))
    # An interpreter without Snakemake (or without this plugin): the runner cannot load.
    outcome, call = _run(work, 1, python="/usr/bin/python3")
    assert outcome.state != st.SUCCEEDED  # the command itself fails there too
    assert fallbacks == [call]
    (runner_log,) = _runner_logs(work)
    assert "No module named" in runner_log.read_text()
    _run(work, 2, python="/usr/bin/python3")  # not tried again for that key
    assert len(_runner_logs(work)) == 1 and len(fallbacks) == 2


def test_a_runner_that_dies_fails_its_running_job_and_is_replaced(work: Path, _fresh_runners):
    assert _run(work, 1)[0].state == st.SUCCEEDED
    (runner,) = _fresh_runners._runners.values()
    threading.Timer(1.5, os.kill, (runner.proc.pid, signal.SIGKILL)).start()
    outcome, _ = _run(work, 1, rule="slow")
    assert outcome.state == st.FAILED
    assert "the warm runner ended during the job" in (outcome.message or "")
    assert _run(work, 3)[0].state == st.SUCCEEDED
    assert len(_runner_logs(work)) == 2


def test_the_runtime_limit_kills_a_warm_job(work: Path):
    started = time.monotonic()
    outcome, _ = _run(work, 1, rule="slow", timeout=2)
    assert outcome.state == st.FAILED
    assert outcome.message == "timed out after 2s"
    assert time.monotonic() - started < 30
    assert not (work / "slow" / "1.txt").exists()


def test_a_cancel_kills_a_warm_job(work: Path):
    assert _run(work, 1)[0].state == st.SUCCEEDED  # the runner is up
    threading.Timer(2.0, kill_running).start()
    started = time.monotonic()
    outcome, _ = _run(work, 1, rule="slow")
    assert outcome.state == st.CANCELLED
    assert time.monotonic() - started < 30


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_cancel_kills_a_warm_jobs_forked_script(work: Path):
    assert _run(work, 1)[0].state == st.SUCCEEDED  # the runner is up
    pid_file = work / "pids" / "1"

    def cancel_once_the_script_runs() -> None:
        deadline = time.monotonic() + 60
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        kill_running()

    threading.Thread(target=cancel_once_the_script_runs, daemon=True).start()
    outcome, _ = _run(work, 1, rule="slow_script")
    assert outcome.state == st.CANCELLED
    pid, forked = pid_file.read_text().split()
    assert forked == "True"  # the script ran in a fork of the job's process
    deadline = time.monotonic() + 30
    while _alive(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(int(pid))
