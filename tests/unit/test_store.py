"""The state store's rules: one writer per file with batched commits, readers that never
write and see the submitting side's verdict, journals folded into the memo, and process
identities that say when a pid is ours."""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import time

import pytest

from hpcflow.store import statedb as st
from hpcflow.store.memo import Memo, remove_journals
from hpcflow.store.paths import RunPaths, StateRoot
from hpcflow.store.process import ProcessIdentity
from hpcflow.store.sqlite import BatchedWriter, SharedReader, connect_writer
from hpcflow.worker.calls import Outcome, TaskCall
from hpcflow.worker.journal import close_journals, journal_file, note_success


def _run(tmp_path, n: int = 3) -> tuple[RunPaths, st.StateDB]:
    paths = RunPaths(tmp_path / "run")
    paths.run_dir.mkdir()
    db = st.StateDB(paths.state_db)
    db.add_tasks((i, f"t{i}", "t", f"t{i}", (), st.PENDING) for i in range(n))
    db.set_meta(run_id="r1", status="running")
    return paths, db


def _reader_states(paths: RunPaths) -> list[str]:
    with st.StateDB(paths.state_db, readonly=True) as reader:
        return [row.state for row in reader.tasks()]


def test_task_changes_wait_for_the_next_commit_and_meta_does_not(tmp_path, monkeypatch):
    monkeypatch.setattr(BatchedWriter, "commit_interval", 3600.0)
    paths, db = _run(tmp_path)
    db.start_attempts([(0, 1)])
    assert _reader_states(paths) == [st.PENDING] * 3  # batched: not committed yet
    db.set_meta(status="running", note="x")  # run-level facts commit at once (and flush)
    assert _reader_states(paths) == [st.RUNNING, st.PENDING, st.PENDING]
    db.set_states([(1, st.SKIPPED)])
    assert db.tasks(idx=1)[0].state == st.SKIPPED  # the writer reads its own writes
    db.close()  # closing commits what waits
    assert _reader_states(paths) == [st.RUNNING, st.SKIPPED, st.PENDING]


def test_batched_writes_commit_once_the_interval_has_passed(tmp_path, monkeypatch):
    monkeypatch.setattr(BatchedWriter, "commit_interval", 0.2)
    paths, db = _run(tmp_path)
    db.start_attempts([(2, 1)])
    db.flush_due()
    assert _reader_states(paths)[2] == st.PENDING
    time.sleep(0.25)
    db.flush_due()
    assert _reader_states(paths)[2] == st.RUNNING
    db.close()


def test_files_use_a_rollback_journal_and_readers_cannot_write(tmp_path):
    paths, db = _run(tmp_path)
    db.close()
    conn = sqlite3.connect(paths.state_db)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()
    before = paths.state_db.stat()
    with st.StateDB(paths.state_db, readonly=True) as reader:
        reader.tasks()
        reader.meta()
        with pytest.raises(sqlite3.OperationalError, match="read-only"):
            reader.set_states([(0, st.FAILED)])
    after = paths.state_db.stat()
    assert (before.st_size, before.st_mtime_ns) == (after.st_size, after.st_mtime_ns)
    # (state.snapshot: the writer's last whole commit, what readers read)
    assert sorted(p.name for p in paths.run_dir.iterdir()) == ["state.snapshot", "state.sqlite"]


def test_allocations_recorded_before_pools_existed_still_read_and_take_pools(tmp_path):
    """A submit.sqlite of an older version (no pool column): readers see its rows with
    no pool, and a continuation's writer adds the column before recording more."""
    paths, db = _run(tmp_path)
    db.close()
    old = sqlite3.connect(paths.submit_db)
    old.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);"
        "CREATE TABLE allocations (native_id TEXT PRIMARY KEY, number INTEGER NOT NULL, "
        "backend TEXT NOT NULL, state TEXT NOT NULL, native_state TEXT, reason TEXT, "
        "submitted REAL NOT NULL, updated REAL, script TEXT NOT NULL, stdout TEXT NOT NULL, "
        "stderr TEXT NOT NULL);"
        "INSERT INTO allocations VALUES ('7', 1, 'slurm', 'completed', NULL, NULL, 1.0, "
        "NULL, 's.sh', 'o', 'e');"
    )
    old.commit()
    old.close()
    with st.StateDB(paths.state_db, readonly=True) as reader:
        assert [(a.native_id, a.pool) for a in reader.allocations()] == [("7", None)]
    with st.SubmitDB(paths.submit_db) as submit:
        row = st.AllocationRow(
            native_id="8",
            number=2,
            backend="slurm",
            state="queued",
            native_state=None,
            reason=None,
            submitted=2.0,
            updated=None,
            script="s2.sh",
            stdout="o2",
            stderr="e2",
            pool="gpu",
        )
        submit.add_allocation(row)
        assert [(a.native_id, a.pool) for a in submit.allocations()] == [("7", None), ("8", "gpu")]


