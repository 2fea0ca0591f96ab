"""A damaged memo (``memo.sqlite`` that SQLite cannot read): set aside, and what of it
can still be read.

A memo truncated (a full disk, a copy cut short) or overwritten must not stop every
later run of its workflows with a traceback. The file is renamed
``memo.sqlite.damaged-YYYYMMDD-HHMMSS`` (kept, for whoever wants to look at it) and a new
memo starts with the entries still readable in it; the next run then folds the journals
of runs that did not finish cleanly into it (:meth:`hpcflow.store.memo.Memo.fold_journals`)
as always. Tasks whose success is in neither run again: a journal is removed once its run
has committed it to the memo.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def check(conn: sqlite3.Connection) -> None:
    """Raise :class:`sqlite3.DatabaseError` ("malformed") unless SQLite's quick check of
    the open file finds it sound (it reads every page once, as loading the memo does)."""
    rows = conn.execute("PRAGMA quick_check(1)").fetchall()
    if not rows or rows[0][0] != "ok":
        found = rows[0][0] if rows else "no answer"
        raise sqlite3.DatabaseError(f"database disk image is malformed ({found})")


def set_aside(path: Path) -> Path:
    """Rename the damaged ``path`` (and a rollback journal left beside it, which must not
    be played back into a new file) with a time stamp; the new name."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    path.rename(aside)
    journal = path.with_name(path.name + "-journal")
    if journal.exists():
        journal.rename(aside.with_name(aside.name + "-journal"))
    return aside


def salvage(path: Path, table: str) -> list[tuple[Any, ...]]:
    """The rows of ``table`` that can still be read from the damaged file ``path``, in
    order, up to the first damaged page (none when the file is not a database at all)."""
    rows: list[tuple[Any, ...]] = []
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return rows
    try:
        for row in conn.execute(f"SELECT * FROM {table}"):  # noqa: S608 - our table name
            rows.append(tuple(row))
    except sqlite3.Error as exc:
        log.debug("read %d rows of %s from %s before: %s", len(rows), table, path, exc)
    finally:
        conn.close()
    return rows
