"""Fan-out decided at run time: a task splits its input into files, a sweep over those
files (``after: split``) is planned when it ends; the dry run, the DAG, resume (after a
kill in the middle of the fan-out), failures and an empty split."""

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

from tests.conftest import status_json, write_workflow
from tests.e2e.test_resume import ran

SPLIT = """
name: fanout
tasks:
  - name: split
    inputs: [input.txt]
    command: mkdir -p chunks && split -l {lines} -d input.txt chunks/part_
    outputs: [chunks]
    params: {{lines: 2}}
  - name: count
    foreach:
      from_files: {{glob: "chunks/part_{{n}}", path: chunk, after: split}}
    command: {sleep}mkdir -p counts && wc -l < {{chunk}} > {{outputs}}
    outputs: ["counts/{{n}}.txt"]
  - name: total
    needs: [count]
    command: cat counts/*.txt 2>/dev/null | awk '{{s += $1}} END {{print s + 0}}' > {{outputs}}
    outputs: [total.txt]
  - name: other
    command: echo other > {{outputs}}
    outputs: [other.txt]
"""


def _workflow(tmp_path: Path, lines: int = 9, sleep: str = "") -> Path:
    (tmp_path / "input.txt").write_text("".join(f"line {i}\n" for i in range(lines)))
    return write_workflow(tmp_path, SPLIT.format(lines="{lines}", sleep=sleep))


@pytest.mark.parametrize("engine", ["pool", "dask"])
def test_a_sweep_over_the_files_a_task_made_is_planned_when_it_ends(tmp_path, hpcflow, env, engine):
    wf = _workflow(tmp_path)
    # Before the run: what waits, and why.
    plan = hpcflow("run", str(wf), "--dry-run")
    assert plan.returncode == 0, plan.output
    assert (
        "not planned yet (counts known during the run): count: its instances are known "
        "when split ends; total: waits for count, not planned yet" in plan.stdout
    )
    assert "2 of 2 tasks planned so far would run" in plan.stdout
    assert not (tmp_path / ".hpcflow").exists()
    dag = hpcflow("dag", str(wf)).stdout
    assert "count (not planned yet: its instances are known when split ends)  ← split" in dag

    args = ["--engine", engine] + (["--workers", "2"] if engine == "dask" else [])
    first = hpcflow("run", str(wf), "-q", *args)
    assert first.returncode == 0, first.output
    assert ran(first) == 8  # split, other, count ×5, total
    assert (tmp_path / "total.txt").read_text() == "9\n"
    status = status_json(env, tmp_path)
    assert status["counts"]["count"] == {"succeeded": 5}
    assert status["waiting"] == []
    ids = [task_id for task_id, _ in _tasks(tmp_path)]
    assert ids[:2] == ["split", "other"]  # planned first, numbered first
    assert ids[2:] == [f"count[n=0{k},chunk=chunks/part_0{k}]" for k in range(5)] + ["total"]
    # Planned when the run starts, split being up to date: nothing runs again.
    assert ran(hpcflow("run", str(wf), "-q", *args)) == 0
    # A new input: split runs again, and so does the fan-out below it (now 6 chunks).
    (tmp_path / "input.txt").write_text("".join(f"line {i}\n" for i in range(11)))
    shown = hpcflow("run", str(wf), *args)
    assert ran(shown) == 8  # all but other
    # The summary table has a row for the tasks planned during the run.
    assert re.search(r"^count\s+6\s+0\s+0\s+0\s+0\s+0\s.*\s6$", shown.stdout, re.M), shown.stdout
    assert (tmp_path / "total.txt").read_text() == "11\n"


KILLED = """
name: fanout-killed
tasks:
  - name: split
    inputs: [input.txt]
    command: >-
      echo start split >> {log} && mkdir -p chunks &&
      split -l 2 -d input.txt chunks/part_ && echo end split >> {log}
    outputs: [chunks]
  - name: count
    foreach:
      from_files: {{glob: "chunks/part_{{n}}", path: chunk, after: split}}
    command: >-
      echo start count{{n}} >> {log} && sleep 1 && mkdir -p counts &&
      wc -l < {{chunk}} > {{outputs}} && echo end count{{n}} >> {log}
    outputs: ["counts/{{n}}.txt"]
  - name: total
    needs: [count]
    command: cat counts/*.txt | awk '{{s += $1}} END {{print s + 0}}' > {{outputs}}
    outputs: [total.txt]
"""

#: Slots of the killed run: at most this many attempts can have ended (their side effects
#: written) without the driver having recorded them when it was killed.
SLOTS = 2


def _attempts(log: Path) -> list[tuple[str, str]]:
    """(start|end, task) lines the tasks themselves appended: counted from side effects."""
    if not log.exists():
        return []
    return [tuple(line.split()) for line in log.read_text().splitlines()]  # type: ignore[misc]


