"""`hpcflow status --watch` follows a live run from another shell until it ends."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

from tests.conftest import write_workflow

WF = """
name: watched
tasks:
  - name: hold
    command: >-
      for i in $(seq 300); do [ -e release ] && break; sleep 0.1; done; echo held
  - name: after
    needs: [hold]
    command: echo after
"""


def _start(tmp_path, env):
    wf = write_workflow(tmp_path, WF)
    run = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "-q"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        probe = subprocess.run(
            [sys.executable, "-m", "hpcflow.cli.main", "status", "--json"],
            cwd=tmp_path, env=env, capture_output=True, text=True,
        )  # fmt: skip
        if probe.returncode == 0 and json.loads(probe.stdout)["running"]:
            return run, json.loads(probe.stdout)
        time.sleep(0.2)
    run.kill()
    raise AssertionError("the run never showed a running task")


def test_watch_until_the_run_ends(tmp_path, env):
    run, snapshot = _start(tmp_path, env)
    assert snapshot["running"][0]["id"] == "hold"
    # Where it runs is known within a few seconds.
    deadline = time.monotonic() + 20
    shown = None
    while time.monotonic() < deadline:
        shown = subprocess.run(
            [sys.executable, "-m", "hpcflow.cli.main", "status"],
            cwd=tmp_path, env=env, capture_output=True, text=True,
        )  # fmt: skip
        if f"running: hold on {socket.gethostname()}" in shown.stdout:
            break
        time.sleep(0.5)
    assert shown is not None and f"running: hold on {socket.gethostname()}" in shown.stdout
    watch = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "status", "--watch", "--interval", "0.3"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(1.5)
    assert watch.poll() is None  # still watching while the run goes on
    (tmp_path / "release").touch()
    out, err = watch.communicate(timeout=60)
    assert watch.returncode == 0, err
    assert run.wait(timeout=60) == 0
    lines = out.splitlines()
    assert any("running" in line and "1 pending" in line for line in lines), out
    assert "succeeded" in out and "after" in out  # the full view at the end


def test_watch_json_emits_a_line_per_refresh(tmp_path, env):
    run, _ = _start(tmp_path, env)
    watch = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "status", "--json", "--watch",
         "--interval", "0.3"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert watch.stdout is not None
    first = watch.stdout.readline()  # the first record is out: the run is still held
    (tmp_path / "release").touch()
    out, err = watch.communicate(timeout=60)
    assert run.wait(timeout=60) == 0
    records = [json.loads(line) for line in [first, *out.splitlines()]]
    assert len(records) >= 2
    assert records[0]["status"] == "running" and records[-1]["status"] == "succeeded"
