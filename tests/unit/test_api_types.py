"""The Python API is typed for its users: a script using it passes ``mypy --strict``, and
mypy catches a misspelt keyword, a resource key or a mode that does not exist."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

USER_SCRIPT = """\
from datetime import timedelta
from pathlib import Path

import hpcflow
from hpcflow.api import Counts, Plan, Run, Task, TaskInfo, TaskState, Workflow, open_run, runs


def square(i: int) -> int:
    return i * i


def total(values: list[int]) -> int:
    return sum(values)


def build(folder: Path) -> Workflow:
    wf = Workflow("typed", folder=folder, defaults={"resources": {"cpus": 1}, "retries": 1})
    hello: Task = wf.task("hello", command="echo hi > {outputs}", outputs=["hi.txt"])
    squares = wf.task(
        "square",
        python=square,
        foreach={"i": range(3)},
        needs=[hello],
        resources={"cpus": 2, "memory": "1GB", "walltime": timedelta(minutes=5)},
        checkpoint={"before": "5m"},
        container={"image": "img.sif", "binds": ["/data"]},
    )
    wf.task("total", python=total, from_={"values": (squares, "list")}, retries={"attempts": 2})
    qc = wf.include("qc", "qc/workflow.yaml", params={"sample": "a"})
    wf.task("after", argv=["true"], needs=[qc.task("report")])
    return wf


def read(run: Run) -> int:
    states: dict[str, TaskState] = run.states()
    rows: list[TaskInfo] = run.tasks("square")
    values: dict[str, object] = run.results("square")
    counts: Counts = run.counts()
    seconds = sum(row.elapsed or 0.0 for row in rows)
    return len(states) + len(values) + len(counts) + int(seconds) + len(run.log("hello", "stderr"))


def progress(counts: Counts) -> None:
    print(sum(sum(by_state.values()) for by_state in counts.values()))


if __name__ == "__main__":
    wf = build(Path("."))
    plan: Plan = wf.plan("slurm", nodes=2, mode="jobs")
    print(plan.to_run, plan.cost.task_core_hours)
    run = wf.run(observer=progress, engine="pool", workers=2, rerun=["square*"])
    read(run.wait(timeout=10.0))
    read(open_run(run.id))
    for earlier in runs(wf.folder):
        print(earlier.id, earlier.status, earlier.ok)
    same: hpcflow.Workflow = wf
"""

MISTAKES = """\
from hpcflow.api import Workflow

wf = Workflow("typed")
wf.task("a", comand="true")
wf.task("b", command="true", resources={"cpu": 2})
wf.run(mode="bogus")
wf.run().wait(timeout="soon")
"""


def _mypy(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "user_script.py"
    script.write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
         str(script)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip


def test_a_script_using_the_api_passes_mypy_strict(tmp_path: Path) -> None:
    result = _mypy(tmp_path, USER_SCRIPT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout


def test_mypy_catches_mistakes_in_a_script(tmp_path: Path) -> None:
    result = _mypy(tmp_path, MISTAKES)
    assert result.returncode == 1
    out = result.stdout
    assert 'user_script.py:4: error: Unexpected keyword argument "comand"' in out
    assert 'did you mean "command"?' in out
    assert 'user_script.py:5: error: Argument "resources"' in out
    assert 'user_script.py:6: error: Argument "mode"' in out
    assert 'user_script.py:7: error: Argument "timeout" to "wait"' in out