def test_a_run_killed_in_the_middle_of_a_fan_out_resumes_it(tmp_path, hpcflow, env):
    log = tmp_path / "attempts.log"
    (tmp_path / "input.txt").write_text("".join(f"line {i}\n" for i in range(16)))
    wf = write_workflow(tmp_path, KILLED.format(log=log))
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "-q",
         "--threads", str(SLOTS)],
        env=env, cwd=tmp_path, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            ended = [task for what, task in _attempts(log) if what == "end"]
            if sum(task.startswith("count") for task in ended) >= SLOTS + 2:
                break
            assert proc.poll() is None, "the run ended before it was killed"
            time.sleep(0.05)
        else:
            pytest.fail(f"fewer than {SLOTS + 2} chunks were counted in 120 s: {_attempts(log)}")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    before = _attempts(log)
    ended = {task for what, task in before if what == "end"}
    assert len([t for t in ended if t.startswith("count")]) < 8, "the kill came too late"

    again = hpcflow("run", str(wf), "-q")
    assert again.returncode == 0, again.output
    rerun = [task for what, task in _attempts(log)[len(before) :] if what == "start"]
    # Split is not run again; of the chunks that had ended, at most the ones in flight at
    # the kill (their end not yet recorded by the driver) run again.
    assert "split" not in rerun
    ended_again = [task for task in rerun if task in ended]
    assert len(ended_again) <= SLOTS, (ended_again, before)
    # Every chunk that had not ended runs (once) in the re-run.
    not_ended = {f"count0{k}" for k in range(8)} - ended
    assert not_ended <= set(rerun), (not_ended, rerun)
    assert len(rerun) == len(set(rerun)), rerun
    for k in range(8):
        assert (tmp_path / "counts" / f"0{k}.txt").read_text() == "2\n"
    assert (tmp_path / "total.txt").read_text() == "16\n"


def test_a_failed_split_leaves_its_fan_out_unplanned(tmp_path, hpcflow, env):
    wf = _workflow(tmp_path)
    (tmp_path / "input.txt").unlink()
    (tmp_path / "input.txt").mkdir()  # split cannot read it
    failed = hpcflow("run", str(wf), "-q")
    assert failed.returncode == 1
    status = status_json(env, tmp_path)
    assert status["counts"] == {"split": {"failed": 1}, "other": {"succeeded": 1}}
    assert status["waiting"] == ["count", "total"]
    assert "never planned: count (its instances are known when split ends)" in failed.stderr
    log = next((tmp_path / ".hpcflow" / "runs").iterdir()) / "driver.log"
    assert "never planned: count" in log.read_text()


def test_a_split_that_makes_no_files_plans_no_instances(tmp_path, hpcflow, env):
    wf = _workflow(tmp_path, lines=0)
    done = hpcflow("run", str(wf), "-q")
    assert done.returncode == 0, done.output
    assert not (tmp_path / "counts").exists()
    assert (tmp_path / "total.txt").read_text() == "0\n"
    status = status_json(env, tmp_path)
    assert "count" not in status["counts"]
    assert status["counts"]["total"] == {"succeeded": 1}


def test_mistakes_in_a_sweep_after_a_task(tmp_path, hpcflow):
    wf = write_workflow(
        tmp_path,
        """
name: bad
tasks:
  - name: split
    command: "true"
  - name: a
    foreach: {from_files: {glob: "x/{n}", after: splitt}}
    command: echo {n}
  - name: b
    foreach: {from_table: {path: t.csv, after: split}}
    command: echo {k}
  - name: c
    foreach: {from_files: {glob: "x/{n}", after: c}}
    command: echo {m}
""",
    )
    result = hpcflow("validate", str(wf))
    assert result.returncode == 2
    lines = result.stderr
    assert (
        "7:50: tasks[1].foreach.from_files.after: reads files after unknown task 'splitt'" in lines
    )
    assert "did you mean 'split'?" in lines
    assert (
        "10:27: tasks[2].foreach.from_table: a table read after a task must name its columns"
        in lines
    )
    assert (
        "13:50: tasks[3].foreach.from_files.after: a task cannot sweep over files it makes" in lines
    )
    assert "14:14: tasks[3].command: undefined placeholder {m}" in lines
    assert "Traceback" not in lines


def _tasks(folder: Path) -> list[tuple[str, str]]:
    """(id, state) of each task of the folder's latest run, in the run's numbering."""
    runs_dir = folder / ".hpcflow" / "runs"
    runs = [p for p in runs_dir.glob("*/run.json")] if runs_dir.is_dir() else []
    started = {}
    for info in runs:
        try:
            started[info.parent] = json.loads(info.read_text())["started"]
        except (OSError, ValueError, KeyError):  # being written
            continue
    if not started:
        return []
    # The latest by its start (two runs of one second have ids in random order).
    latest = max(started, key=lambda run: started[run])
    if not (latest / "state.sqlite").exists():
        return []
    db = sqlite3.connect(f"file:{latest / 'state.sqlite'}?mode=ro", uri=True, timeout=5)
    try:
        return list(db.execute("SELECT id, state FROM tasks ORDER BY idx"))
    except sqlite3.OperationalError:  # the run is creating it
        return []
    finally:
        db.close()
