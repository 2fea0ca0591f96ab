"""Python tasks that receive upstream return values (``from:``), on each local engine:
a chain of arrays checked bit for bit, a sweep gathered into a reduce, paired sweeps,
a task run as a child process (it has a timeout), and resume: after a re-run of the
consumer only, after the producers' values are gone, and after SIGKILL of the driver."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import hpcflow as hpcflow_api
from tests.conftest import write_workflow

STEPS = """
import hashlib, os, socket, time
import numpy as np

def _count(name):
    with open("executions.txt", "a") as f:
        f.write(name + "\\n")
    with open("hosts.txt", "a") as f:   # where each execution ran, as the task saw it
        f.write(name + " " + socket.gethostname() + "\\n")

def make(i):
    _count(f"make[i={i}]")
    return np.random.default_rng(i).standard_normal((64, 1024))   # 512 KiB

def _pause():
    try:
        with open("square_sleep") as f:   # seconds; a test writes it to slow squares down
            return float(f.read())
    except OSError:
        return 0.0

def square(i, x):
    _count(f"square[i={i}]")
    pause = _pause()
    time.sleep(pause * (i + 1))   # one after the other: a kill finds some not ended
    if i > 0 and os.path.exists("square_hold"):   # held until the test releases them
        while not os.path.exists("square_release"):
            time.sleep(0.1)
    y = x * x
    if pause:
        _count(f"end square[i={i}]")
    return y

def total(squares, by_i, label):
    _count("total")
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(s).tobytes() for s in squares))
    return {
        "sha256": digest.hexdigest(),
        "keys": sorted(by_i),
        "means": [float(by_i[k].mean()) for k in sorted(by_i)],
        "label": label,
    }

def label():
    _count("label")
    return "squares"
"""

WF = """
name: values
tasks:
  - name: label
    python: steps:label
  - name: make
    foreach: {i: [0, 1, 2, 3]}
    python: steps:make
  - name: square
    foreach: {i: [0, 1, 2, 3]}
    python: steps:square
    from: {x: make}
  - name: total
    python: steps:total
    timeout: 120   # run as a child process: the values reach it through its arguments
    from:
      squares: square
      by_i: {task: make, as: dict}
      label: label
"""


def expected() -> dict:
    arrays = [np.random.default_rng(i).standard_normal((64, 1024)) for i in range(4)]
    digest = hashlib.sha256(b"".join((a * a).tobytes() for a in arrays))
    return {
        "sha256": digest.hexdigest(),
        "keys": [0, 1, 2, 3],
        "means": [float(a.mean()) for a in arrays],
        "label": "squares",
    }


def setup(tmp_path: Path) -> Path:
    (tmp_path / "steps.py").write_text(textwrap.dedent(STEPS))
    return write_workflow(tmp_path, WF)


def executions_so_far(tmp_path: Path) -> Counter[str]:
    """What the tasks have written to ``executions.txt`` up to now (left in place)."""
    path = tmp_path / "executions.txt"
    counts = Counter(path.read_text().split("\n")) if path.exists() else Counter()
    counts.pop("", None)
    return counts


def executions(tmp_path: Path) -> Counter[str]:
    """What the tasks have written to ``executions.txt``; the file starts afresh."""
    counts = executions_so_far(tmp_path)
    (tmp_path / "executions.txt").unlink(missing_ok=True)
    return counts


def total_result(tmp_path: Path) -> dict:
    run = sorted((tmp_path / ".hpcflow" / "runs").iterdir())[-1]
    found = list((run / "tasks").glob("total/*.result.json"))
    assert len(found) == 1, "\n".join(
        [*sorted(str(p.relative_to(run)) for p in run.rglob("*")), (run / "driver.log").read_text()]
    )
    return json.loads(found[0].read_text())


def values_table(html: str) -> list[tuple[str, ...]]:
    """The rows of the report's table of values: task, type, made, received, moved."""
    table = html[html.index('<table id="values">') :]
    table = table[: table.index("</table>")]
    return [
        tuple(re.findall(r"<td[^>]*>(.*?)</td>", row))
        for row in re.findall(r"<tr><td>.*?</tr>", table)
    ]


ENGINES = [
    pytest.param(("--engine", "pool"), id="pool"),
    pytest.param(("--engine", "dask"), id="dask"),
]
ALL = Counter(["label", "total", *(f"{t}[i={i}]" for t in ("make", "square") for i in range(4))])


