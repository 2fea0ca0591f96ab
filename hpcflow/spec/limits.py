"""How large a file hpcflow reads as a workflow, an included workflow or a sample sheet.

A workflow's files may come from someone else (a shared sample sheet, an included
pipeline); a huge one must not take the login node's memory. Each is read only up to its
cap (the size is checked before reading, and no more than the cap is ever read, so a
file that grows meanwhile is refused too). ``HPCFLOW_MAX_FILE_MIB`` raises or lowers
every cap at once.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Largest workflow file (or included workflow file), in bytes.
MAX_WORKFLOW_BYTES = 16 * 2**20
#: Largest sample sheet (``from_table``), in bytes.
MAX_TABLE_BYTES = 64 * 2**20
#: The variable that sets every cap, in MiB.
CAP_VARIABLE = "HPCFLOW_MAX_FILE_MIB"


class InputTooLarge(OSError):
    """A file is larger than hpcflow reads; :attr:`hint` says how to go on."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def cap_for(default: int) -> int:
    """The cap in bytes: ``default``, or what ``HPCFLOW_MAX_FILE_MIB`` sets."""
    setting = os.environ.get(CAP_VARIABLE, "").strip()
    try:
        return int(float(setting) * 2**20) if setting else default
    except ValueError:
        return default


def read_capped(path: Path, what: str, default: int = MAX_WORKFLOW_BYTES) -> str:
    """The UTF-8 text of ``path`` (``what`` it is, for the message), or
    :class:`InputTooLarge` when it is larger than the cap; other errors as ``open``
    and decoding raise them."""
    cap = cap_for(default)
    size = os.stat(path).st_size
    if size <= cap:
        with open(path, "rb") as fh:
            data = fh.read(cap + 1)
        if len(data) <= cap:
            return data.decode("utf-8")
        size = len(data)
    raise InputTooLarge(
        f"{what} is larger than {_mib(cap)} ({_mib(size)} or more)",
        f"keep {what}s under {_mib(cap)}: split it, or sweep with foreach: ranges instead "
        f"of listing values; {CAP_VARIABLE}=N sets the cap to N MiB",
    )


def _mib(size: int) -> str:
    return f"{size / 2**20:,.1f} MiB" if size % 2**20 else f"{size // 2**20:,} MiB"
