"""State files SQLite cannot read: what counts as damage, and the error a reader raises.

A file truncated (a full disk, a copy cut short), overwritten or emptied reads as
"database disk image is malformed", "file is not a database" or "no such table". On a
network file system a reader can see the first two for a moment while the writer commits
(:func:`hpcflow.store.sqlite.transient`): a reader tries again first, and only damage that
lasts through its tries reaches here. Such a file is a :class:`StateDamaged` for its run,
with what to do, never a traceback; other runs read on.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hpcflow.errors import RunError

#: SQLite's words for a file that is not (or no longer) a sound database of ours.
_DAMAGE = ("malformed", "not a database", "no such table", "no such column", "encrypted")


def is_damage(exc: BaseException) -> bool:
    """Whether ``exc`` says the file itself is damaged (not busy, locked or missing)."""
    return isinstance(exc, sqlite3.DatabaseError) and any(
        word in str(exc).lower() for word in _DAMAGE
    )


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
