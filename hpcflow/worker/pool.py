"""The pool engine: local runs without a Dask cluster.

Most of a local run's time is spent in the tasks' own processes; the driver only has to
start them and collect their outcomes. The embedded Dask cluster costs about 0.75 s
before the first task (importing and starting it) and a round trip driver → scheduler →
worker → scheduler → driver per chunk. The pool engine runs the same chunks
(:func:`hpcflow.worker.chunk.run_chunk`) without it:

* commands (shell, argv, MPI launchers) are started from a pool of threads in the driver
  process, each chunk holding as many CPU slots as its tasks ask for;
* Python calls run in worker processes (:class:`PythonWorkers`), never in the driver, so
  a crash or a leak in user code costs a worker, not the run: a chunk whose worker died
  is run again on a fresh one, twice at most, as Dask does (``allowed-failures``).

A finished chunk is handed back through the same future callback the driver uses with
Dask. :class:`PoolClient` offers the small part of ``distributed.Client`` the driver
uses (``submit``, ``processing``, ``scheduler_info``, ``run``).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool, ProcessPoolExecutor
from typing import Any

from hpcflow.worker.calls import Outcome, TaskCall
from hpcflow.worker.chunk import run_chunk
from hpcflow.worker.groups import LIVE, kill_running
from hpcflow.worker.guardian import GUARDIAN, MARK_VAR, marked_by
from hpcflow.worker.lifelines import die_with, die_with_parent, is_alive, start_ticks
from hpcflow.worker.nomain import worker_context
from hpcflow.worker.shells import SHELLS

log = logging.getLogger(__name__)

#: How a Python worker's own mark begins (then its pid and start ticks).
WORKER_MARK = "pw"

#: The one "worker" the driver sees when it asks where tasks run.
ADDRESS = "pool://127.0.0.1"


class WorkerLost(RuntimeError):
    """A chunk's worker process died every time the chunk was run."""