def test_readers_join_the_submitting_sides_verdict(tmp_path):
    paths, db = _run(tmp_path)
    db.start_attempts([(0, 1), (1, 1)])
    db.record_attempts(
        [
            st.AttemptRecord(
                task_idx=0,
                attempt=1,
                state=st.SUCCEEDED,
                exit_code=0,
                started=1.0,
                ended=2.0,
                peak_rss=None,
                host="n1",
                message=None,
            )
        ],
        {0: st.SUCCEEDED},
    )
    db.close()
    with st.SubmitDB(paths.submit_db) as submit:
        row = st.AllocationRow(
            native_id="42",
            number=1,
            backend="slurm",
            state="running",
            native_state="RUNNING",
            reason=None,
            submitted=1.0,
            updated=None,
            script="s.sh",
            stdout="o",
            stderr="e",
        )
        submit.add_allocation(row)
        submit.set_meta(status="submitted")
        with st.StateDB(paths.state_db, readonly=True) as reader:
            assert reader.meta()["status"] == "running"  # the driver's word while it runs
            assert [a.native_id for a in reader.allocations()] == ["42"]
        submit.declare_over("failed", "allocation 42 ended before the run finished")
    with st.StateDB(paths.state_db, readonly=True) as reader:
        assert reader.meta()["status"] == "failed"
        rows = reader.tasks()
        assert [r.state for r in rows] == [st.SUCCEEDED, st.CANCELLED, st.CANCELLED]
        assert rows[1].message == "allocation 42 ended before the run finished"
        assert reader.counts() == {"t": {st.SUCCEEDED: 1, st.CANCELLED: 2}}
        assert [r.idx for r in reader.tasks(states=(st.CANCELLED,))] == [1, 2]
        assert reader.tasks(states=(st.RUNNING,)) == []


def test_a_driver_that_finished_has_the_last_word():
    merged = st.merge_meta({"status": "succeeded"}, {"status": "failed", "ended": 5.0})
    assert merged["status"] == "succeeded"
    assert st.merge_meta({"status": "created"}, {"status": "submitted"})["status"] == "submitted"
    assert st.merge_meta({"status": "drained"}, {"status": "failed"})["status"] == "failed"


class _Flaky:
    """A connection that fails every query as a network file system can (``message``)."""

    def __init__(self, message: str, error: type[sqlite3.Error]) -> None:
        self.message, self.error = message, error

    def execute(self, sql, params=()):  # type: ignore[no-untyped-def]
        raise self.error(self.message)

    def close(self) -> None:
        pass


class _FlakyReader(SharedReader):
    """A real reader whose first ``fails`` connections fail every query."""

    def __init__(self, path, fails: int, message: str, error=sqlite3.OperationalError):  # type: ignore[no-untyped-def]
        self.fails, self.message, self.error, self.opened = fails, message, error, 0
        super().__init__(path)

    def _open(self):  # type: ignore[no-untyped-def]
        self.opened += 1
        if self.opened <= self.fails:
            return _Flaky(self.message, self.error)
        return super()._open()


def _db_with_a_row(path):  # type: ignore[no-untyped-def]
    conn = connect_writer(path)
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (1)")
    conn.close()
    return path


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ("disk I/O error", sqlite3.OperationalError),
        ("attempt to write a readonly database", sqlite3.OperationalError),
        ("database disk image is malformed", sqlite3.DatabaseError),
        ("no such table: t", sqlite3.OperationalError),
    ],
)
def test_readers_try_again_on_a_fresh_connection(tmp_path, message, error):
    path = _db_with_a_row(tmp_path / "a.sqlite")
    reader = _FlakyReader(path, 2, message, error)
    assert reader.rows("SELECT x FROM t") == [(1,)]
    assert reader.opened == 3  # each failure dropped its connection
    with pytest.raises(error, match=message.split(":")[0]):
        _FlakyReader(path, 99, message, error).rows("SELECT x FROM t", tries=3)


def test_readers_raise_at_once_what_is_not_transient(tmp_path):
    path = _db_with_a_row(tmp_path / "a.sqlite")
    reader = _FlakyReader(path, 1, 'near "SELEC": syntax error')
    with pytest.raises(sqlite3.OperationalError, match="syntax error"):
        reader.rows("SELECT x FROM t")
    assert reader.opened == 1


