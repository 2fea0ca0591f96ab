"""The Python API end to end: a notebook-style script that builds, runs and reads back a
workflow, run as a real user script; a run read back in this process (states, tasks,
logs, results as objects, failures, waiting for a run another process drives); and
every example of docs/python-api.md, run as one script."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import hpcflow
from hpcflow.api import Run, RunStatus, TaskState, Workflow, open_run, runs
from hpcflow.errors import RunError, SpecError
from hpcflow.store.process import ProcessIdentity
from hpcflow.store.statedb import StateDB
from tests.conftest import REPO, status_json

STEPS = '''\
"""The analysis: functions the workflow's python tasks call."""

import numpy as np


def simulate(seed, size):
    print(f"simulating seed {seed}")
    return np.random.default_rng(seed).standard_normal(size)


def summarize(traces, greeting):
    return {"n": len(traces), "means": [float(t.mean()) for t in traces], "greeting": greeting}
'''

NOTEBOOK = """\
# A notebook, as a script: cells one after the other, no main guard.
from pathlib import Path

import numpy as np

from hpcflow.api import RunStatus, TaskState, Workflow, open_run

import steps

HERE = Path(__file__).parent

# -- build -------------------------------------------------------------------------------
wf = Workflow("notebook", folder=HERE, defaults={"retries": 1})
hello = wf.task("hello", command="echo hello from {who} > {outputs}; echo note >&2",
                params={"who": "bash"}, outputs=["hello.txt"])
sims = wf.task("simulate", python=steps.simulate, foreach={"seed": range(3)},
               params={"size": 1000}, needs=[hello])
summary = wf.task("summary", python=steps.summarize, from_={"traces": sims},
                  params={"greeting": "hi"})
wf.validate()
print("planned", [t.id for t in wf.plan().tasks])

# -- run ---------------------------------------------------------------------------------
seen = []
run = wf.run(observer=seen.append)
assert run.ok and run.status == RunStatus.SUCCEEDED, (run.status, run.error)
assert seen and sum(seen[-1]["simulate"].values()) == 3, seen

# -- read back ---------------------------------------------------------------------------
states = run.states()
assert states == {"hello": TaskState.SUCCEEDED, **{f"simulate[seed={s}]": TaskState.SUCCEEDED
                  for s in range(3)}, "summary": TaskState.SUCCEEDED}, states
assert (HERE / "hello.txt").read_text() == "hello from bash\\n"
assert run.log("hello", "stderr") == "note\\n" and run.log("hello") == ""
assert run.log("simulate[seed=2]") == "simulating seed 2\\n"
traces = run.results("simulate")
assert list(traces) == ["simulate[seed=0]", "simulate[seed=1]", "simulate[seed=2]"]
assert all(isinstance(t, np.ndarray) and t.shape == (1000,) for t in traces.values())
assert np.array_equal(traces["simulate[seed=1]"], steps.simulate(1, 1000))
result = run.result("summary")
assert result["n"] == 3 and result["greeting"] == "hi"
assert result["means"] == [float(t.mean()) for t in traces.values()]
rows = run.tasks("simulate")
assert [r.attempts for r in rows] == [1, 1, 1] and all(r.elapsed is not None for r in rows)
assert open_run(run.id) == run
print("first run", run.id)

# -- again: everything is up to date -----------------------------------------------------
again = wf.run()
assert again.ok and again.id != run.id
assert set(again.states().values()) == {TaskState.CACHED}, again.states()
assert again.result("summary") == result  # read from the run that made it
assert again.results("simulate").keys() == traces.keys()
assert wf.runs() == [run, again]
print("second run", again.id, "all up to date")
"""


def _run_script(script: Path, env: dict) -> subprocess.CompletedProcess[str]:
    """``python SCRIPT`` as a user runs it, from its folder; it must succeed."""
    result = subprocess.run(
        [sys.executable, str(script)], cwd=script.parent, env=env, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_a_notebook_style_script_builds_runs_and_reads_back(tmp_path: Path, env: dict) -> None:
    (tmp_path / "steps.py").write_text(STEPS)
    script = tmp_path / "notebook.py"
    script.write_text(NOTEBOOK)
    result = _run_script(script, env)
    assert "second run" in result.stdout and "all up to date" in result.stdout
    written = tmp_path / "notebook.workflow.yaml"
    assert written.read_text().startswith("# Written by hpcflow's Python API")
    assert "python: steps:simulate" in written.read_text()
    # The command line sees the API's runs: they are ordinary runs of that file.
    status = status_json(env, tmp_path)
    assert status["status"] == "succeeded"
    assert status["counts"] == {"hello": {"cached": 1}, "simulate": {"cached": 3},
                                "summary": {"cached": 1}}  # fmt: skip
    assert status["workflow"] == str(written)


GUARDED = """\
from pathlib import Path

from hpcflow.api import Workflow


def double(x):
    return 2 * x


def total(values):
    return sum(values)


if __name__ == "__main__":
    wf = Workflow("guarded", folder=Path(__file__).parent)
    doubled = wf.task("double", python=double, foreach={"x": [1, 2, 3]})
    wf.task("total", python=total, from_={"values": doubled})
    print(wf["double"].spec["python"])
    run = wf.run()
    print(run.status, run.result("total"))
"""


def test_a_scripts_own_functions_run_as_its_module(tmp_path: Path, env: dict) -> None:
    script = tmp_path / "analysis.py"
    script.write_text(GUARDED)
    result = _run_script(script, env)
    assert result.stdout.splitlines() == ["analysis:double", "succeeded 12"]


@pytest.fixture
def home(env: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's runs are listed in the test's own HPCFLOW_HOME."""
    monkeypatch.setenv("HPCFLOW_HOME", env["HPCFLOW_HOME"])


def _module(folder: Path) -> None:
    (folder / "values.py").write_text(
        textwrap.dedent(
            """\
            import numpy as np

            def make(i):
                return np.full(4, i)

            def pair(i, a, b):
                return (int(a.sum()), b)

            def broken():
                raise ValueError("no good")
            """
        )
    )


@pytest.mark.usefixtures("home")
def test_a_run_read_back_in_process(tmp_path: Path) -> None:
    _module(tmp_path)
    wf = Workflow("inproc", folder=tmp_path)
    made = wf.task("make", python="values:make", foreach={"i": [1, 2]})
    wf.task(
        "pair", python="values:pair", foreach={"i": [1, 2]}, from_={"a": made}, params={"b": "x"}
    )
    wf.task("shell", command="echo out; echo err >&2")
    plan = wf.plan()
    assert plan.to_run == ["make[i=1]", "make[i=2]", "pair[i=1]", "pair[i=2]", "shell"]
    counts: list[dict] = []
    run = wf.run(observer=counts.append)
    assert isinstance(run, Run) and run.ok and run.status is RunStatus.SUCCEEDED
    assert run.run_dir.parent == tmp_path / ".hpcflow" / "runs" and run.workflow == wf.file
    assert counts[-1] == run.counts() == {
        "make": {"succeeded": 2}, "pair": {"succeeded": 2}, "shell": {"succeeded": 1}
    }  # fmt: skip
    assert run.log("shell") == "out\n" and run.log("shell", "stderr") == "err\n"
    assert np.array_equal(run.results("make")["make[i=2]"], np.full(4, 2))
    assert run.result("pair[i=2]") == [8, "x"]  # JSON: a tuple reads back as a list
    info = run.task("shell")
    assert info.state is TaskState.SUCCEEDED and info.exit_code == 0 and info.node
    assert info.elapsed is not None and info.elapsed >= 0
    assert run.wait(timeout=1) is run  # ended: at once
    assert list(run.follow()) == [run.counts()]
    assert "5 of 5 tasks to run" in run.driver_log()
    # Found again by id, by prefix, by directory, as the latest of its folder.
    assert open_run(run.id) == open_run(run.id[:18]) == open_run(run.run_dir) == run
    assert open_run(folder=tmp_path) == run
    assert runs(tmp_path) == [run] == wf.runs()
    assert hpcflow.open_run(run.id) == run
    assert wf.plan().to_run == []
    with pytest.raises(RunError, match="no task 'nope'"):
        run.log("nope")


@pytest.mark.usefixtures("home")
def test_a_failed_run_read_back(tmp_path: Path) -> None:
    _module(tmp_path)
    wf = Workflow("failing", folder=tmp_path)
    broken = wf.task("broken", python="values:broken", retries=1)
    wf.task("after", command="true", needs=[broken])
    run = wf.run()
    assert not run.ok and run.status is RunStatus.FAILED
    assert run.states() == {"broken": TaskState.FAILED, "after": TaskState.SKIPPED}
    assert run.task("broken").attempts == 2
    assert "ValueError: no good" in run.log("broken", "stderr")
    assert "ValueError: no good" in run.log("broken", "stderr", attempt=1)
    with pytest.raises(RunError, match="no successful attempt of 'broken'"):
        run.result("broken")
    # A workflow that is not valid is refused before anything is written or run.
    wf.task("bad", command="echo {nothing}")
    before = wf.file.read_text()
    with pytest.raises(SpecError, match=r"test_api\.py:\d+: tasks\[2\]\.command: undefined"):
        wf.run()
    assert wf.file.read_text() == before and len(wf.runs()) == 1


@pytest.mark.usefixtures("home")
def test_wait_follows_a_run_another_process_drives(tmp_path: Path) -> None:
    wf = Workflow("waited", folder=tmp_path)
    wf.task("a", command="true")
    run = wf.run()
    # As a detached run looks: its driver (here: this process) has not ended it yet.
    with StateDB(run.paths.state_db) as db:
        db.set_meta(status=RunStatus.RUNNING, driver=ProcessIdentity.current().to_meta())
    assert run.status is RunStatus.RUNNING and not run.ended
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="still running after 0.5 s"):
        run.wait(timeout=0.5)
    assert 0.4 < time.monotonic() - started < 3

    def end_it() -> None:
        time.sleep(0.5)
        with StateDB(run.paths.state_db) as db:
            db.set_meta(status=RunStatus.SUCCEEDED)

    ender = threading.Thread(target=end_it)
    ender.start()
    assert run.wait(timeout=30) is run and run.ok
    ender.join()


# -- docs/python-api.md -------------------------------------------------------------------

DOC = REPO / "docs" / "python-api.md"


def _doc_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_python_api_page_runs(tmp_path: Path, env: dict) -> None:
    found = _doc_blocks()
    module, *rest = found
    assert module.startswith("# steps.py\n")
    (tmp_path / "steps.py").write_text(module)
    run = [b for b in rest if "not run by the tests" not in b.splitlines()[0]]
    assert len(run) == len(rest) - 1 >= 8
    script = tmp_path / "session.py"
    script.write_text("\n".join(run))
    result = _run_script(script, env)
    out = result.stdout
    assert (
        "- name: simulate\n  python: steps:simulate\n  foreach:\n    seed:\n      range: [0, 4]"
        in out
    )
    assert "tasks[0].command: undefined placeholder {nothing}" in out
    assert "tasks[1].needs[0]: needs unknown task 'c'" in out
    assert "simulating seed 2" in out
    assert "['simulate[seed=1]', 'summary']" in out
    assert "['report', 'qc_a.check', 'qc_b.check']" in out