class ChunkFuture(Future):  # type: ignore[type-arg]
    """A chunk's result, named by ``key`` as a Dask future is."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key


def _worker_start(workdir: str, marks: dict[str, str], driver: int, ticks: int | None) -> None:
    """In each Python worker: the task's folder is the process's (tasks import from it,
    and run in-process only there); Ctrl-C is the driver's to handle.

    The worker dies with the fork server that started it, and with the driver (process
    ``driver``, started at ``ticks``) that it serves; what its tasks start carries the
    driver's guardian ``marks``, so the driver's death kills that too
    (:mod:`hpcflow.worker.guardian`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    die_with(driver, ticks)
    # Its own mark too: what its tasks started is ended if it dies (end_orphans).
    own = f"{WORKER_MARK}{os.getpid()}.{start_ticks(os.getpid())}"
    mark = marks.get(MARK_VAR)
    os.environ[MARK_VAR] = f"{mark}:{own}" if mark else own
    os.chdir(workdir)


def _of_dead_worker(marks: list[str]) -> bool:
    """Whether one of ``marks`` is that of a Python worker that has ended."""
    for mark in marks:
        if mark.startswith(WORKER_MARK):
            pid, _, ticks = mark[len(WORKER_MARK) :].partition(".")
            if pid.isdigit() and ticks.isdigit() and not is_alive(int(pid), int(ticks)):
                return True
    return False


def end_orphans() -> int:
    """SIGKILL what the Python tasks of dead workers started (a worker killed mid-task
    leaves its task's children running, beside the task's next attempt); how many."""
    mine = GUARDIAN.token  # this driver's workers only (another run's are its own to end)
    victims = [
        pid
        for pid in marked_by(lambda marks: (not mine or mine in marks) and _of_dead_worker(marks))
        if pid != os.getpid()
    ]
    for pid in victims:
        try:
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
    if victims:
        log.warning("killed %d process(es) that the tasks of a dead worker left", len(victims))
    return len(victims)


def _marks() -> dict[str, str]:
    """The guardian's mark (:mod:`hpcflow.worker.guardian`) a worker's tasks carry."""
    mark = GUARDIAN.with_env(None).get(MARK_VAR)
    return {MARK_VAR: mark} if mark else {}


def in_worker(call: TaskCall) -> bool:
    """Whether a call runs in a Python worker: a Python call without a timeout (a call
    with one runs as a child process, which the timeout can kill)."""
    return call.kind == "python" and call.timeout is None and not call.wrap


class PythonWorkers:
    """``size`` worker processes for Python calls, replaced when one dies.

    Started by a fork server that has imported only the task runner: a worker does not
    inherit the driver's threads, locks or memory, and a new one can be made mid-run.
    """

    #: Runs of a chunk after the first when its worker dies (Dask's allowed-failures).
    retries = 2

    def __init__(self, size: int, workdir: str) -> None:
        self.size = max(1, size)
        self.workdir = workdir
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None

    def _current(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                # (Not the parent's main script: a notebook-style script would run again.)
                context = worker_context(["hpcflow.worker.chunk"])
                self._pool = ProcessPoolExecutor(
                    self.size,
                    mp_context=context,
                    initializer=_worker_start,
                    initargs=(self.workdir, _marks(), os.getpid(), start_ticks(os.getpid())),
                )
            return self._pool

    def _replace(self, broken: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is broken:
                self._pool = None
        # Its workers end (the executor ends the others when one dies): wait for them.
        processes = list(getattr(broken, "_processes", None) or {})
        broken.shutdown(wait=False, cancel_futures=True)
        for pid in processes:
            ticks = start_ticks(pid)
            deadline = time.monotonic() + 5
            while ticks is not None and is_alive(pid, ticks) and time.monotonic() < deadline:
                time.sleep(0.05)

    def run(self, calls: list[TaskCall]) -> list[Outcome]:
        """Run ``calls`` in a worker; again on a fresh one if it dies (``retries``)."""
        for tries in range(1, self.retries + 2):
            pool = self._current()
            try:
                return pool.submit(run_chunk, calls).result()
            except BrokenProcessPool:
                self._replace(pool)
                end_orphans()  # before the tasks run again
                if LIVE.cancelled:
                    raise
                log.warning(
                    "a Python worker process died running %d task(s) (try %d of %d)",
                    len(calls),
                    tries,
                    self.retries + 1,
                )
        raise WorkerLost(
            f"the worker process died each of the {self.retries + 1} times these tasks ran"
        )

    def kill(self) -> None:
        """SIGKILL every worker (a cancel: Python calls cannot be interrupted otherwise)."""
        with self._lock:
            pool = self._pool
        if pool is None:
            return
        # ProcessPoolExecutor has no public way to stop running calls before 3.14.
        for process in list(getattr(pool, "_processes", {}).values()):
            process.kill()

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


class PoolClient:
    """Runs chunks of task calls on ``slots`` CPU slots; a chunk holds ``cpus`` slots."""

    def __init__(self, slots: int, workdir: str) -> None:
        self.slots = max(1, slots)
        self._free = self.slots
        self._lock = threading.Lock()
        self._waiting: deque[tuple[ChunkFuture, list[TaskCall], int]] = deque()
        self._running: dict[str, int] = {}
        self._threads = ThreadPoolExecutor(max_workers=self.slots, thread_name_prefix="hpcflow")
        self.python = PythonWorkers(self.slots, workdir)

    def submit(
        self,
        func: Callable[..., Any],
        calls: list[TaskCall],
        *,
        key: str,
        resources: dict[str, float] | None = None,
        pure: bool = False,
    ) -> ChunkFuture:
        """Queue one chunk; it starts once ``resources['cpus']`` slots are free."""
        if func is not run_chunk:
            raise ValueError("the pool engine runs chunks of task calls only")
        cpus = int((resources or {}).get("cpus", 1))
        if cpus > self.slots:
            raise ValueError(f"a chunk needs {cpus} CPU slots; this engine has {self.slots}")
        future = ChunkFuture(key)
        with self._lock:
            self._waiting.append((future, calls, cpus))
        self._dispatch()
        return future

    def submit_chunks(
        self,
        chunks: list[list[TaskCall]],
        *,
        keys: list[str],
        resources: dict[str, float] | None = None,
    ) -> list[ChunkFuture]:
        """Queue several chunks (the driver's round), each under its key."""
        return [
            self.submit(run_chunk, calls, key=key, resources=resources)
            for calls, key in zip(chunks, keys, strict=True)
        ]

    def _dispatch(self) -> None:
        """Start every waiting chunk that fits the free slots, oldest first."""
        starting: list[tuple[ChunkFuture, list[TaskCall], int]] = []
        with self._lock:
            kept: deque[tuple[ChunkFuture, list[TaskCall], int]] = deque()
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
            self._threads.submit(self._run, future, calls)

    def _run(self, future: ChunkFuture, calls: list[TaskCall]) -> None:
        try:
            result = self._run_calls(calls)
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

    def _run_calls(self, calls: list[TaskCall]) -> list[Outcome]:
        """Commands here (Python calls with a timeout as child processes), the other
        Python calls in a worker process; outcomes in the calls' order."""
        here = [c for c in calls if not in_worker(c)]
        there = [c for c in calls if in_worker(c)]
        outcomes = run_chunk(here, inline=False) if here else []
        if there:
            try:
                outcomes.extend(self.python.run(there))
            except BrokenProcessPool:  # killed by a cancel
                outcomes.extend(run_chunk(there))  # LIVE.cancelled: all come back cancelled
            except WorkerLost as exc:  # the commands' outcomes stand
                now, why = time.time(), f"worker lost: {exc}"
                outcomes.extend(Outcome.failed(c, now, why) for c in there)
        order = {c.index: k for k, c in enumerate(calls)}
        return sorted(outcomes, key=lambda o: order[o.index])

    # -- the parts of distributed.Client the driver asks for ----------------------------

    def processing(self) -> dict[str, list[str]]:
        """The keys of the chunks running now, all on the one local "worker"."""
        with self._lock:
            return {ADDRESS: list(self._running)}

    def scheduler_info(self, n_workers: int = -1) -> dict[str, Any]:
        return {"workers": {ADDRESS: {"host": "127.0.0.1", "name": "pool"}}}

    def run(
        self, func: Callable[[], Any], wait: bool = True, callback_timeout: float | None = None
    ) -> dict[str, Any]:
        """Call ``func`` here (the process that starts every command); it returns at once,
        so ``callback_timeout`` has nothing to bound."""
        return {ADDRESS: func()}

    def close(self) -> None:
        """Drop chunks not started, stop Python calls if the run was cancelled, and
        wait for the running chunks."""
        with self._lock:
            dropped = list(self._waiting)
            self._waiting.clear()
        for future, _, _ in dropped:
            future.cancel()
        if LIVE.cancelled:
            self.python.kill()
        self._threads.shutdown(wait=True)
        self.python.close()
        if LIVE.cancelled:
            end_orphans()  # what the killed workers' tasks started
        SHELLS.close()  # the shared shells' work is done


class LocalPool:
    """A context manager with the same shape as ``LocalCluster``: ``.client`` inside."""

    def __init__(self, slots: int, workdir: str) -> None:
        self.slots = slots
        self.workdir = workdir
        self.client: PoolClient | None = None

    def __enter__(self) -> LocalPool:
        LIVE.cancelled = False  # an earlier run in this process may have been cancelled
        self.client = PoolClient(self.slots, self.workdir)
        log.info("pool engine: %d slots in process %d", self.slots, os.getpid())
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if self.client is None:
            return
        if exc_type is not None:
            # The run stopped on an error (a full disk, say): stop its tasks, as closing
            # a Dask cluster stops its workers, rather than wait for them.
            kill_running()
        self.client.close()