def test_a_fresh_connection_keeps_what_was_attached(tmp_path):
    main = _db_with_a_row(tmp_path / "a.sqlite")
    other = connect_writer(tmp_path / "b.sqlite")
    other.execute("CREATE TABLE u (y)")
    other.execute("INSERT INTO u VALUES (2)")
    other.close()
    reader = _FlakyReader(main, 0, "disk I/O error")
    reader.attach("other", tmp_path / "b.sqlite")
    assert reader.rows("SELECT y FROM other.u") == [(2,)]
    reader.fails = reader.opened + 2  # the next two connections fail
    reader._drop()
    assert reader.rows("SELECT x, y FROM t, other.u") == [(1, 2)]
    assert reader.opened == 4
    with pytest.raises(ValueError, match="schema name"):
        reader.attach("x; DROP", main)
    reader.close()


def _call(tmp_path, index: int, prefix: str) -> TaskCall:
    return TaskCall(
        index=index, attempt=1, kind="shell", command="true", argv=None, python=None,
        kwargs=None, workdir=str(tmp_path), env=None, timeout=None, inputs=(), outputs=(),
        stdout="o", stderr="e", result="r", quarantine_dir="q", task_id=f"t[i={index}]",
        fingerprint=f"fp{index}", journal=prefix,
    )  # fmt: skip


def test_journaled_successes_are_folded_into_the_memo(tmp_path):
    root = StateRoot(tmp_path / ".hpcflow")
    folder = root.journal_dir("wf")
    for run_id, indices in (("r1", [0, 1]), ("r2", [2])):
        prefix = root.journal_prefix("wf", run_id)
        for i in indices:
            ok = Outcome(
                index=i,
                attempt=1,
                state="succeeded",
                exit_code=0,
                started=1.0,
                ended=2.0,
                outputs_sig={"o": [1, 2]},
            )
            note_success(_call(tmp_path, i, prefix), ok)
        failed = Outcome(index=9, attempt=1, state="failed", exit_code=1, started=1.0, ended=2.0)
        note_success(_call(tmp_path, 9, prefix), failed)  # only successes are journaled
    close_journals()
    r1 = journal_file(root.journal_prefix("wf", "r1"))
    with open(r1, "ab") as fh:
        fh.write(b'["t[i=5]", "fp')  # a line cut short by a kill
    memo = Memo(root.memo_db, "wf")
    assert memo.fold_journals(folder, keep_run="r2") == 2
    entries = memo.load()
    assert sorted(entries) == ["t[i=0]", "t[i=1]"]
    assert entries["t[i=0]"].fingerprint == "fp0" and entries["t[i=0]"].run_id == "r1"
    assert entries["t[i=1]"].outputs == {"o": [1, 2]}
    assert [p.name.split(".")[0] for p in folder.iterdir()] == ["r2"]  # kept: still live
    remove_journals(folder, "r2")
    assert list(folder.iterdir()) == []
    memo.close()


