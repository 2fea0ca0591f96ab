"""Value files written in the background of the Dask worker that made the value.

On Dask a value travels to its consumers in memory; its file in the run directory
(``persist``, :mod:`hpcflow.store.values`) is only for a later run. So the worker hands
the file to one background thread and goes on with its next task: a chain of large
arrays does not wait for each to reach the disk. The driver waits for the writes before
the run ends (:func:`wait_for_saves`, through ``client.run``), so ``hpcflow result`` and
the next run find every file. A worker killed first leaves its pending values unwritten
(never a part of one: the write is atomic); a later run that needs one makes it again.
Workers import this module: standard library only.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from hpcflow.store.values import save_value

log = logging.getLogger(__name__)

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pending: dict[str, Future[int]] = {}


def save_later(path: str, value: Any, key: bytes) -> None:
    """Write ``value`` to ``path`` (atomically, with its MAC under ``key``:
    :func:`~hpcflow.store.values.save_value`) in this process's background writer."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hpcflow-values")
        _pending[path] = _pool.submit(save_value, path, value, key)


def wait_for_saves(timeout: float) -> list[str]:
    """Wait up to ``timeout`` seconds for this process's pending writes; what went wrong
    (a file not written, and why), one line each."""
    with _lock:
        pending = dict(_pending)
    _, not_done = wait(list(pending.values()), timeout=timeout)
    problems = []
    for path, future in pending.items():
        if future in not_done:
            problems.append(f"{path}: still being written after {timeout:.0f} s")
            continue
        error = future.exception()
        if error is not None:
            problems.append(f"{path}: {type(error).__name__}: {error}")
        with _lock:
            if _pending.get(path) is future:
                del _pending[path]
    return problems
