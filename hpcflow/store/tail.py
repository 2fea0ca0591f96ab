"""The last lines of a log file, read without loading the whole file."""

from __future__ import annotations

from pathlib import Path


def tail_lines(path: Path, lines: int = 5, max_bytes: int = 64 * 1024) -> list[str] | None:
    """The last ``lines`` lines of ``path`` (None when it cannot be read)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            data = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    return data.splitlines()[-lines:]