def test_a_journal_that_cannot_be_written_does_not_fail_the_task(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    call = _call(tmp_path, 0, str(blocker / "journal" / "r1"))  # a folder under a file
    note_success(
        call, Outcome(index=0, attempt=1, state="succeeded", exit_code=0, started=1.0, ended=2.0)
    )  # no exception


def test_a_pid_is_ours_only_on_this_machine_and_while_it_runs():
    me = ProcessIdentity.current()
    assert me.on_this_machine() and me.alive_here()
    again = ProcessIdentity.from_meta(json.loads(json.dumps(me.to_meta())))
    assert again == me
    elsewhere = dataclasses.replace(me, pid_namespace="pid:[1]")
    assert not elsewhere.on_this_machine() and not elsewhere.alive_here()
    other_host = dataclasses.replace(me, host=me.host + "-other")
    assert not other_host.alive_here()
    reused = dataclasses.replace(me, start_ticks=(me.start_ticks or 0) + 1)
    assert not reused.alive_here()  # the same pid, but not the same process
    gone = dataclasses.replace(me, pid=2**22 + os.getpid())
    assert not gone.alive_here()
    assert ProcessIdentity.from_meta({"host": "x"}) is None


def test_a_continuation_takes_the_journal_of_an_allocation_killed_before_its_commit(tmp_path):
    """Allocation 1's driver was killed after a task ended (its success is only in the
    journal): the continuation's driver records it and does not run it again."""
    from hpcflow.engine.lifecycle import create_run
    from hpcflow.engine.prepare import RunOptions, open_run, prepare
    from hpcflow.worker.calls import Outcome
    from tests.conftest import write_workflow

    wf = write_workflow(
        tmp_path,
        """
name: cont
tasks:
  - name: a
    foreach: {i: [1, 2, 3]}
    command: echo {i}
""",
    )
    prepared = prepare(wf, RunOptions())
    prepared, run_id, paths, db = create_run(prepared, RunOptions())
    db.close()
    prepared.memo.close()
    prepared.lock.release()
    inst = prepared.graph.instances[1]
    call = prepared.factory.call(inst, 1)
    note_success(
        call,
        Outcome(
            index=inst.index, attempt=1, state="succeeded", exit_code=0, started=1.0, ended=2.0
        ),
    )
    close_journals()

    again, db2, same_id = open_run(paths.run_dir)
    try:
        assert same_id == run_id
        assert again.decision.run == [True, False, True]
        states = {row.id: row.state for row in db2.tasks()}
        assert states[inst.id] == st.SUCCEEDED
        assert again.memo.load()[inst.id].run_id == run_id
    finally:
        db2.close()
        again.memo.close()


_DIE_IN_A_COMMIT = """
import os, signal, sys
from hpcflow.store.sqlite import connect_writer
conn = connect_writer(sys.argv[1])
conn.execute("PRAGMA cache_size=1")  # dirty pages spill into the file before the commit
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE tasks SET state = 'failed', message = ?", ("x" * 3000,))
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_driver_killed_in_a_commit_leaves_its_last_commit(tmp_path, monkeypatch, caplog):
    import subprocess
    import sys

    from hpcflow.engine.lifecycle import summarize
    from hpcflow.store import sqlite as shared
    from hpcflow.store.snapshot import SnapshotReader

    paths, db = _run(tmp_path, n=200)
    db.close()
    died = subprocess.run([sys.executable, "-c", _DIE_IN_A_COMMIT, str(paths.state_db)])
    assert died.returncode == -9
    assert paths.state_db.with_name(paths.state_db.name + "-journal").exists()  # a hot journal
    monkeypatch.setattr(shared, "READ_TRIES", 2)
    # Readers read the last published snapshot: the last whole commit, hot journal or not.
    with st.StateDB(paths.state_db, readonly=True) as reader:
        assert reader.snapshot is not None
        assert [r.state for r in reader.tasks()] == [st.PENDING] * 200
    paths.state_snapshot.unlink()  # a run from before snapshots: the file itself
    reader = st.StateDB(paths.state_db, readonly=True, snapshots=SnapshotReader())
    # The journal stays hot through the reader's tries (no writer holds the lock): the
    # reader rolls the commit back as the next writer would, and reads the last commit.
    summary = summarize(reader, paths, "r1", time.time())
    assert summary.totals == {st.PENDING: 200}
    assert "stopped in the middle of a commit" in caplog.text
    assert not paths.state_db.with_name(paths.state_db.name + "-journal").exists()
    reader.close()
    assert _reader_states(paths) == [st.PENDING] * 200


def test_a_dry_run_memo_sees_the_file_and_the_journals_and_writes_neither(tmp_path):
    """Memo.preview: what a run would decide from (the memo file's entries and the
    successes journaled by a killed run), in memory; the file and journals are left
    exactly as they were (a live run may still be appending to a journal)."""
    from hpcflow.store.memo import Memo, MemoEntry
    from hpcflow.worker.calls import Outcome
    from hpcflow.worker.journal import close_journals, note_success
    from tests.conftest import task_call

    db = tmp_path / "memo.sqlite"
    memo = Memo(db, "wf")
    memo.record([MemoEntry("a", "fa", {}, {}, "run1")])
    memo.close()
    journals = tmp_path / "journal"
    call = task_call(tmp_path, 1, "true", task_id="b", fingerprint="fb")
    call.journal = str(journals / "run2")
    note_success(
        call, Outcome(index=1, attempt=1, state="succeeded", exit_code=0, started=0.0, ended=1.0)
    )
    close_journals()
    before = {p: p.read_bytes() for p in [db, *journals.iterdir()]}

    preview = Memo.preview(db, "wf", journals)
    entries = preview.load()
    preview.close()
    assert {k: (e.fingerprint, e.run_id) for k, e in entries.items()} == {
        "a": ("fa", "run1"),
        "b": ("fb", "run2"),
    }
    assert {p: p.read_bytes() for p in [db, *journals.iterdir()]} == before
    assert Memo.preview(tmp_path / "none.sqlite", "wf", tmp_path / "no-journals").load() == {}
    assert not (tmp_path / "none.sqlite").exists()
