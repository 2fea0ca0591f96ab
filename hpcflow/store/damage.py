"""State files SQLite cannot read: what counts as damage, and the error a reader raises.

A file truncated (a full disk, a copy cut short), overwritten or emptied reads as
"database disk image is malformed", "file is not a database" or "no such table". On a
network file system a reader can see the first two for a moment while the writer commits
(:func:`hpcflow.store.sqlite.transient`): a reader tries again first, and only damage that
lasts through its tries reaches here. Such a file is a :class:`StateDamaged` for its run,
with what to do, never a traceback; other runs read on.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

from hpcflow.errors import RunError

log = logging.getLogger(__name__)

#: SQLite's words for a file that is not (or no longer) a sound database of ours.
_DAMAGE = ("malformed", "not a database", "no such table", "no such column", "encrypted")


def is_damage(exc: BaseException) -> bool:
    """Whether ``exc`` says the file itself is damaged (not busy, locked or missing)."""
    return isinstance(exc, sqlite3.DatabaseError) and any(
        word in str(exc).lower() for word in _DAMAGE
    )


def is_cut_commit(exc: BaseException) -> bool:
    """Whether ``exc`` is what a read-only reader gets from a file whose writer stopped in
    the middle of a commit (``kill -9``, a lost node): SQLite finds the writer's journal
    with no writer holding the file's lock (a "hot" journal) and must roll it back, which
    a read-only connection cannot."""
    return isinstance(exc, sqlite3.OperationalError) and "readonly database" in str(exc).lower()


def journal_of(path: Path) -> Path:
    """SQLite's rollback journal of ``path`` (there while a commit is under way)."""
    return path.with_name(path.name + "-journal")


def roll_back_cut_commit(path: Path) -> bool:
    """Roll back the commit ``path``'s writer left half done, as the next writer would;
    whether it could. Only for a journal that stayed hot through a reader's tries (a live
    writer holds the lock, and SQLite then sees no hot journal): opening the file to
    write takes the lock, and SQLite restores the pages from the journal. A writer that
    does hold the lock (busy) is left alone."""
    from hpcflow.store.sqlite import connect_writer

    try:
        conn = connect_writer(path)
    except (OSError, sqlite3.Error) as exc:
        log.warning("cannot open %s to roll back its cut commit: %s", path, exc)
        return False
    try:
        conn.execute("PRAGMA busy_timeout=1000")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
    except sqlite3.Error as exc:
        log.warning("cannot roll back the cut commit of %s: %s", path, exc)
        return False
    finally:
        conn.close()
    log.warning(
        "%s: its writer stopped in the middle of a commit; rolled back to the commit before",
        path,
    )
    return True


class StateDamaged(RunError, sqlite3.DatabaseError):
    """A run's ``state.sqlite`` that SQLite cannot read; ``path`` names it. Still an
    :class:`sqlite3.DatabaseError`, so code that falls back on one (plan in full when an
    earlier run cannot be read) goes on doing so."""

    def __init__(self, path: Path, reason: str) -> None:
        run_dir = path.parent
        super().__init__(
            f"the state of run {run_dir.name} is damaged: {path} ({reason})",
            hint=(
                "SQLite cannot read the file (truncated or overwritten); other runs are not "
                "affected, and a re-run of the workflow decides from its memo, not from "
                f"this file. Keep the run aside: mv {run_dir} {run_dir}.damaged"
            ),
        )
        self.path = path
