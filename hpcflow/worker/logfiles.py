"""Files a worker writes for its tasks: folders made once, logs created on first output."""

from __future__ import annotations

import os

_KNOWN_DIRS: set[str] = set()


def ensure_dir(path: str) -> None:
    """``mkdir -p`` that remembers what it made: thousands of tiny tasks share a few folders."""
    if path in _KNOWN_DIRS:
        return
    os.makedirs(path, exist_ok=True)
    _KNOWN_DIRS.add(path)


class LazyFile:
    """A log file that is created only when the first byte arrives."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None

    def write(self, data: bytes) -> None:
        if self.fd is None:
            ensure_dir(os.path.dirname(self.path))
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
            self.fd = os.open(self.path, flags, 0o644)
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
