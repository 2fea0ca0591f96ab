"""A run that follows its allocations (pilot, jobs, elastic) records its end in
``state.sqlite``; when the disk is full that write fails too. The run's own error must
still be what the user sees, and a full disk met by the end's write a clear error, never
a SQLite traceback. (Fault injection: the state database's writes fail as on a full disk.)"""

from __future__ import annotations

import sqlite3

import pytest

from hpcflow.engine.lifecycle import RunLife
from hpcflow.engine.prepare import RunOptions, prepare
from hpcflow.errors import RunError
from tests.conftest import write_workflow


def _full(*args, **kwargs):
    raise sqlite3.OperationalError("database or disk is full")


@pytest.fixture
def life(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))
    wf = write_workflow(tmp_path, "name: one\ntasks:\n  - name: a\n    command: 'true'\n")
    options = RunOptions()
    with RunLife(prepare(wf, options), options) as run:
        run.create()
        yield run


def test_the_runs_own_error_is_raised_when_its_end_cannot_be_written(life, monkeypatch):
    monkeypatch.setattr(life.db, "set_meta", _full)
    monkeypatch.setattr(life.db, "set_states", _full)

    def body():
        raise RunError("the allocation failed: the disk is full")

    with pytest.raises(RunError, match="the allocation failed"):
        life.follow(body)


@pytest.mark.parametrize("end", ["followed", "all cached"])
def test_a_full_disk_met_by_the_runs_end_is_a_clear_error(life, monkeypatch, end):
    monkeypatch.setattr(life.db, "set_meta", _full)
    with pytest.raises(RunError, match="the disk is full") as info:
        if end == "followed":
            life.follow(lambda: None)  # the run went well; recording its end fails
        else:
            life.all_cached()
    assert "free space" in (info.value.hint or "")


def test_a_full_disk_met_by_the_memos_settled_note_is_a_clear_error(tmp_path, monkeypatch):
    """After a local run that left every task up to date the memo notes it as settled
    (hpcflow.modes.settled.settle): a full disk there is a clear error too."""
    from hpcflow.engine.lifecycle import RunSummary
    from hpcflow.modes.settled import settle
    from hpcflow.store import statedb as st

    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))
    wf = write_workflow(tmp_path, "name: one\ntasks:\n  - name: a\n    command: 'true'\n")
    options = RunOptions()
    prepared = prepare(wf, options)
    with RunLife(prepared, options) as run:
        run.create()
        summary = RunSummary(run.run_id, run.paths, {st.SUCCEEDED: 1})
        monkeypatch.setattr(prepared.memo, "settle", _full)
        with pytest.raises(RunError, match="the disk is full") as info:
            settle(prepared, run.paths.run_dir, summary)
    assert "free space" in (info.value.hint or "")
