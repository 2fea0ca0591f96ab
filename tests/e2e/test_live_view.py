"""What a person at a terminal sees: live progress with an ETA, and `logs --follow`."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest

from tests.conftest import write_workflow

SLOW = """
name: slow
tasks:
  - name: step
    foreach: {i: {range: [0, 8]}}
    command: echo "line {i}"; sleep 0.6
"""


@pytest.mark.skipif(shutil.which("script") is None, reason="util-linux `script` gives a tty")
def test_live_progress_on_a_terminal(tmp_path, env):
    wf = write_workflow(tmp_path, SLOW)
    command = f"{sys.executable} -m hpcflow.cli.main run {wf} --threads 2"
    proc = subprocess.run(
        ["script", "-q", "-e", "-c", command, str(tmp_path / "typescript")],
        env={**env, "TERM": "xterm", "COLUMNS": "120"}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    screen = (tmp_path / "typescript").read_text(errors="replace")
    assert proc.returncode == 0, screen[-2000:]
    assert "elapsed" in screen and "ETA" in screen  # the live table's caption
    assert "of 8 tasks" in screen or "/8 tasks" in screen
    assert "succeeded: 8 ran" in screen


def test_logs_follow_streams_until_the_task_ends(tmp_path, env, hpcflow):
    wf = write_workflow(
        tmp_path,
        """
name: chatty
tasks:
  - name: talk
    command: for i in 1 2 3 4; do echo "tick $i"; sleep 0.5; done
""",
    )
    run = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "-q"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = hpcflow("status", "--json")
            if status.returncode == 0 and '"running"' in status.stdout and "talk" in status.stdout:
                break
            time.sleep(0.1)
        follow = hpcflow(
            "logs", "--follow", "--stream", "stdout", _latest(hpcflow), "talk", timeout=60
        )
        assert follow.returncode == 0, follow.output
        assert [line for line in follow.stdout.splitlines() if line.startswith("tick")] == [
            "tick 1",
            "tick 2",
            "tick 3",
            "tick 4",
        ]
    finally:
        run.communicate(timeout=60)


def _latest(hpcflow) -> str:
    import json

    return json.loads(hpcflow("status", "--json").stdout)["run_id"]
