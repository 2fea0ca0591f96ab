"""The state of one run: tasks and attempts in SQLite (WAL).

SQLite commits are atomic, so the state survives ``kill -9`` of the driver at any instant,
and other processes (``hpcflow status``) can read it while the run is live.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    stderr TEXT NOT NULL
);
"""

_SELECT_TASKS = (
    "SELECT idx, id, name, slug, deps, state, attempts, exit_code, started, ended, "
    "peak_rss, host, message FROM tasks"
)

#: Task states. ``cached`` = up to date from an earlier run; ``skipped`` = an upstream failed.
PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED, SKIPPED, CACHED = (
    "pending",
    "running",
    "succeeded",
    "failed",
    "cancelled",
    "skipped",
    "cached",
)
FINAL_STATES = frozenset({SUCCEEDED, FAILED, CANCELLED, SKIPPED, CACHED})


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """The outcome of one attempt, as stored."""

    task_idx: int
    attempt: int
    state: str
    exit_code: int | None
    started: float | None
    ended: float | None
    peak_rss: int | None
    host: str | None
    message: str | None


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class TaskRow:
    idx: int
    id: str
    name: str
    slug: str
    deps: list[int]
    state: str
    attempts: int
    exit_code: int | None
    started: float | None
    ended: float | None
    peak_rss: int | None
    host: str | None
    message: str | None


class StateDB:
    """Read and write one run's ``state.sqlite``."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        if readonly:
            if not path.exists():
                raise FileNotFoundError(path)
            self._conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        else:
            self._conn = sqlite3.connect(path, timeout=30)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(_SCHEMA)
        self._conn.execute("PRAGMA busy_timeout=30000")

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> StateDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ------------------------------------------------------------------------

    def set_meta(self, **values: Any) -> None:
        with self._conn:
            self._conn.executemany(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                [(k, json.dumps(v)) for k, v in values.items()],
            )

    def add_tasks(self, rows: Iterable[tuple[int, str, str, str, Sequence[int], str]]) -> None:
        """Insert tasks as (idx, id, name, slug, deps, state)."""
        with self._conn:
            self._conn.executemany(
                "INSERT INTO tasks (idx, id, name, slug, deps, state) VALUES (?, ?, ?, ?, ?, ?)",
                ((i, tid, n, s, json.dumps(list(d)), st) for i, tid, n, s, d, st in rows),
            )

    def set_states(self, changes: Iterable[tuple[int, str]], message: str | None = None) -> None:
        with self._conn:
            self._conn.executemany(
                "UPDATE tasks SET state = ?, message = COALESCE(?, message) WHERE idx = ?",
                ((state, message, idx) for idx, state in changes),
            )

    def start_attempts(self, starts: Iterable[tuple[int, int]], when: float | None = None) -> None:
        """Mark tasks running with attempt numbers: (idx, attempt)."""
        now = when or time.time()
        with self._conn:
            self._conn.executemany(
                "UPDATE tasks SET state = 'running', attempts = ?, started = ? WHERE idx = ?",
                ((attempt, now, idx) for idx, attempt in starts),
            )

    def set_running_hosts(self, hosts: Iterable[tuple[int, str]]) -> None:
        """Where running tasks run: (idx, host); ignored for tasks no longer running."""
        with self._conn:
            self._conn.executemany(
                "UPDATE tasks SET host = ? WHERE idx = ? AND state = 'running'",
                ((host, idx) for idx, host in hosts),
            )

    def record_attempts(
        self, records: Sequence[AttemptRecord], task_states: dict[int, str]
    ) -> None:
        """Store finished attempts and each task's new state, in one transaction."""
        with self._conn:
            self._conn.executemany(
                "INSERT OR REPLACE INTO attempts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    (
                        r.task_idx,
                        r.attempt,
                        r.state,
                        r.exit_code,
                        r.started,
                        r.ended,
                        r.peak_rss,
                        r.host,
                        r.message,
                    )
                    for r in records
                ),
            )
            self._conn.executemany(
                "UPDATE tasks SET state = ?, attempts = ?, exit_code = ?, started = ?, ended = ?,"
                " peak_rss = ?, host = ?, message = ? WHERE idx = ?",
                (
                    (
                        task_states[r.task_idx],
                        r.attempt,
                        r.exit_code,
                        r.started,
                        r.ended,
                        r.peak_rss,
                        r.host,
                        r.message,
                        r.task_idx,
                    )
                    for r in records
                ),
            )

    def add_allocation(self, row: AllocationRow) -> None:
        with self._conn:
            self._conn.execute(
                "INSERT OR REPLACE INTO allocations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    row.native_id,
                    row.number,
                    row.backend,
                    row.state,
                    row.native_state,
                    row.reason,
                    row.submitted,
                    row.updated,
                    row.script,
                    row.stdout,
                    row.stderr,
                ),
            )

    def update_allocation(
        self, native_id: str, state: str, native_state: str | None, reason: str | None
    ) -> None:
        with self._conn:
            self._conn.execute(
                "UPDATE allocations SET state = ?, native_state = ?, reason = ?, updated = ?"
                " WHERE native_id = ?",
                (state, native_state, reason, time.time(), native_id),
            )

    # -- reading ------------------------------------------------------------------------

    def allocations(self) -> list[AllocationRow]:
        return [
            AllocationRow(*r)
            for r in self._conn.execute("SELECT * FROM allocations ORDER BY number")
        ]

    def meta(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self._conn.execute("SELECT key, value FROM meta")}

    def tasks(self, *, states: Sequence[str] = (), idx: int | None = None) -> list[TaskRow]:
        """Tasks in index order; only those in ``states`` / with index ``idx`` if given."""
        clauses: list[str] = []
        params: list[Any] = []
        if states:
            clauses.append("state IN (" + ", ".join("?" * len(states)) + ")")
            params.extend(states)
        if idx is not None:
            clauses.append("idx = ?")
            params.append(idx)
        where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
        # Only fixed column names and placeholders are spliced in; values are parameters.
        query = f"{_SELECT_TASKS}{where} ORDER BY idx"  # noqa: S608
        return [
            TaskRow(r[0], r[1], r[2], r[3], json.loads(r[4]), *r[5:])
            for r in self._conn.execute(query, params)
        ]

    def attempts(self, task_idx: int) -> list[AttemptRecord]:
        rows = self._conn.execute(
            "SELECT * FROM attempts WHERE task_idx = ? ORDER BY attempt", (task_idx,)
        )
        return [AttemptRecord(*r) for r in rows]

    def all_attempts(self) -> list[AttemptRecord]:
        """Every attempt of the run, in start order (for reports and timelines)."""
        rows = self._conn.execute(
            "SELECT * FROM attempts ORDER BY started IS NULL, started, task_idx, attempt"
        )
        return [AttemptRecord(*r) for r in rows]

    def counts(self) -> dict[str, dict[str, int]]:
        """Per task name: how many tasks are in each state."""
        out: dict[str, dict[str, int]] = {}
        for name, state, n in self._conn.execute(
            "SELECT name, state, COUNT(*) FROM tasks GROUP BY name, state"
        ):
            out.setdefault(name, {})[state] = n
        return out

    def names_in_order(self) -> list[str]:
        return [
            r[0]
            for r in self._conn.execute("SELECT name FROM tasks GROUP BY name ORDER BY MIN(idx)")
        ]
