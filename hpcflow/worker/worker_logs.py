"""Where a worker sends an attempt's stdout and stderr: a file per attempt and stream, or
records in this process's own per-worker log file (``task_logs: per-worker``; the format
is :mod:`hpcflow.store.tasklogs`).

A process appends to one file per run's logs folder, named after its node, its pid and a
random token, so no two processes (on one node or on several) ever write one file. A
process forked after it opened its file (the pool's fork server) opens one of its own on
its first write.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import threading
from typing import Protocol

from hpcflow.store.tasklogs import SUFFIX, encode_record, record_key
from hpcflow.worker.logfiles import LazyFile, ensure_dir

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class Sink(Protocol):
    """Where one attempt's stream goes."""

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...


class WorkerLogs:
    """This process's per-worker log files, one per run's logs folder."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: dict[str, int] = {}
        self._pid = os.getpid()

    def append(self, folder: str, key: str, data: bytes) -> None:
        """Append one record of ``data`` for ``key`` to this process's file in ``folder``."""
        record = encode_record(key, data)
        with self._lock:
            fd = self._file(folder)
            view = memoryview(record)
            while view:
                view = view[os.write(fd, view) :]

    def _file(self, folder: str) -> int:
        if self._pid != os.getpid():  # forked: the parent's files are the parent's
            self._files = {}
            self._pid = os.getpid()
        fd = self._files.get(folder)
        if fd is None:
            ensure_dir(folder, private=True)
            host = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
            name = f"{_UNSAFE.sub('_', host)[:64]}-{os.getpid()}-{secrets.token_hex(3)}{SUFFIX}"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC
            fd = self._files[folder] = os.open(os.path.join(folder, name), flags, 0o600)
        return fd

    def close(self) -> None:
        """Close every file (the next record opens a new one)."""
        with self._lock:
            for fd in self._files.values():
                if self._pid == os.getpid():
                    os.close(fd)
            self._files = {}


#: The per-worker log files of this process.
WORKER_LOGS = WorkerLogs()


class RecordSink:
    """One attempt's stream as records in this process's per-worker log file."""

    def __init__(self, folder: str, per_task_path: str) -> None:
        self.folder = folder
        self.key = record_key(per_task_path)

    def write(self, data: bytes) -> None:
        if data:
            WORKER_LOGS.append(self.folder, self.key, data)

    def close(self) -> None:
        pass


def open_sink(per_task_path: str, logs: str) -> Sink:
    """Where an attempt's stream goes: its own file ``per_task_path`` (made on the first
    byte), or, when ``logs`` names the run's per-worker logs folder, records there."""
    return RecordSink(logs, per_task_path) if logs else LazyFile(per_task_path)
