"""Atomic file writes: write to a temporary file in the same folder, fsync, rename.

A reader, on this host or on another one that shares the file system, sees the old file
or the new one, never a part of it: the rename is atomic, and the data is on disk before
it (unless the caller asks for no fsync: the rename is still atomic for every process
of this host, and only a crash of the machine can lose the data). Files are ``0600`` and
folders made for them ``0700`` whatever the umask (:mod:`hpcflow.store.private`): what
hpcflow writes is its state; a file meant for others to read (a workflow the user
shares) asks for its mode. Workers import this module, so it keeps to the standard
library.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from typing import Any, BinaryIO

from hpcflow.store.private import make_dirs

StrPath = str | os.PathLike[str]


def write_atomic(
    path: StrPath,
    write: Callable[[BinaryIO], object],
    *,
    mode: int = 0o600,
    make_parents: bool = True,
    durable: bool = True,
) -> int:
    """Replace ``path`` with what ``write`` writes to the open file it is given, so
    readers see the old or the new file, never a mix; the new file's size in bytes.

    The file has ``mode`` (``0600`` unless given) from its first byte (the temporary file
    is created ``0600`` and changed before anything is written).
    ``make_parents=False`` skips the ``mkdir -p`` when the caller knows the folder exists
    (a worker's hot path). ``durable=False`` skips the fsync, for a large file that is a
    cache (a value a later run may reuse): on local disk the fsync of 256 MiB costs more
    than writing it. On any error the temporary file is removed.
    """
    target = os.fspath(path)
    folder = os.path.dirname(target) or "."
    if make_parents:
        make_dirs(folder)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            if mode != 0o600:
                os.fchmod(handle.fileno(), mode)
            write(handle)
            size = handle.tell()
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return size


def write_bytes_atomic(
    path: StrPath, data: bytes, *, mode: int = 0o600, make_parents: bool = True
) -> None:
    """Replace ``path`` with ``data`` (:func:`write_atomic`)."""
    write_atomic(path, lambda handle: handle.write(data), mode=mode, make_parents=make_parents)


def write_text_atomic(
    path: StrPath, text: str, *, mode: int = 0o600, make_parents: bool = True
) -> None:
    """Replace ``path`` with ``text`` (UTF-8) so readers see the old or the new file."""
    write_bytes_atomic(path, text.encode("utf-8"), mode=mode, make_parents=make_parents)


def write_json_atomic(path: StrPath, data: Any) -> None:
    """Replace ``path`` with ``data`` as indented, key-sorted JSON (``0600``)."""
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
