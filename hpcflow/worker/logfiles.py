"""Files a worker writes for its tasks: folders made once, logs created on first output."""

from __future__ import annotations

import os
import time

from hpcflow.store.private import make_dirs

_KNOWN_DIRS: set[str] = set()
#: Tries of a ``mkdir -p`` that a shared file system answers "no such file" (see below).
MKDIR_TRIES = 6


def ensure_dir(path: str, *, private: bool = False, fresh: bool = False) -> None:
    """``mkdir -p`` that remembers what it made: thousands of tiny tasks share a few folders.
    ``private``: a folder of the run's own (logs, results), made ``0700`` whatever the
    umask (:func:`hpcflow.store.private.make_dirs`); else a task's, under the umask.
    ``fresh``: made (or found) now, whatever this process made before: a task's output
    folder, just before the task runs (a clean-up may have removed it since, or this
    node's client may not show yet a folder made through another).

    On a shared file system a folder another node has just made can still be unknown to
    this node's client for a moment (GlusterFS answered a task's ``mkdir tasks/SLUG`` with
    ENOENT while ``tasks/`` had just been made elsewhere, and ``mkdir -p results`` with
    EEXIST while ``results`` did not yet look like a folder): that is tried again, briefly.
    """
    if path in _KNOWN_DIRS and not fresh:
        return
    for attempt in range(1, MKDIR_TRIES + 1):
        try:
            make_dirs(path) if private else os.makedirs(path, exist_ok=True)
            break
        except (FileNotFoundError, FileExistsError):
            if attempt == MKDIR_TRIES:
                raise
            time.sleep(0.05 * 2**attempt)
    _KNOWN_DIRS.add(path)


class LazyFile:
    """A log file that is created only when the first byte arrives."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None

    def write(self, data: bytes) -> None:
        if self.fd is None:
            ensure_dir(os.path.dirname(self.path), private=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
            self.fd = os.open(self.path, flags, 0o600)  # a log of the run: private
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
