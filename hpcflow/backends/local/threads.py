"""The threads engine: local runs of command tasks without a Dask cluster.

A run whose tasks are all shell (or MPI) commands spends its time in child processes;
the driver only has to start them and collect their outcomes. For such runs the
embedded Dask cluster is pure overhead: importing and starting it costs about 0.75 s
before the first task, and each chunk's result travels driver → scheduler → worker →
scheduler → driver. Here the same chunks (:func:`hpcflow.runtime.execute.run_chunk`)
run on a pool of threads inside the driver process, each chunk holding as many CPU slots
as its tasks ask for, and a finished chunk is handed back through the same future
callback the driver uses with Dask.

:class:`ThreadsClient` offers the small part of ``distributed.Client`` the driver uses
(``submit``, ``processing``, ``scheduler_info``, ``run``). Nothing user-supplied runs in
the driver process: Python tasks are started as child processes (``inline=False``).
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from hpcflow.runtime.execute import LIVE, run_chunk

log = logging.getLogger(__name__)

#: The one "worker" the driver sees when it asks where tasks run.
ADDRESS = "threads://127.0.0.1"


class ChunkFuture(Future):  # type: ignore[type-arg]
    """A chunk's result, named by ``key`` as a Dask future is."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key


class ThreadsClient:
    """Runs chunks of task calls on ``slots`` threads; a chunk holds ``cpus`` slots."""

    def __init__(self, slots: int) -> None:
        self.slots = max(1, slots)
        self._free = self.slots
        self._lock = threading.Lock()
        self._waiting: deque[tuple[ChunkFuture, list[Any], int]] = deque()
        self._running: dict[str, int] = {}
        self._pool = ThreadPoolExecutor(max_workers=self.slots, thread_name_prefix="hpcflow")

    def submit(
        self,
        func: Callable[..., Any],
        calls: list[Any],
        *,
        key: str,
        resources: dict[str, float] | None = None,
        pure: bool = False,
    ) -> ChunkFuture:
        """Queue one chunk; it starts once ``resources['cpus']`` slots are free."""
        if func is not run_chunk:
            raise ValueError("the threads engine runs chunks of task calls only")
        cpus = int((resources or {}).get("cpus", 1))
        if cpus > self.slots:
            raise ValueError(f"a chunk needs {cpus} CPU slots; this engine has {self.slots}")
        future = ChunkFuture(key)
        with self._lock:
            self._waiting.append((future, calls, cpus))
        self._dispatch()
        return future

    def _dispatch(self) -> None:
        """Start every waiting chunk that fits the free slots, oldest first."""
        starting: list[tuple[ChunkFuture, list[Any], int]] = []
        with self._lock:
            kept: deque[tuple[ChunkFuture, list[Any], int]] = deque()
            while self._waiting:
                item = self._waiting.popleft()
                if item[2] <= self._free:
                    self._free -= item[2]
                    self._running[item[0].key] = item[2]
                    starting.append(item)
                else:
                    kept.append(item)
            self._waiting = kept
        for future, calls, _ in starting:
            self._pool.submit(self._run, future, calls)

    def _run(self, future: ChunkFuture, calls: list[Any]) -> None:
        try:
            result = run_chunk(calls, inline=False)
        except BaseException as exc:  # reported through the future, as Dask would
            error: BaseException | None = exc
        else:
            error = None
        with self._lock:
            self._free += self._running.pop(future.key, 0)
        self._dispatch()
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)

    # -- the parts of distributed.Client the driver asks for ----------------------------

    def processing(self) -> dict[str, list[str]]:
        """The keys of the chunks running now, all on the one local "worker"."""
        with self._lock:
            return {ADDRESS: list(self._running)}

    def scheduler_info(self, n_workers: int = -1) -> dict[str, Any]:
        return {"workers": {ADDRESS: {"host": "127.0.0.1", "name": "threads"}}}

    def run(self, func: Callable[[], Any], wait: bool = True) -> dict[str, Any]:
        """Call ``func`` here (the driver's process is the only "worker")."""
        return {ADDRESS: func()}

    def close(self) -> None:
        """Drop chunks not started and wait for the running ones."""
        with self._lock:
            dropped = list(self._waiting)
            self._waiting.clear()
        for future, _, _ in dropped:
            future.cancel()
        self._pool.shutdown(wait=True)


class LocalThreads:
    """A context manager with the same shape as ``LocalCluster``: ``.client`` inside."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.client: ThreadsClient | None = None

    def __enter__(self) -> LocalThreads:
        LIVE.cancelled = False  # an earlier run in this process may have been cancelled
        self.client = ThreadsClient(self.slots)
        log.info("threads engine: %d slots in process %d", self.slots, os.getpid())
        return self

    def __exit__(self, *exc: object) -> None:
        if self.client is not None:
            self.client.close()
