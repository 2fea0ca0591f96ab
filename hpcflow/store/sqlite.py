"""SQLite files that one process writes and others read, also over NFS, Lustre or GlusterFS.

Every SQLite file of hpcflow has exactly one writer at a time (the driver for a run's
task state, the submitting process for its allocations, the driver for a workflow's
memo), and any number of readers, possibly on other hosts through other clients of a
shared file system. That decides the settings here:

- a rollback journal (``journal_mode=DELETE``), never WAL: WAL keeps its index in shared
  memory, which processes on two hosts do not share. Measured on a GlusterFS volume
  mounted twice: with WAL a reader on the second mount saw half of the rows and then
  ``disk I/O error``; with a rollback journal it saw them all;
- ``synchronous=FULL``: a commit is on the server before the writer goes on, so a
  writer's node that dies loses nothing it had committed;
- readers open the file read-only (``mode=ro``): they take shared locks and never write,
  so they cannot leave a journal or a lock behind; a read that a client's stale caches
  fail is tried again on a fresh connection (:class:`SharedReader`). A read that such
  caches tear without an error cannot be told, so readers of a run's ``state.sqlite``
  read the snapshots its driver publishes instead (:mod:`hpcflow.store.snapshot`);
- a commit on a network file system costs tens of milliseconds (about 19 ms on
  GlusterFS here), so writers batch: :class:`BatchedWriter` keeps statements in memory
  and commits them together at most every ``commit_interval`` seconds. What must not
  wait for the next commit goes through ``write(..., now=True)``. The batching never
  loses a finished task: each task's success is also in its worker's journal
  (:mod:`hpcflow.worker.journal`) the moment it ends.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from hpcflow.store.private import private_file

log = logging.getLogger(__name__)

#: Seconds a reader or writer waits for another's lock before it gives up.
BUSY_SECONDS = 60.0


def connect_writer(path: Path) -> sqlite3.Connection:
    """The connection of the one process that writes ``path`` (created ``0600`` if
    missing: SQLite gives its journal the file's mode; another account's file is refused,
    :func:`~hpcflow.store.private.private_file`)."""
    if str(path) != ":memory:":
        private_file(path)
    conn = sqlite3.connect(path, timeout=BUSY_SECONDS, isolation_level=None)
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(f"PRAGMA busy_timeout={int(BUSY_SECONDS * 1000)}")
    return conn


def read_only_uri(path: Path) -> str:
    """``path`` as a read-only SQLite URI (any character in the path is escaped)."""
    return f"{path.resolve().as_uri()}?mode=ro"


def connect_reader(path: Path) -> sqlite3.Connection:
    """A read-only connection: shared locks only, never a write (FileNotFoundError if absent).

    It accepts URIs, so read-only files can be joined with ``ATTACH``.
    """
    if not path.exists():
        raise FileNotFoundError(path)
    conn = sqlite3.connect(read_only_uri(path), uri=True, timeout=BUSY_SECONDS)
    conn.execute(f"PRAGMA busy_timeout={int(BUSY_SECONDS * 1000)}")
    return conn


#: How often a reader tries a query that a network file system failed transiently.
READ_TRIES = 8

_TRANSIENT = (
    "disk i/o error",
    "database is locked",
    "unable to open",
    "busy",
    # A read-only reader that takes the writer's journal for a hot one (left by a crash)
    # would have to roll it back: on GlusterFS a reader on another client saw the
    # journal of a commit in progress without the writer's lock for a moment.
    "readonly database",
    # Pages of two commits at once: a client of GlusterFS serves some pages of the file
    # from its caches and others fresh from the server. Measured with a writer on one
    # mount committing continuously and a reader on another: about one read in twenty
    # failed so ("malformed", "no such table"), and each succeeded on a fresh connection
    # within four tries.
    "malformed",
    "no such table",
    "file is not a database",
)


def transient(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` is what a reader on another client of a network file system sees
    for a moment while the writer commits (its caches one step behind the server)."""
    return isinstance(exc, sqlite3.DatabaseError) and any(
        word in str(exc).lower() for word in _TRANSIENT
    )


