"""A full or unwritable file system, said plainly: what a run's writes meet when the disk
fills, the quota is exceeded or the folder turns read-only, as a :class:`RunError` that
says what to do, never a traceback."""

from __future__ import annotations

import contextlib
import errno
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from hpcflow.errors import RunError


@contextlib.contextmanager
def storage_errors(where: Path) -> Iterator[None]:
    """Turn a full or unwritable file system under ``where`` into a :class:`RunError`
    that says so and what to do (never a traceback); other errors pass."""
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        problem = storage_problem(exc)
        if problem is None:
            raise
        # SQLite commits are atomic: what was recorded before the failure stands, and the
        # memo holds only finished successes. The cluster is closed by our callers.
        raise RunError(
            f"the run stopped: {problem} ({exc}) under {where}",
            hint="free space (or make the folder writable again), then run the same "
            "command: the run resumes, and tasks that succeeded are not run again",
        ) from None


def storage_problem(exc: BaseException) -> str | None:
    """A plain name for a full or unwritable file system behind ``exc`` (else None)."""
    if isinstance(exc, OSError):
        names = {
            errno.ENOSPC: "the disk is full",
            errno.EDQUOT: "the disk quota is exceeded",
            errno.EROFS: "the file system is read-only",
            errno.EACCES: "the run directory is not writable",
        }
        return names.get(exc.errno or 0)
    text = str(exc).lower()
    if "disk is full" in text or "disk i/o error" in text:
        return "the disk is full (or failing)"
    if "readonly" in text or "read-only" in text:
        return "the run directory is not writable"
    return None
