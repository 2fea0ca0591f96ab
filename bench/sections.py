"""Sections of bench/RESULTS.md that one benchmark script owns.

A section is the text between ``<!-- section:NAME -->`` and ``<!-- /section:NAME -->``;
each script rewrites only its own, so the results of several benchmarks live in one file.
"""

from __future__ import annotations

from pathlib import Path


def markers(name: str) -> tuple[str, str]:
    """The opening and closing marker lines of section ``name``."""
    return f"<!-- section:{name} -->", f"<!-- /section:{name} -->"


def write_section(path: Path, text: str, name: str) -> None:
    """Replace section ``name`` of ``path`` with ``text`` (which holds both markers), or
    append it; the rest of the file stays as it is."""
    start, end = markers(name)
    old = path.read_text() if path.exists() else "# Benchmark results\n"
    if start in old and end in old:
        before, rest = old.split(start, 1)
        after = rest.split(end, 1)[1].lstrip("\n")
        new = before + text + after
    else:
        new = old.rstrip("\n") + "\n\n" + text
    path.write_text(new)
