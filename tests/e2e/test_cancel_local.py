"""`hpcflow cancel` and `Run.cancel()` on a local run: the driver acts on the request,
the run ends cancelled, and a run that has ended is left as it is."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from hpcflow.api import Run, RunStatus
from tests.conftest import left_with, processes_with, write_workflow


def _wait_for(what: str, predicate, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        time.sleep(0.05)


def _run_dir(root: Path) -> Path | None:
    found = sorted((root / ".hpcflow" / "runs").glob("*/state.sqlite"))
    return found[0].parent if found else None


def test_cancel_of_a_local_run_and_of_an_ended_one(tmp_path, env, hpcflow):
    marker = f"hpcflow-cli-cancel-{time.time_ns()}"
    wf = write_workflow(
        tmp_path,
        f"""
name: long
tasks:
  - name: long
    foreach: {{i: {{range: [0, 3]}}}}
    command: sleep 60; echo {marker}
""",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "-q", "--threads", "3"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for("the run's directory", lambda: _run_dir(tmp_path) is not None)
        run = Run(_run_dir(tmp_path))  # type: ignore[arg-type]
        _wait_for("three running tasks", lambda: len(processes_with(marker)) >= 3)
        cancelled = hpcflow("cancel", str(run.run_dir))
        assert cancelled.returncode == 0, cancelled.output
        assert cancelled.stdout == "the run's driver stopped the run\n", cancelled.output
        proc.wait(timeout=60)
        assert proc.returncode == 130, proc.stderr.read() if proc.stderr else ""
        assert left_with(marker) == []
        assert run.status == RunStatus.CANCELLED
        assert set(run.states().values()) == {"cancelled"}
        # Ended: neither the API nor the command does anything more.
        again = run.cancel()
        assert not again.active and again.allocations == [] and again.signalled is None
        repeat = hpcflow("cancel", run.id)
        assert repeat.returncode == 0
        assert repeat.stdout == f"run {run.id} is not active (cancelled)\n"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
