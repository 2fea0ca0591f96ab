"""Fault 1 (local): a worker process is SIGKILLed mid-task.

The task is retried on another worker, the run completes, and nothing the killed attempt
wrote survives: its child processes die with it, so no orphan keeps writing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import processes_with, write_workflow

MARKER = "hpcflow-fault-worker-kill"

WF = f"""
name: worker-kill
tasks:
  - name: step
    foreach: {{i: {{range: [0, 4]}}}}
    command: >-
      echo $PPID $(readlink /proc/self/ns/pid) > pids/{{i}};
      echo begin > {{outputs}};
      : {MARKER};
      sleep 3;
      echo end >> {{outputs}}
    outputs: ["out/{{i}}.txt"]
"""


def pid_here(pid: int, namespace: str) -> int | None:
    """This machine's pid of the process that is ``pid`` in PID namespace ``namespace``
    (a task on a node of the test cluster sees its node's namespace, not ours)."""
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            if os.readlink(status.parent / "ns" / "pid") != namespace:
                continue
            for line in status.read_text().splitlines():
                if line.startswith("NSpid:") and line.split()[-1] == str(pid):
                    return int(status.parent.name)
        except OSError:
            continue
    return None


def kill_a_worker_mid_task(workdir: Path, timeout: float = 60) -> None:
    """SIGKILL the worker process of the first task that started (its PID file: the
    worker's pid as the task saw it, and the task's PID namespace)."""
    deadline = time.monotonic() + timeout
    victim = None
    while time.monotonic() < deadline and victim is None:
        for pid_file in (workdir / "pids").iterdir():
            fields = pid_file.read_text().split()
            if len(fields) == 2:
                victim = pid_here(int(fields[0]), fields[1])
                break
            if len(fields) == 1:  # a Python task of a local run: our own pid
                victim = int(fields[0])
                break
        time.sleep(0.05)
    assert victim is not None, "no task started"
    time.sleep(0.5)  # mid-task
    os.kill(victim, signal.SIGKILL)


def outputs_are_the_retries_only(workdir: Path) -> None:
    """Every output was written once, by a whole attempt, and nothing writes on."""
    for i in range(4):
        assert (workdir / "out" / f"{i}.txt").read_text() == "begin\nend\n"
    time.sleep(3.5)  # longer than the killed attempt would have run on
    for i in range(4):
        assert (workdir / "out" / f"{i}.txt").read_text() == "begin\nend\n"
    assert processes_with(MARKER) == []


def test_killed_worker_task_is_rerun_and_its_output_not_trusted(tmp_path, env):
    (tmp_path / "pids").mkdir()
    wf = write_workflow(tmp_path, WF)
    run = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "-q", "--workers", "2",
         "--threads", "1"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    kill_a_worker_mid_task(tmp_path)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0, out + err
    outputs_are_the_retries_only(tmp_path)


PY_MODULE = """
import os, time
from pathlib import Path

def step(i):
    Path(f"pids/{i}").write_text(str(os.getpid()))
    Path(f"out/{i}.txt").write_text("begin\\n")
    time.sleep(3)
    with open(f"out/{i}.txt", "a") as handle:
        handle.write("end\\n")
    return i
"""

PY_WF = """
name: python-worker-kill
tasks:
  - name: step
    foreach: {i: {range: [0, 4]}}
    python: stepmod:step
    outputs: ["out/{i}.txt"]
"""


def test_killed_python_worker_of_the_pool_engine_is_replaced_and_its_task_rerun(tmp_path, env):
    """The default (pool) engine: a Python task's worker process gets SIGKILL mid-task;
    the chunk runs again on a fresh worker and the run succeeds."""
    (tmp_path / "pids").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "stepmod.py").write_text(PY_MODULE)
    wf = write_workflow(tmp_path, PY_WF)
    run = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "-q", "--threads", "2"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    kill_a_worker_mid_task(tmp_path)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0, out + err
    for i in range(4):
        assert (tmp_path / "out" / f"{i}.txt").read_text() == "begin\nend\n"
    (run_dir,) = (tmp_path / ".hpcflow" / "runs").iterdir()
    assert "died running" in (run_dir / "driver.log").read_text()
