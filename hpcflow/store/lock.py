"""One active run per workflow: an advisory ``flock`` the kernel drops when the driver dies."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

from hpcflow.errors import RunLockedError
from hpcflow.store.private import private_dir


class RunLock:
    """Hold ``path`` exclusively for the lifetime of a run."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, info: dict[str, Any]) -> None:
        """Take the lock or raise :class:`RunLockedError` naming the run that holds it."""
        # <state root>/locks/<key>.lock: the state root and its locks are private.
        private_dir(self.path.parent, top=self.path.parent.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            os.close(fd)
            raise RunLockedError(
                f"another run of this workflow is active: run {holder.get('run_id', '?')} "
                f"(pid {holder.get('pid', '?')} on {holder.get('host', '?')})",
                hint=f"wait for it, or stop it with `hpcflow cancel {holder.get('run_id', 'RUN')}`",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _read(fd: int) -> dict[str, Any]:
    try:
        data = os.pread(fd, 4096, 0)
        loaded = json.loads(data or b"{}")
        return loaded if isinstance(loaded, dict) else {}
    except (OSError, ValueError):
        return {}
