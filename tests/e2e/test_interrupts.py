"""SIGKILL of the driver, SIGTERM/Ctrl-C, and two runs at once."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import left_with, processes_with, write_workflow

N = 40


def _start(wf: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "-q", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _run_dirs(root: Path) -> list[Path]:
    return sorted((root / ".hpcflow" / "runs").glob("*"))


def _states(run_dir: Path) -> dict[str, int]:
    """Read the live state database from another process, as `hpcflow status` does."""
    db = run_dir / "state.sqlite"
    if not db.exists():
        return {}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return dict(conn.execute("SELECT state, COUNT(*) FROM tasks GROUP BY state").fetchall())
    except sqlite3.OperationalError:
        return {}
    finally:
        conn.close()


def _wait_for(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


SLOW = """
name: slow
tasks:
  - name: step
    foreach: {{i: {{range: [0, {n}]}}}}
    command: sleep {sleep}; echo {{i}} > {{outputs}}
    outputs: ["out/{{i}}.txt"]
"""


@pytest.mark.parametrize(("kill_after", "engine"), [(3, "pool"), (17, "pool"), (9, "dask")])
def test_sigkill_of_driver_then_rerun_runs_exactly_the_unfinished(
    tmp_path, env, hpcflow, kill_after, engine
):
    wf = write_workflow(tmp_path, SLOW.format(n=N, sleep=0.15))
    proc = _start(wf, env, "--threads", "2", "--engine", engine)
    _wait_for(
        lambda: (
            _run_dirs(tmp_path)
            and _states(_run_dirs(tmp_path)[0]).get("succeeded", 0) >= kill_after
        )
    )
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    run_dir = _run_dirs(tmp_path)[0]
    time.sleep(0.5)  # let orphaned task processes of the killed run finish
    states = _states(run_dir)
    done = states.get("succeeded", 0)
    assert kill_after <= done < N, states
    # `status` reads the state of the killed run and says the driver is gone.
    status = json.loads(hpcflow("status", "--json", str(run_dir)).stdout)
    assert status["status"] == "interrupted"
    rerun = hpcflow("run", str(wf), "-q")
    assert rerun.returncode == 0, rerun.output
    # At least what state.sqlite had committed is up to date; successes the driver had not
    # committed yet come back from the journal (tests/fault/test_driver_killed.py counts
    # the executions themselves).
    ran, up_to_date = map(int, re.search(r"(\d+) ran, (\d+) up to date", rerun.stdout).groups())
    assert ran + up_to_date == N and up_to_date >= done, (rerun.stdout, done)
    assert sorted(int(p.stem) for p in (tmp_path / "out").iterdir()) == list(range(N))


@pytest.mark.parametrize("engine", ["pool", "dask"])
def test_sigterm_cancels_cleanly_and_leaves_no_processes(tmp_path, env, engine):
    marker = f"hpcflow-cancel-{time.time_ns()}"
    wf = write_workflow(
        tmp_path,
        f"""
name: long
tasks:
  - name: long
    foreach: {{i: {{range: [0, 6]}}}}
    command: sleep 60; echo {marker}
""",
    )
    proc = _start(wf, env, "--threads", "2", "--engine", engine)
    _wait_for(
        lambda: _run_dirs(tmp_path) and _states(_run_dirs(tmp_path)[0]).get("running", 0) >= 2
    )
    _wait_for(lambda: len(processes_with(marker)) >= 2)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert proc.returncode == 130, proc.stderr.read() if proc.stderr else ""
    assert time.monotonic() - started < 30
    assert left_with(marker) == []
    states = _states(_run_dirs(tmp_path)[0])
    assert states == {"cancelled": 6}


def test_second_concurrent_run_refuses(tmp_path, env, hpcflow):
    wf = write_workflow(tmp_path, SLOW.format(n=4, sleep=3))
    proc = _start(wf, env)
    try:
        _wait_for(
            lambda: _run_dirs(tmp_path) and _states(_run_dirs(tmp_path)[0]).get("running", 0) >= 1
        )
        second = hpcflow("run", str(wf), "-q")
        assert second.returncode == 2
        assert "another run of this workflow is active" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