class SharedReader:
    """A read-only view of an SQLite file that another process writes, possibly through
    another client of a network file system, with other files joined by ``ATTACH``.

    :meth:`rows` tries a query again when the file system fails it transiently
    (:func:`transient`), each time on a fresh connection, so that neither SQLite's page
    cache nor the kernel's keeps the stale pages that failed it. ``opener`` makes the
    main connection instead of opening ``path`` (a snapshot's image held in memory:
    :func:`hpcflow.store.snapshot.open_image`); files are joined to it all the same.
    """

    def __init__(self, path: Path, opener: Callable[[], sqlite3.Connection] | None = None) -> None:
        self.path = path
        self._opener = opener
        self._attached: dict[str, Path] = {}
        self._conn: sqlite3.Connection | None = self._open()

    def _open(self) -> sqlite3.Connection:
        conn = self._opener() if self._opener is not None else connect_reader(self.path)
        try:
            for name, path in self._attached.items():
                conn.execute(f"ATTACH DATABASE ? AS {name}", (read_only_uri(path),))
        except BaseException:
            conn.close()
            raise
        return conn

    def attach(self, name: str, path: Path) -> None:
        """Join the read-only file ``path`` as schema ``name`` (an identifier of ours)."""
        if not name.isidentifier():
            raise ValueError(f"not a schema name: {name!r}")
        if self._conn is not None:
            self._conn.execute(f"ATTACH DATABASE ? AS {name}", (read_only_uri(path),))
        self._attached[name] = path

    def rows(
        self, sql: str, params: Sequence[Any] = (), *, tries: int | None = None
    ) -> list[tuple[Any, ...]]:
        """``execute(sql, params).fetchall()``, tried again (0.05 s, 0.1 s, ... up to 2 s
        apart, on a fresh connection; ``tries`` times in all, :data:`READ_TRIES` unless
        given) when the file system fails it transiently."""
        tries = READ_TRIES if tries is None else tries
        delay = 0.05
        for attempt in range(1, tries + 1):
            try:
                if self._conn is None:
                    self._conn = self._open()
                return self._conn.execute(sql, tuple(params)).fetchall()
            except sqlite3.Error as exc:
                if attempt == tries or not transient(exc):
                    raise
                log.debug("read of %s failed (%s); trying again in %.2fs", self.path, exc, delay)
                self._drop()
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
        raise AssertionError("unreachable")  # pragma: no cover

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                pass

    def close(self) -> None:
        self._drop()


class BatchedWriter:
    """Statements kept in memory and committed together, at most every ``commit_interval``.

    Subclasses call :meth:`write` for every change; :meth:`flush` commits what waits (the
    owner calls it when it is idle and before it stops); :meth:`read` flushes first, so
    the writer always reads its own writes.
    """

    #: Seconds between two commits of batched writes.
    commit_interval = 1.0

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._pending: list[tuple[str, list[tuple[Any, ...]]]] = []
        self._last_commit = time.monotonic()
        #: Called after each commit, with whether it was asked for at once (``flush``,
        #: ``write(..., now=True)``) rather than batched: the state file's snapshots are
        #: published so (:class:`hpcflow.store.snapshot.SnapshotPublisher`).
        self.on_commit: Callable[[bool], None] | None = None

    def write(self, sql: str, rows: Iterable[tuple[Any, ...]], *, now: bool = False) -> None:
        """Queue ``sql`` for each of ``rows``; commit at once with ``now`` or when due."""
        self._pending.append((sql, list(rows)))
        if now:
            self.flush()
        elif time.monotonic() - self._last_commit >= self.commit_interval:
            self._commit(urgent=False)

    def flush_due(self) -> None:
        """Commit what waits if the interval has passed (cheap when nothing waits)."""
        if self._pending and time.monotonic() - self._last_commit >= self.commit_interval:
            self._commit(urgent=False)

    def flush(self) -> None:
        """Commit everything that waits, in one transaction, as something that must not
        wait (``on_commit`` is told so)."""
        self._commit(urgent=True)

    def _commit(self, *, urgent: bool) -> None:
        self._last_commit = time.monotonic()
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for sql, rows in pending:
                conn.executemany(sql, rows)
        except BaseException:
            if conn.in_transaction:  # SQLite rolls back by itself on some errors (disk full)
                conn.execute("ROLLBACK")
            self._pending = pending + self._pending
            raise
        conn.execute("COMMIT")
        if self.on_commit is not None:
            self.on_commit(urgent)

    def execute(self, sql: str, params: Iterable[Any] = ()) -> None:
        """Run ``sql`` at once, outside any transaction, after committing what waits: for
        what SQLite refuses inside one (``ATTACH``, ``DETACH``)."""
        self._commit(urgent=False)
        self._conn.execute(sql, tuple(params))

    def read(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of a query, after committing what waits."""
        self._commit(urgent=False)
        return self._conn.execute(sql, tuple(params)).fetchall()

    def close(self) -> None:
        """Commit what waits and close the file. A commit that fails here (the disk is
        full) is logged, not raised: the owner is stopping, most likely because of that
        very error, which it has reported; the successes are in the journals."""
        try:
            self.flush()
        except (sqlite3.Error, OSError) as exc:
            log.warning(
                "the last %d batched writes were not committed: %s", len(self._pending), exc
            )
        finally:
            self._conn.close()