@pytest.mark.parametrize("engine", ENGINES)
def test_values_flow_and_resume(tmp_path, hpcflow, engine):
    wf = setup(tmp_path)
    first = hpcflow("run", str(wf), "-q", *engine, cwd=tmp_path)
    assert first.returncode == 0, first.output
    assert total_result(tmp_path) == expected()
    assert executions(tmp_path) == ALL
    page = tmp_path / "report.html"
    assert hpcflow("report", "-o", str(page), cwd=tmp_path).returncode == 0
    rows = dict((r[0], r[1:]) for r in values_table(page.read_text()))
    assert rows["make"] == ("numpy.ndarray", "2.0 MiB", "", "0")  # 4 x 512 KiB made
    assert rows["square"] == ("numpy.ndarray", "2.0 MiB", "2.0 MiB", "0")
    assert rows["label"][0] == "str"
    assert rows["total"][0] == "?" and rows["total"][2] == "4.0 MiB"  # a child process

    # The consumer alone runs again: every value it receives comes from the first run.
    again = hpcflow("run", str(wf), "-q", "--rerun", "total", *engine, cwd=tmp_path)
    assert again.returncode == 0, again.output
    assert "1 ran, 9 up to date" in again.stdout, again.output
    assert executions(tmp_path) == Counter(["total"])
    assert total_result(tmp_path) == expected()
    # Results read back: from this run, or (up to date here) from the run that made it.
    latest = sorted((tmp_path / ".hpcflow" / "runs").iterdir())[-1]
    made = hpcflow_api.load_result(latest, "make[i=2]")
    assert np.array_equal(made, np.random.default_rng(2).standard_normal((64, 1024)))
    shown = hpcflow("result", str(latest), "total", cwd=tmp_path)
    assert shown.returncode == 0 and json.loads(shown.stdout) == expected(), shown.output
    saved = hpcflow("result", str(latest), "square[i=1]", "-o", str(tmp_path / "sq.pickle"))
    assert saved.returncode == 0 and "a pickle" in saved.stdout, saved.output
    assert "numpy.ndarray" in hpcflow("result", str(latest), "make[i=0]").stdout
    missing = hpcflow("result", str(latest), "make[i=9]")
    assert missing.returncode == 2 and "no task 'make[i=9]'" in missing.stderr
    assert "Traceback" not in missing.stderr

    # The values are gone (the runs were deleted): the producers run again for it.
    for run in (tmp_path / ".hpcflow" / "runs").iterdir():
        for value in run.glob("tasks/make*/value.pickle"):
            value.unlink()
    third = hpcflow("run", str(wf), "-q", "--rerun", "total", *engine, cwd=tmp_path)
    assert third.returncode == 0, third.output
    assert executions(tmp_path) == ALL - Counter(["label"])  # label's value is still there
    assert total_result(tmp_path) == expected()


def _succeeded(run_dir: Path, prefix: str) -> int:
    db = run_dir / "state.sqlite"
    if not db.exists():
        return 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        rows = conn.execute(
            "SELECT COUNT(*) FROM tasks WHERE state = 'succeeded' AND id LIKE ?", (prefix + "%",)
        ).fetchall()
        return int(rows[0][0])
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_killed_run_resumes_with_the_values_it_made(tmp_path, env, hpcflow, engine):
    wf = setup(tmp_path)
    (tmp_path / "square_sleep").write_text("1.5")
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "-q", "--threads", "1",
         *engine],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        run_dir = None
        while time.monotonic() < deadline:
            runs = list((tmp_path / ".hpcflow" / "runs").glob("*"))
            run_dir = runs[0] if runs else None
            if run_dir is not None and _succeeded(run_dir, "square") >= 1:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("no square task finished")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    before = executions(tmp_path)
    assert before["total"] == 0 and all(before[f"make[i={i}]"] == 1 for i in range(4)), before
    ended = {k.removeprefix("end ") for k in before if k.startswith("end ")}
    assert ended, before
    (tmp_path / "square_sleep").unlink()
    resumed = hpcflow("run", str(wf), "-q", *engine, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.output
    after = executions(tmp_path)
    # Exactly the squares that had not ended run again, once; nothing else but the
    # reduce does: the makes' values come from the killed run's folder.
    squares = {f"square[i={i}]" for i in range(4)}
    assert after == Counter(["total", *(squares - ended)]), (after, ended)
    assert total_result(tmp_path) == expected()


def test_values_kept_in_memory_only_are_made_again_when_needed(tmp_path, hpcflow):
    wf = setup(tmp_path)
    wf.write_text(
        wf.read_text().replace("python: steps:make\n", "python: steps:make\n    persist: false\n")
    )
    first = hpcflow("run", str(wf), "-q", "--engine", "dask", cwd=tmp_path)
    assert first.returncode == 0, first.output
    assert total_result(tmp_path) == expected()  # the makes' values came through memory
    run = sorted((tmp_path / ".hpcflow" / "runs").iterdir())[-1]
    assert list(run.glob("tasks/make*/value.pickle")) == []
    assert len(list(run.glob("tasks/square*/value.pickle"))) == 4
    executions(tmp_path)
    plan = hpcflow("run", str(wf), "--dry-run", "--rerun", "total", cwd=tmp_path)
    assert "4 up-to-date task(s) run again" in plan.stdout, plan.output
    assert "make[i=0], make[i=1], make[i=2], make[i=3]" in plan.stdout
    again = hpcflow("run", str(wf), "-q", "--engine", "dask", "--rerun", "total", cwd=tmp_path)
    assert again.returncode == 0, again.output
    assert executions(tmp_path) == ALL - Counter(["label"])
    assert total_result(tmp_path) == expected()
