"""The state of one run: its tasks and attempts (``state.sqlite``), and what the submitting
side knows of its allocations (``submit.sqlite``).

Each file has one writer (:mod:`hpcflow.store.sqlite` says why and how): ``state.sqlite``
is created by the process that creates the run and from then on written only by the run's
driver, wherever it runs (on this machine, inside the allocation, or in the submitting
process for jobs and elastic mode); ``submit.sqlite`` is written only by the process that
submits and follows the allocations. Readers (``hpcflow status``, ``logs``, ``report``,
the follower) open both read-only through :class:`StateDB` with ``readonly=True``, which
joins them: the allocations come from ``submit.sqlite``, and once the submitting side has
declared the run over (its allocation ended, or it was cancelled) tasks the driver left
running or pending read as cancelled, with the submitting side's reason.

Readers never read ``state.sqlite`` while its driver may write it: a reader on another
client of a network file system could see pages of two commits. They read the last
snapshot the writer published (:mod:`hpcflow.store.snapshot`: one whole commit, checked),
so a reader's meta, counts and rows all come from one commit; only once the snapshot is
sealed (the driver closed with the run over, and nothing writes the file again) do they
read the file itself. :meth:`StateDB.refresh` moves a long-lived reader (the pilot
follower) to the newest snapshot.

SQLite commits are atomic, so the state survives ``kill -9`` of either writer at any
instant; writes are batched (at most one commit a second) and each finished task is also
in its worker's journal at once, so nothing that finished is lost.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hpcflow.store.damage import (
    StateDamaged,
    is_cut_commit,
    is_damage,
    journal_of,
    roll_back_cut_commit,
)
from hpcflow.store.snapshot import (
    READER,
    Snapshot,
    SnapshotPublisher,
    SnapshotReader,
    open_image,
    snapshot_path,
)
from hpcflow.store.sqlite import BatchedWriter, SharedReader, connect_writer
from hpcflow.store.states import RunStatus, TaskState

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (
    idx INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    name TEXT NOT NULL,
    slug TEXT NOT NULL,
    deps TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    exit_code INTEGER,
    started REAL,
    ended REAL,
    peak_rss INTEGER,
    host TEXT,
    message TEXT
);
CREATE TABLE IF NOT EXISTS attempts (
    task_idx INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    state TEXT NOT NULL,
    exit_code INTEGER,
    started REAL,
    ended REAL,
    peak_rss INTEGER,
    host TEXT,
    message TEXT,
    PRIMARY KEY (task_idx, attempt)
);
CREATE TABLE IF NOT EXISTS attempt_values (
    task_idx INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    type TEXT,
    nbytes INTEGER,
    received INTEGER NOT NULL,
    moved INTEGER NOT NULL,
    PRIMARY KEY (task_idx, attempt)
);
"""

