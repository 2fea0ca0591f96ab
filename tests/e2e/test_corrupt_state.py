"""Damaged state files, through the real CLI: a run's ``state.sqlite`` truncated is that
run's clear error (``hpcflow runs`` lists the others and flags it; ``status`` and
``result`` say what is wrong and what to do), and a workflow's ``memo.sqlite`` filled with
garbage is set aside and rebuilt from the journals: the re-run says so and does not run
again the tasks that had finished (counted from what the tasks append to a file)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tests.conftest import write_workflow

STEPS = """
def make(i):
    with open("side.txt", "a") as f:
        f.write(f"make {i}\\n")
    return i * 10
"""

WORKFLOW = """
name: damaged
tasks:
  - name: make
    foreach: {i: {range: [0, 2]}}
    python: steps:make
"""


def _run_dirs(tmp_path: Path) -> list[Path]:
    """The workflow's run folders, oldest first: by the start each run.json records (two
    runs started in one second have ids that sort at random)."""
    folders = (tmp_path / ".hpcflow" / "runs").iterdir()
    return sorted(folders, key=lambda d: json.loads((d / "run.json").read_text())["started"])


def _truncate(path: Path) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.truncate(size // 2)


def test_a_truncated_run_state_is_that_runs_error_and_the_others_still_list(tmp_path, env, hpcflow):
    (tmp_path / "steps.py").write_text(STEPS)
    wf = write_workflow(tmp_path, WORKFLOW)
    assert hpcflow("run", str(wf), "-q", cwd=tmp_path).returncode == 0
    assert hpcflow("run", str(wf), "-q", cwd=tmp_path).returncode == 0  # up to date: made in run 1
    first, second = _run_dirs(tmp_path)
    _truncate(first / "state.sqlite")

    listed = hpcflow("runs", cwd=tmp_path)
    assert listed.returncode == 0, listed.output
    rows = {line.split()[0]: line.split()[3] for line in listed.stdout.splitlines()[1:]}
    assert rows == {first.name: "damaged", second.name: "succeeded"}
    assert str(first / "state.sqlite") in listed.stderr and "hint:" in listed.stderr

    shown = hpcflow("status", first.name, cwd=tmp_path)
    assert shown.returncode == 2
    assert f"the state of run {first.name} is damaged" in shown.stderr
    assert "hint:" in shown.stderr and "Traceback" not in shown.output
    assert hpcflow("status", second.name, cwd=tmp_path).returncode == 0

    # Run 2's value is run 1's: the search for it meets the damaged run.
    searched = hpcflow("result", second.name, "make[i=1]", cwd=tmp_path)
    assert searched.returncode == 2
    assert "is damaged" in searched.stderr and "Traceback" not in searched.output

    again = hpcflow("run", str(wf), "-q", cwd=tmp_path)
    assert again.returncode == 0, again.output
    assert "Traceback" not in again.output


def test_a_damaged_memo_is_set_aside_and_rebuilt_from_the_journals(tmp_path, env, hpcflow):
    """The driver is killed while one task still runs (the others' successes are only
    sure to be in the journals), the memo is then overwritten with garbage: the re-run
    sets it aside, brings the journaled successes in and runs only the unfinished task."""
    wf = write_workflow(
        tmp_path,
        """
name: memo
tasks:
  - name: quick
    foreach: {i: {range: [0, 3]}}
    command: echo quick {i} >> side.txt; echo {i} > {outputs}
    outputs: ["out/{i}.txt"]
  - name: slow
    command: >-
      echo slow start >> side.txt;
      while [ ! -e release ]; do sleep 0.1; done; echo slow > {outputs}
    outputs: [slow.txt]
""",
    )
    journal = tmp_path / ".hpcflow" / "journal"
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "-q", "--threads", "2"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            lines = sum(p.read_text().count("\n") for p in journal.rglob("*.jsonl") if p.is_file())
            if lines >= 3 and "slow start" in _side(tmp_path):
                break
            time.sleep(0.05)
        else:
            raise AssertionError("waiting for 3 journaled quick tasks and slow started")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    memo = tmp_path / ".hpcflow" / "memo.sqlite"
    memo.write_bytes(os.urandom(8192))

    (tmp_path / "release").touch()
    again = hpcflow("run", str(wf), "-q", cwd=tmp_path)
    assert again.returncode == 0, again.output
    assert "Traceback" not in again.output
    assert "memo.sqlite was damaged" in again.stderr and "set aside as" in again.stderr
    (aside,) = memo.parent.glob("memo.sqlite.damaged-*")
    assert aside.stat().st_size == 8192  # kept as it was
    ran = Counter(_side(tmp_path).splitlines())
    assert ran == {"quick 0": 1, "quick 1": 1, "quick 2": 1, "slow start": 2}

    third = hpcflow("run", str(wf), "-q", cwd=tmp_path)  # the new memo holds every task
    assert third.returncode == 0, third.output
    assert "damaged" not in third.stderr
    assert Counter(_side(tmp_path).splitlines()) == ran


def _side(tmp_path: Path) -> str:
    try:
        return (tmp_path / "side.txt").read_text()
    except FileNotFoundError:
        return ""


#: A writer of a run's state that stops in the middle of a commit: it changes the run's
#: status, writes enough to spill pages to the file, says so, and waits to be killed.
CUT_WRITER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA cache_size=1")
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE meta SET value = '\\"torn\\"' WHERE key = 'status'")
conn.execute("CREATE TABLE filler(x)")
conn.executemany("INSERT INTO filler VALUES (?)", [("y" * 1000,) for _ in range(3000)])
print("mid-commit", flush=True)
time.sleep(120)
"""


def test_a_run_whose_writer_was_killed_mid_commit_reads_as_its_last_commit(tmp_path, env, hpcflow):
    """A driver SIGKILLed in the middle of a commit leaves SQLite's journal behind, which a
    read-only reader cannot roll back ("attempt to write a readonly database": `hpcflow
    runs` and `status` were tracebacks until the next `hpcflow run`). The reader now rolls
    it back as the next writer would, says so, and shows the run as it last committed."""
    (tmp_path / "steps.py").write_text(STEPS)
    wf = write_workflow(tmp_path, WORKFLOW)
    assert hpcflow("run", str(wf), "-q", cwd=tmp_path).returncode == 0
    (run,) = _run_dirs(tmp_path)
    state = run / "state.sqlite"
    writer = subprocess.Popen(
        [sys.executable, "-c", CUT_WRITER, str(state)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "mid-commit"
    finally:
        writer.kill()
        writer.wait()
    assert Path(f"{state}-journal").exists(), "the killed writer left no journal"

    shown = hpcflow("status", run.name, cwd=tmp_path)
    assert shown.returncode == 0, shown.output
    assert "Traceback" not in shown.output
    assert "stopped in the middle of a commit" in shown.stderr, shown.stderr
    assert "succeeded" in shown.stdout and "torn" not in shown.stdout, shown.stdout
    assert not Path(f"{state}-journal").exists()
    listed = hpcflow("runs", cwd=tmp_path)
    assert listed.returncode == 0 and "succeeded" in listed.stdout, listed.output