_SUBMIT_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS allocations (
    native_id TEXT PRIMARY KEY,
    number INTEGER NOT NULL,
    backend TEXT NOT NULL,
    state TEXT NOT NULL,
    native_state TEXT,
    reason TEXT,
    submitted REAL NOT NULL,
    updated REAL,
    script TEXT NOT NULL,
    stdout TEXT NOT NULL,
    stderr TEXT NOT NULL,
    pool TEXT
);
"""

_SELECT_TASKS = (
    "SELECT idx, id, name, slug, deps, state, attempts, exit_code, started, ended, "
    "peak_rss, host, message FROM tasks"
)
#: The columns of an attempt (:func:`_attempt_record`) and of its values
#: (:func:`_value_row`), in their order.
_ATTEMPT_COLUMNS = "task_idx, attempt, state, exit_code, started, ended, peak_rss, host, message"
_VALUE_COLUMNS = "task_idx, attempt, type, nbytes, received, moved"

#: Task states (:class:`TaskState`), by their short names.
PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED, SKIPPED, CACHED = (
    TaskState.PENDING,
    TaskState.RUNNING,
    TaskState.SUCCEEDED,
    TaskState.FAILED,
    TaskState.CANCELLED,
    TaskState.SKIPPED,
    TaskState.CACHED,
)
INTERRUPTED = TaskState.INTERRUPTED
FINAL_STATES = frozenset(state for state in TaskState if state.final)


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptRecord:
    """The outcome of one attempt, as stored."""

    task_idx: int
    attempt: int
    state: TaskState
    exit_code: int | None
    started: float | None
    ended: float | None
    peak_rss: int | None
    host: str | None
    message: str | None
    #: A python attempt that returned a value some task receives, or received values.
    values: ValueRow | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ValueRow:
    """What the values of one attempt weighed (``from:``): the value it returned (type
    name and bytes, when known), the bytes it received, and how many of those another
    worker sent it."""

    task_idx: int
    attempt: int
    type: str | None
    nbytes: int | None
    received: int
    moved: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocationRow:
    """One batch job of a run."""

    native_id: str
    number: int
    backend: str
    state: str
    native_state: str | None
    reason: str | None
    submitted: float
    updated: float | None
    script: str
    stdout: str
    stderr: str
    #: The profile's pool the allocation (or job) is for; None without pools, and in
    #: runs recorded before pools existed.
    pool: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskRow:
    idx: int
    id: str
    name: str
    slug: str
    deps: list[int]
    state: TaskState
    attempts: int
    exit_code: int | None
    started: float | None
    ended: float | None
    peak_rss: int | None
    host: str | None
    message: str | None


def _task_row(r: Sequence[Any]) -> TaskRow:
    """A row of :data:`_SELECT_TASKS` as its record."""
    return TaskRow(
        idx=r[0],
        id=r[1],
        name=r[2],
        slug=r[3],
        deps=json.loads(r[4]),
        state=TaskState(r[5]),
        attempts=r[6],
        exit_code=r[7],
        started=r[8],
        ended=r[9],
        peak_rss=r[10],
        host=r[11],
        message=r[12],
    )


def _attempt_record(r: Sequence[Any]) -> AttemptRecord:
    """A row of :data:`_ATTEMPT_COLUMNS` as its record."""
    return AttemptRecord(
        task_idx=r[0],
        attempt=r[1],
        state=TaskState(r[2]),
        exit_code=r[3],
        started=r[4],
        ended=r[5],
        peak_rss=r[6],
        host=r[7],
        message=r[8],
    )


def _value_row(r: Sequence[Any]) -> ValueRow:
    """A row of :data:`_VALUE_COLUMNS` as its record."""
    return ValueRow(task_idx=r[0], attempt=r[1], type=r[2], nbytes=r[3], received=r[4], moved=r[5])


def _allocation_row(r: Sequence[Any]) -> AllocationRow:
    """A row of ``allocations`` (all its columns, in the table's order) as its record.

    Read with ``SELECT *``: a run recorded before pools existed has no ``pool`` column
    (its readers do not migrate it), and its rows end before it."""
    return AllocationRow(
        native_id=r[0],
        number=r[1],
        backend=r[2],
        state=r[3],
        native_state=r[4],
        reason=r[5],
        submitted=r[6],
        updated=r[7],
        script=r[8],
        stdout=r[9],
        stderr=r[10],
        pool=r[11] if len(r) > 11 else None,
    )


#: Run statuses after which the driver writes nothing more.
DRIVER_DONE = frozenset(status for status in RunStatus if status.final)


def merge_meta(state_meta: dict[str, Any], submit_meta: dict[str, Any]) -> dict[str, Any]:
    """The run's meta as a reader sees it: the driver's, with what the submitting side said.

    The driver's word stands once it has finished. Before that, a submitting side that
    declared the run failed or cancelled (its allocation ended, a cancel) decides, and a
    run whose driver has not started yet is ``submitted`` once its allocation is queued.
    """
    meta = dict(state_meta)
    for key, value in submit_meta.items():
        meta.setdefault(key, value)
    status = submit_meta.get("status")
    ours = state_meta.get("status")
    if status in (RunStatus.FAILED, RunStatus.CANCELLED) and ours not in DRIVER_DONE:
        meta["status"] = status
        for key in ("ended", "error"):
            if key in submit_meta:
                meta[key] = submit_meta[key]
    elif status is not None and ours in (None, RunStatus.CREATED):
        meta["status"] = status
    return meta


def _meta_rows(rows: Iterable[tuple[str, str]]) -> dict[str, Any]:
    return {k: json.loads(v) for k, v in rows}


def _meta_values(values: dict[str, Any]) -> list[tuple[str, str]]:
    return [(k, json.dumps(v)) for k, v in values.items()]


class StateDB:
    """One run's state: the driver's writer of ``state.sqlite``, or a reader of the run.

    ``readonly=True`` is for every process but the driver (and the process creating the
    run): it never writes, and it joins ``submit.sqlite`` (``submit_path``, by default
    the run directory's) for allocations and the submitting side's verdict. A reader
    reads one snapshot, the newest when it opens, until :meth:`refresh`, through
    ``snapshots`` (by default the process's :data:`~hpcflow.store.snapshot.READER`, which
    remembers the newest it returned); the writer publishes snapshots after its commits
    (:class:`SnapshotPublisher`).
    """

    def __init__(
        self,
        path: Path,
        *,
        readonly: bool = False,
        submit_path: Path | None = None,
        snapshots: SnapshotReader | None = None,
    ) -> None:
        from hpcflow.store.paths import RunPaths

        self.path = path
        self.readonly = readonly
        self.submit_path = submit_path or RunPaths(path.parent).submit_db
        self.snapshot_path = snapshot_path(path)
        self._snapshots = snapshots or READER
        self._attached = False
        self._writer: BatchedWriter | None = None
        self._reader: SharedReader | None = None
        self._publisher: SnapshotPublisher | None = None
        #: The snapshot a reader reads (None: it reads the file itself).
        self.snapshot: Snapshot | None = None
        if readonly:
            self._reader = self._open_reader(self._snapshots.read(self.snapshot_path))
        else:
            conn = connect_writer(path)
            try:
                conn.executescript(_SCHEMA)
            except sqlite3.DatabaseError as exc:
                conn.close()
                if is_damage(exc):
                    raise StateDamaged(path, str(exc)) from None
                raise
            self._writer = BatchedWriter(conn)
            if str(path) != ":memory:":
                self._publisher = SnapshotPublisher(path, self.snapshot_path)
                self._writer.on_commit = self._publisher.committed

    def _open_reader(self, snapshot: Snapshot | None) -> SharedReader:
        """A reader of ``snapshot``; of the file itself when the snapshot is sealed or
        there is none (a run from before snapshots)."""
        if not self.path.exists():
            raise FileNotFoundError(self.path)
        self.snapshot = snapshot
        if snapshot is None or snapshot.sealed:
            return SharedReader(self.path)
        return SharedReader(self.path, opener=lambda: open_image(snapshot.body))

    def refresh(self) -> None:
        """Readers: read the newest snapshot from now on (no-op when it is the same)."""
        if self._reader is None:
            return
        newest = self._snapshots.read(self.snapshot_path)
        current = self.snapshot
        if newest is None and current is None:
            return  # the file itself, as before
        if newest is not None and current is not None:
            if (newest.seq, newest.sealed) == (current.seq, current.sealed):
                return
        self._reader.close()
        self._attached = False
        self._reader = self._open_reader(newest)

    def close(self) -> None:
        """Commit what waits (the driver's batched writes) and close; the writer publishes
        its last snapshot, sealed when the run is over (nothing writes the file again)."""
        if self._writer is not None:
            try:
                over = self._own_status() in DRIVER_DONE
            except (sqlite3.Error, OSError):
                over = False
            self._writer.close()
            if self._publisher is not None:
                self._publisher.close(sealed=over)
        if self._reader is not None:
            self._reader.close()

    def _own_status(self) -> str | None:
        rows = self._rows("SELECT value FROM meta WHERE key = 'status'")
        return json.loads(rows[0][0]) if rows else None

    def __enter__(self) -> StateDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing (the driver) -----------------------------------------------------------

    def _write(self, sql: str, rows: Iterable[tuple[Any, ...]], *, now: bool = False) -> None:
        if self._writer is None:
            raise sqlite3.OperationalError(f"{self.path} is open read-only")
        self._writer.write(sql, rows, now=now)

    def flush(self) -> None:
        """Commit every batched write now."""
        if self._writer is not None:
            self._writer.flush()

    def flush_due(self) -> None:
        """Commit batched writes if the commit interval has passed, and publish the last
        commit's snapshot if it is due."""
        if self._writer is not None:
            self._writer.flush_due()
        if self._publisher is not None:
            self._publisher.publish_due()

    def set_meta(self, **values: Any) -> None:
        """Run-level facts (status, pids, times): committed at once."""
        self._write(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
            _meta_values(values),
            now=True,
        )

    def add_tasks(self, rows: Iterable[tuple[int, str, str, str, Sequence[int], str]]) -> None:
        """Insert tasks as (idx, id, name, slug, deps, state)."""
        self._write(
            "INSERT INTO tasks (idx, id, name, slug, deps, state) VALUES (?, ?, ?, ?, ?, ?)",
            (
                (i, tid, n, s, json.dumps(list(d)) if d else "[]", st)
                for i, tid, n, s, d, st in rows
            ),
            now=True,
        )

    def copy_tasks(self, earlier: Path, state: str) -> None:
        """Insert the tasks of ``earlier``, another run's ``state.sqlite`` (of the same
        workflow, unchanged), each in ``state``; committed at once. The file is only read."""
        if self._writer is None:
            raise sqlite3.OperationalError(f"{self.path} is open read-only")
        if not earlier.is_file():  # (ATTACH would create it)
            raise FileNotFoundError(earlier)
        self._writer.execute("ATTACH DATABASE ? AS earlier", (str(earlier),))
        try:
            self._write(
                "INSERT INTO tasks (idx, id, name, slug, deps, state)"
                " SELECT idx, id, name, slug, deps, ? FROM earlier.tasks ORDER BY idx",
                [(state,)],
                now=True,
            )
        finally:
            self._writer.execute("DETACH DATABASE earlier")

    def set_states(self, changes: Iterable[tuple[int, str]], message: str | None = None) -> None:
        self._write(
            "UPDATE tasks SET state = ?, message = COALESCE(?, message) WHERE idx = ?",
            ((state, message, idx) for idx, state in changes),
        )

    def start_attempts(self, starts: Iterable[tuple[int, int]], when: float | None = None) -> None:
        """Mark tasks running with attempt numbers: (idx, attempt)."""
        now = when or time.time()
        self._write(
            "UPDATE tasks SET state = 'running', attempts = ?, started = ? WHERE idx = ?",
            ((attempt, now, idx) for idx, attempt in starts),
        )

    def set_running_hosts(self, hosts: Iterable[tuple[int, str]]) -> None:
        """Where running tasks run: (idx, host); ignored for tasks no longer running."""
        self._write(
            "UPDATE tasks SET host = ? WHERE idx = ? AND state = 'running'",
            ((host, idx) for idx, host in hosts),
        )

    def record_attempts(
        self, records: Sequence[AttemptRecord], task_states: Mapping[int, str]
    ) -> None:
        """Store finished attempts and each task's new state (in the same commit)."""
        values = [r.values for r in records if r.values is not None]
        if values:
            self._write(
                "INSERT OR REPLACE INTO attempt_values VALUES (?, ?, ?, ?, ?, ?)",
                ((v.task_idx, v.attempt, v.type, v.nbytes, v.received, v.moved) for v in values),
            )
        self._write(
            "INSERT OR REPLACE INTO attempts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                (r.task_idx, r.attempt, r.state, r.exit_code, r.started, r.ended,
                 r.peak_rss, r.host, r.message)
                for r in records
            ),
        )  # fmt: skip
        self._write(
            "UPDATE tasks SET state = ?, attempts = ?, exit_code = ?, started = ?, ended = ?,"
            " peak_rss = ?, host = ?, message = ? WHERE idx = ?",
            (
                (task_states[r.task_idx], r.attempt, r.exit_code, r.started, r.ended,
                 r.peak_rss, r.host, r.message, r.task_idx)
                for r in records
            ),
        )  # fmt: skip

    # -- reading ------------------------------------------------------------------------

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of a query; :class:`StateDamaged` when the file is damaged (readers
        try again first: damage that lasts)."""
        try:
            if self._writer is not None:
                return self._writer.read(sql, params)
            if self._reader is None:  # closed: neither side is open any more
                raise sqlite3.ProgrammingError(f"{self.path} is closed")
            try:
                return self._reader.rows(sql, params)
            except sqlite3.OperationalError as exc:
                # Its writer died mid-commit (the driver; the submitting side for the
                # joined submit.sqlite): roll back to the last commit, then read.
                # (A reader of a snapshot's image reads no page of state.sqlite.)
                image = self.snapshot is not None and not self.snapshot.sealed
                files = (self.submit_path,) if image else (self.path, self.submit_path)
                cut = [p for p in files if journal_of(p).exists()]
                if not is_cut_commit(exc) or not all(map(roll_back_cut_commit, cut)):
                    raise
                return self._reader.rows(sql, params)
        except sqlite3.DatabaseError as exc:
            if is_damage(exc):
                raise StateDamaged(self.path, str(exc)) from None
            raise

    def _submit(self) -> bool:
        """Whether ``submit.sqlite`` is joined (readers only; attached once it exists)."""
        if self._reader is None:
            return False
        if not self._attached and self.submit_path.exists():
            self._reader.attach("submit", self.submit_path)
            self._attached = True
        return self._attached

    def submit_meta(self) -> dict[str, Any]:
        """What the submitting side recorded (readers only; empty without it)."""
        if not self._submit():
            return {}
        return _meta_rows(self._rows("SELECT key, value FROM submit.meta"))

    def meta(self) -> dict[str, Any]:
        """The run's meta; for readers merged with the submitting side's (:func:`merge_meta`)."""
        own = _meta_rows(self._rows("SELECT key, value FROM meta"))
        if self._writer is not None:
            return own
        return merge_meta(own, self.submit_meta())

    def _ended_by_submitter(self) -> str | None:
        """The reason tasks left running or pending are cancelled, when the submitting side
        declared the run over before its driver did (readers only)."""
        if self._writer is not None:
            return None
        submit = self.submit_meta()
        if submit.get("status") not in (RunStatus.FAILED, RunStatus.CANCELLED):
            return None
        own = _meta_rows(self._rows("SELECT key, value FROM meta WHERE key = 'status'"))
        if own.get("status") in DRIVER_DONE:
            return None
        return str(submit.get("unfinished") or f"run {submit['status']}")

    def allocations(self) -> list[AllocationRow]:
        """The run's batch jobs, as the submitting side last saw them (readers only)."""
        if not self._submit():
            return []
        query = "SELECT * FROM submit.allocations ORDER BY number"
        return [_allocation_row(r) for r in self._rows(query)]

    def tasks(self, *, states: Sequence[str] = (), idx: int | None = None) -> list[TaskRow]:
        """Tasks in index order; only those in ``states`` / with index ``idx`` if given."""
        ended = self._ended_by_submitter()
        wanted = set(states)
        query_states = set(wanted)
        if ended is not None and CANCELLED in wanted:
            query_states |= {RUNNING, PENDING}
        clauses: list[str] = []
        params: list[Any] = []
        if query_states:
            clauses.append("state IN (" + ", ".join("?" * len(query_states)) + ")")
            params.extend(sorted(query_states))
        if idx is not None:
            clauses.append("idx = ?")
            params.append(idx)
        where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
        # Only fixed column names and placeholders are spliced in; values are parameters.
        query = f"{_SELECT_TASKS}{where} ORDER BY idx"  # noqa: S608
        rows = [_task_row(r) for r in self._rows(query, params)]
        if ended is None:
            return rows
        out = []
        for row in rows:
            if row.state in (RUNNING, PENDING):
                row = replace(row, state=CANCELLED, message=ended)
            if not wanted or row.state in wanted:
                out.append(row)
        return out

    def attempts(self, task_idx: int) -> list[AttemptRecord]:
        query = f"SELECT {_ATTEMPT_COLUMNS} FROM attempts WHERE task_idx = ? ORDER BY attempt"  # noqa: S608
        return [_attempt_record(r) for r in self._rows(query, (task_idx,))]

    def value_rows(self) -> list[ValueRow]:
        """What each attempt's values weighed (empty for a run made before hpcflow kept
        it: the table is looked up first, as a missing table reads as a torn file)."""
        known = self._rows("SELECT name FROM sqlite_master WHERE name = 'attempt_values'")
        if not known:
            return []
        query = f"SELECT {_VALUE_COLUMNS} FROM attempt_values"  # noqa: S608
        return [_value_row(r) for r in self._rows(query)]

    def interrupted_last(self) -> set[int]:
        """Tasks whose latest attempt its checkpoint signal interrupted."""
        rows = self._rows(
            "SELECT a.task_idx FROM attempts a WHERE a.state = ? AND a.attempt = "
            "(SELECT MAX(b.attempt) FROM attempts b WHERE b.task_idx = a.task_idx)",
            (INTERRUPTED,),
        )
        return {int(r[0]) for r in rows}

    def all_attempts(self) -> list[AttemptRecord]:
        """Every attempt of the run, in start order (for reports and timelines)."""
        query = (
            f"SELECT {_ATTEMPT_COLUMNS} FROM attempts"  # noqa: S608
            " ORDER BY started IS NULL, started, task_idx, attempt"
        )
        return [_attempt_record(r) for r in self._rows(query)]

    def task_ids(self) -> list[tuple[str, str]]:
        """Each task's (id, name), in index order."""
        return self._rows("SELECT id, name FROM tasks ORDER BY idx")  # type: ignore[return-value]

    def counts(self) -> dict[str, dict[str, int]]:
        """Per task name: how many tasks are in each state."""
        ended = self._ended_by_submitter()
        out: dict[str, dict[str, int]] = {}
        for name, state, n in self._rows(
            "SELECT name, state, COUNT(*) FROM tasks GROUP BY name, state"
        ):
            if ended is not None and state in (RUNNING, PENDING):
                state = CANCELLED
            bucket = out.setdefault(name, {})
            bucket[state] = bucket.get(state, 0) + n
        return out

    def names_in_order(self) -> list[str]:
        return [r[0] for r in self._rows("SELECT name FROM tasks GROUP BY name ORDER BY MIN(idx)")]


class SubmitDB(BatchedWriter):
    """``submit.sqlite``: written only by the process that submits and follows a run's
    allocations (their rows, and its own verdict on the run: ``status``, ``error``,
    ``ended``, and ``unfinished``, the reason readers show for tasks the driver left).

    Changes to allocations are batched (:meth:`flush_due` / :meth:`flush` commit them);
    the verdict and new allocations are committed at once.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        conn = connect_writer(path)
        conn.executescript(_SUBMIT_SCHEMA)
        columns = {row[1] for row in conn.execute("PRAGMA table_info(allocations)")}
        if "pool" not in columns:  # a run recorded before pools existed, continued now
            conn.execute("ALTER TABLE allocations ADD COLUMN pool TEXT")
        super().__init__(conn)

    def __enter__(self) -> SubmitDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_meta(self, **values: Any) -> None:
        self.write(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", _meta_values(values), now=True
        )

    def declare_over(self, status: str, unfinished: str, **values: Any) -> None:
        """The run ended before its driver said so: ``status`` (failed or cancelled), and
        why the tasks it left running or pending did not finish."""
        self.set_meta(status=status, unfinished=unfinished, ended=time.time(), **values)

    def add_allocation(self, row: AllocationRow) -> None:
        self.write(
            "INSERT OR REPLACE INTO allocations (native_id, number, backend, state, "
            "native_state, reason, submitted, updated, script, stdout, stderr, pool) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (row.native_id, row.number, row.backend, row.state, row.native_state,
                 row.reason, row.submitted, row.updated, row.script, row.stdout, row.stderr,
                 row.pool)
            ],
            now=True,
        )  # fmt: skip

    def update_allocation(
        self, native_id: str, state: str, native_state: str | None, reason: str | None
    ) -> None:
        self.write(
            "UPDATE allocations SET state = ?, native_state = ?, reason = ?, updated = ?"
            " WHERE native_id = ?",
            [(state, native_state, reason, time.time(), native_id)],
        )

    def meta(self) -> dict[str, Any]:
        return _meta_rows(self.read("SELECT key, value FROM meta"))

    def allocations(self) -> list[AllocationRow]:
        rows = self.read("SELECT * FROM allocations ORDER BY number")
        return [_allocation_row(r) for r in rows]
