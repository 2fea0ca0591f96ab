"""The driver: feeds ready tasks to Dask in adaptive chunks and records every outcome.

Design for speed: the graph is walked once (dependency counters, no rescans); ready tasks
of the same resource shape are grouped into chunks sized so each chunk runs for about
``target_chunk_seconds``; results come back through a queue filled by future callbacks, and
each batch of outcomes is one SQLite transaction.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import math
import queue
import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hpcflow.dag.graph import TaskGraph
from hpcflow.engine.calls_factory import CallFactory
from hpcflow.engine.chunk_submit import submit_chunks
from hpcflow.engine.ledger import OutcomeLedger
from hpcflow.engine.pools import pool_resource
from hpcflow.errors import WorkersGone
from hpcflow.store import statedb as st
from hpcflow.store.memo import Memo
from hpcflow.worker.calls import Outcome, TaskCall
from hpcflow.worker.checkpoints import signal_attempts
from hpcflow.worker.groups import kill_on_workers
from hpcflow.worker.made import outcome_of, run_made
from hpcflow.worker.value_writes import wait_for_saves

log = logging.getLogger(__name__)

#: Seconds the driver waits for the result of an engine task that has ended while the
#: cluster has no worker at all. A result lost with its worker after the task ended is
#: made again by Dask on another worker (the driver waits for it, as long as it takes);
#: with no worker left it would wait for ever: it gives the chunk up as lost instead, and
#: its own retry decides.
FETCH_SECONDS = 30.0
#: Seconds between two looks, while a result is awaited, at whether any worker is left.
FETCH_STEP = 1.0
#: Seconds the results of a round's finished engine tasks may take to come in one batch
#: (milliseconds when their workers live); then they are fetched one by one.
GATHER_SECONDS = 5.0


def fetch_result(
    future: Any, workers_gone: Callable[[], str | None] | None, any_worker: Callable[[], bool]
) -> Any:
    """``future``'s result. Raises :class:`WorkersGone` as soon as ``workers_gone`` says no
    worker is left nor will come, and the timeout's error once ``any_worker`` has said no
    for :data:`FETCH_SECONDS` in a row; while some worker is there it waits."""
    alone_since: float | None = None
    while True:
        try:
            return future.result(timeout=FETCH_STEP)
        except TimeoutError:
            why = workers_gone() if workers_gone is not None else None
            if why is not None:
                raise WorkersGone(why) from None
            if any_worker():
                alone_since = None
                continue
            now = time.monotonic()
            alone_since = now if alone_since is None else alone_since
            if now - alone_since >= FETCH_SECONDS:
                raise


def has_workers(client: Any) -> bool:
    """Whether ``client``'s cluster has a worker now (an engine that cannot say: yes)."""
    nthreads = getattr(client, "nthreads", None)
    if nthreads is None:
        return True
    try:
        return bool(nthreads())
    except Exception:  # noqa: BLE001 - a scheduler that does not answer has none to offer
        return False


#: How long the end of a run waits for the workers to write the value files they hold.
VALUE_FILES_SECONDS = 300.0


#: Longest the driver waits for the workers to send a checkpoint signal.
SIGNAL_SECONDS = 10.0


class Observer(Protocol):
    """Receives progress: per task name, how many tasks are in each state."""

    def update(self, counts: dict[str, dict[str, int]]) -> None: ...


@dataclass(frozen=True)
class GroupKey:
    """Tasks that can share a chunk: same resource shape."""

    cpus: int
    #: Whole GPUs, or a share of one (Dask counts resources in fractions).
    gpus: float
    #: The pool whose workers run them (a pilot run with several pools), else None.
    pool: str | None = None

    def dask_resources(self) -> dict[str, float]:
        res: dict[str, float] = {"cpus": float(self.cpus)}
        if self.gpus:
            res["GPU"] = float(self.gpus)
        if self.pool is not None:
            res[pool_resource(self.pool)] = 1.0
        return res


@dataclass(frozen=True)
class PoolPlan:
    """A pilot run's pools, as its driver sees them: each task definition's pool (by
    index), each pool's slots (the in-flight limit of its tasks, so tasks waiting for a
    pool whose allocation is still queued never hold back another pool's), and what to
    call when the last task of a pool in ``releasable`` has ended."""

    of_template: dict[int, str]
    slots: dict[str, int]
    releasable: frozenset[str] = frozenset()
    on_done: Callable[[str], object] | None = None


@dataclass
class DriverResult:
    counts: dict[str, int]
    failed: list[int] = field(default_factory=list)
    cancelled: bool = False
    drained: bool = False  # stopped early: the rest cannot finish before the walltime


def worker_host(address: str, info: dict[str, Any]) -> str:
    """A worker's node, as users know it: ``NODE`` of a pilot worker named ``rank-N@NODE``,
    this machine's name for a worker on loopback, else the address's host."""
    name = str(info.get("name", ""))
    if "@" in name:
        return name.rsplit("@", 1)[1]
    host = str(info.get("host") or address.split("://", 1)[-1].rsplit(":", 1)[0])
    if host.startswith("127.") or host in ("localhost", "::1"):
        return socket.gethostname()
    return host


def _all_workers(client: Any) -> dict[str, Any]:
    try:
        info = client.scheduler_info(n_workers=-1)  # newer distributed lists 5 by default
    except TypeError:  # older distributed: always all of them
        info = client.scheduler_info()
    return dict(info.get("workers", {}))


class Driver:
    """Runs the ``run`` subset of ``graph`` on a Dask ``client`` with ``slots`` CPU slots."""

    target_chunk_seconds = 0.3
    #: The most chunks a second all slots together should end, at full chunks.
    central_chunks_per_second = 25.0
    #: Below this mean duration a task may run in a shared shell even alone in its chunk.
    tiny_seconds = 0.05
    max_chunk = 256
    #: Seconds between two updates of where running tasks run.
    where_interval = 2.0

    def __init__(
        self,
        graph: TaskGraph,
        factory: CallFactory,
        db: st.StateDB,
        memo: Memo,
        client: Any,
        slots: int,
        run_id: str,
        observer: Observer | None = None,
        deadline: float | None = None,
        drain_margin: float = 30.0,
        cancel_request: Path | None = None,
        values_in_memory: bool = False,
        pools: PoolPlan | None = None,
        workers_gone: Callable[[], str | None] | None = None,
    ) -> None:
        self.graph = graph
        #: Why no worker is left nor will come (the allocation's worker launch ended and
        #: took every worker with it), or None: asked about once a second.
        self.workers_gone = workers_gone
        self._last_workers_check = 0.0
        self.pools = pools
        #: Tasks in flight per pool, and tasks of each pool not ended yet.
        self._inflight_in: dict[str | None, int] = {}
        self._pool_left: dict[str, int] = {}
        self._pool_of_key: dict[str, str | None] = {}
        #: Python tasks hand values over as Dask futures (:mod:`hpcflow.worker.made`),
        #: not files: on a Dask cluster, never on the pool engine.
        self.values_in_memory = values_in_memory
        #: Producers' futures of their Made, kept while a consumer may still need them.
        self._made: dict[int, Any] = {}
        self._made_any = False
        self._consumers_left: dict[int, int] = {}
        self._made_keys: dict[str, str] = {}
        #: A file whose appearance asks the driver to cancel the run (``hpcflow cancel``).
        self.cancel_request = cancel_request
        self._last_cancel_check = 0.0
        #: time.time() by which every started task must be done (the allocation's end).
        self.deadline = deadline
        self.drain_margin = drain_margin
        self._held: set[int] = set()
        #: Attempts sent their checkpoint signal; whether any task asks for one.
        self._signalled: set[tuple[int, int]] = set()
        self._checkpointing = any(t.checkpoint is not None for t in graph.templates)
        self._queued_seconds = 0.0  # estimated work submitted and not yet finished
        self.factory = factory
        self.db = db
        self.memo = memo
        self.ledger = OutcomeLedger(graph, factory, db, memo, run_id)
        self.client = client
        self.slots = max(1, slots)
        self.run_id = run_id
        self.observer = observer
        self._done: queue.Queue[Any] = queue.Queue()
        self._ready: dict[GroupKey, deque[int]] = {}
        self._retry_heap: list[tuple[float, int]] = []
        self._inflight = 0
        self._chunk_ids = itertools.count()
        self._mean_seconds: dict[int, float] = {}
        self._observed: dict[int, int] = {}
        self._observed_all = 0
        self._mean_all = 0.0
        self._last_progress = 0.0
        self._calls_by_key: dict[str, list[TaskCall]] = {}
        self._last_where = time.monotonic()
        #: Each worker's node, by address (workers seldom change; asking is not cheap).
        self._worker_hosts: dict[str, str] = {}

    # -- public -------------------------------------------------------------------------

    def run(
        self,
        run: list[bool],
        attempts: list[int] | None = None,
        states: list[st.TaskState] | None = None,
    ) -> DriverResult:
        """Run the tasks marked in ``run``; ``attempts`` continues attempt numbering;
        ``states`` are those of the tasks that do not run (default: cached)."""
        graph = self.graph
        n = len(graph.instances)
        self.state: list[st.TaskState] = [
            st.PENDING if run[i] else (states[i] if states is not None else st.CACHED)
            for i in range(n)
        ]
        self.attempt = list(attempts) if attempts is not None else [0] * n
        self.dependents = graph.dependents()
        self.waiting = [0] * n
        for inst in graph.instances:
            if run[inst.index]:
                self.waiting[inst.index] = sum(1 for d in inst.deps if run[d])
        self.names = [graph.template(inst).spec.name for inst in graph.instances]
        self.counts: dict[str, dict[str, int]] = {}
        for i in range(n):
            bucket = self.counts.setdefault(self.names[i], {})
            bucket[self.state[i]] = bucket.get(self.state[i], 0) + 1
        self.remaining = sum(run)
        if self.pools is not None:
            for inst in graph.instances:
                pool = self.pools.of_template.get(inst.spec_index)
                if run[inst.index] and pool is not None:
                    self._pool_left[pool] = self._pool_left.get(pool, 0) + 1
            # A pool whose tasks are not planned yet (a fan-out) is not released.
            for spec_index in graph.waiting:
                pool = self.pools.of_template.get(spec_index)
                if pool is not None:
                    self._pool_left[pool] = self._pool_left.get(pool, 0) + 1
        if self.values_in_memory:
            for inst in graph.instances:
                if run[inst.index]:
                    for p in {p for arg in inst.values.values() for p in arg.producers}:
                        self._consumers_left[p] = self._consumers_left.get(p, 0) + 1
        for i in graph.order:
            if run[i] and self.waiting[i] == 0:
                self._make_ready(i)
        self._progress(force=True)
        try:
            self._loop()
        except KeyboardInterrupt:
            self._cancel()
            self._wait_for_value_files(VALUE_FILES_SECONDS / 10)
            self._progress(force=True)
            return DriverResult(self._totals(), self._failed(), cancelled=True)
        self._wait_for_value_files(VALUE_FILES_SECONDS)
        self._progress(force=True)
        # Every engine task took a number (a value-handing task's outcome shares its own).
        log.info("%d task(s) ran in %d engine task(s)", sum(run), next(self._chunk_ids))
        return DriverResult(self._totals(), self._failed(), drained=bool(self._held))

    def _wait_for_value_files(self, seconds: float) -> None:
        """Wait for the value files the workers write in the background (``persist``), so
        the run ends with every value it made on disk; a worker that cannot is named."""
        if not self._made_any:
            return
        try:
            problems = self.client.run(wait_for_saves, seconds, callback_timeout=seconds + 10)
        except Exception as exc:  # a lost worker: its values are made again when needed
            log.warning("could not wait for the workers' value files: %s", exc)
            return
        for worker, lines in problems.items():
            for line in lines:
                log.warning("value file not written on %s: %s", worker, line)

    def backlog_slots(self, pool: str | None = None) -> int:
        """CPU slots' worth of tasks that are ready or submitted and not finished; with
        ``pool``, of that pool's tasks only.

        What an elastic cluster sizes itself from (Dask only sees the chunks in flight).
        Safe to call from another thread: it only reads, and retries a racing change.
        """
        for _ in range(5):
            try:
                ready = sum(
                    key.cpus * len(q)
                    for key, q in list(self._ready.items())
                    if pool is None or key.pool == pool
                )
                # A task handing on its value is under two keys (its Made, its outcome).
                running = {c.index for calls in list(self._calls_by_key.values()) for c in calls}
                keys = [self._group(i) for i in running]
                inflight = sum(k.cpus for k in keys if pool is None or k.pool == pool)
                return ready + inflight
            except RuntimeError:  # a dict or deque changed size while we read it
                continue
        return 0

    # -- the loop -----------------------------------------------------------------------

    def _loop(self) -> None:
        while self.remaining > 0:
            self._check_cancel_request()
            self._check_workers()
            # Batched writes are committed at most once a second (wakes: at least twice).
            self.db.flush_due()
            self.memo.flush_due()
            self._release_retries()
            self._submit_ready()
            self._signal_checkpoints()
            if self._inflight == 0 and not self._retry_heap:
                if self._held:
                    log.warning(
                        "walltime drain: %d ready tasks cannot finish before the "
                        "allocation ends; stopping",
                        len(self._held),
                    )
                else:
                    # Nothing can make progress (should not happen: the graph is acyclic).
                    log.error("driver stalled with %d tasks remaining", self.remaining)
                break
            self._record_where()
            timeout = 0.5
            if self._retry_heap:
                timeout = max(0.0, min(timeout, self._retry_heap[0][0] - time.monotonic()))
            try:
                item = self._done.get(timeout=timeout)
            except queue.Empty:
                self._progress()
                continue
            batch = [item]
            while True:
                try:
                    batch.append(self._done.get_nowait())
                except queue.Empty:
                    break
            self._handle(batch)
            self._progress()

    def _check_cancel_request(self) -> None:
        """Cancel the run (as Ctrl-C does) once ``hpcflow cancel`` left its request file;
        looked for at most twice a second."""
        if self.cancel_request is None:
            return
        now = time.monotonic()
        if now - self._last_cancel_check < 0.5:
            return
        self._last_cancel_check = now
        if self.cancel_request.exists():
            log.warning("cancel requested (%s)", self.cancel_request)
            raise KeyboardInterrupt

    def _check_workers(self) -> None:
        """End the run with :class:`WorkersGone` once :attr:`workers_gone` says no worker
        is left nor will come: the tasks in flight are lost and nothing else can run, so
        waiting on would hold the allocation until its walltime."""
        if self.workers_gone is None:
            return
        now = time.monotonic()
        if now - self._last_workers_check < 1.0:
            return
        self._last_workers_check = now
        why = self.workers_gone()
        if why is not None:
            raise WorkersGone(why)

    def _record_where(self) -> None:
        """Every few seconds, note which node each running task is on (for status)."""
        now = time.monotonic()
        if now - self._last_where < self.where_interval:
            return
        self._last_where = now
        try:
            processing = self.client.processing()
            if set(processing) - set(self._worker_hosts):
                # Asked only when a worker is new: the answer carries every worker's
                # metrics, a cost to the scheduler that grows with the nodes.
                workers = _all_workers(self.client)
                for address in processing:
                    self._worker_hosts[address] = worker_host(address, workers.get(address, {}))
        except Exception as exc:  # a report, never a reason to stop the run
            log.debug("could not ask where tasks run: %s", exc)
            return
        hosts: list[tuple[int, str]] = []
        for address, keys in processing.items():
            host = self._worker_hosts.get(address) or worker_host(address, {})
            for key in keys:
                hosts.extend((call.index, host) for call in self._calls_by_key.get(key, ()))
        if hosts:
            self.db.set_running_hosts(hosts)

    def _group(self, i: int) -> GroupKey:
        inst = self.graph.instances[i]
        res = self.graph.template(inst).resources
        cpus = self.factory.held_cpus(res)
        pool = self.pools.of_template.get(inst.spec_index) if self.pools else None
        return GroupKey(cpus, res.gpus, pool)

    def _make_ready(self, i: int) -> None:
        self._ready.setdefault(self._group(i), deque()).append(i)

    def _chunk_size(self, key: GroupKey, ready: int, spec_index: int) -> int:
        parallel = max(1, self.slots // key.cpus)
        if self._observed.get(spec_index, 0) >= parallel:
            mean = self._mean_seconds[spec_index]
        elif self._observed_all >= parallel:
            # A task definition not seen yet (e.g. a DAG of many one-instance tasks):
            # assume it is like the tasks seen so far.
            mean = self._mean_all
        else:
            return 1  # no duration known yet: start one task per slot
        by_time = int(self.chunk_seconds() / max(mean, 1e-4))
        balanced = math.ceil(ready / (2 * parallel))
        return max(1, min(self.max_chunk, by_time, balanced))

    def chunk_seconds(self) -> float:
        """How long a chunk should run: ``target_chunk_seconds``, or longer where the
        slots are so many that chunks that short would end more than
        ``central_chunks_per_second`` times a second (every chunk costs the driver and the
        scheduler the same, however short its tasks)."""
        return max(self.target_chunk_seconds, self.slots / self.central_chunks_per_second)

    def _tiny(self, spec_index: int) -> bool:
        """Whether tasks of this definition have so far taken under ``tiny_seconds``
        (known once a slot's worth of them ran, each alone, their peak memory measured)."""
        parallel = max(1, self.slots)
        if self._observed.get(spec_index, 0) < parallel:
            return False
        return self._mean_seconds[spec_index] < self.tiny_seconds

    def _submit_ready(self) -> None:
        outbox: dict[GroupKey, tuple[list[list[TaskCall]], list[str]]] = {}
        for key, ready in self._ready.items():
            slots = self.slots
            if self.pools is not None and key.pool is not None:
                slots = max(1, self.pools.slots.get(key.pool, self.slots))
            limit = 2 * slots + 2
            # Value tasks go one per Dask task, not in chunks: more of them in flight
            # keeps the workers busy between the driver's round trips.
            made_limit = 8 * slots + 2
            while ready and self._inflight_in.get(key.pool, 0) < made_limit:
                if self.deadline is not None and not self._fits(ready[0]):
                    self._held.add(ready.popleft())
                    continue
                if self._by_value(ready[0]):
                    self._submit_made(key, ready.popleft())
                    continue
                if self._inflight_in.get(key.pool, 0) >= limit:
                    break
                first = self.graph.instances[ready[0]].spec_index
                size = self._chunk_size(key, len(ready), first)
                chunk = [ready.popleft()]
                while ready and len(chunk) < size and not self._by_value(ready[0]):
                    chunk.append(ready.popleft())
                self._submit(key, chunk, outbox.setdefault(key, ([], [])))
        self._send(outbox)

    def _submit(
        self, key: GroupKey, chunk: list[int], outbox: tuple[list[list[TaskCall]], list[str]]
    ) -> None:
        """Make ``chunk``'s calls and count them in flight; they leave with the round's
        other chunks of the same shape (:meth:`_send`)."""
        calls: list[TaskCall] = []
        starts = []
        for i in chunk:
            self.attempt[i] += 1
            self._set_state(i, st.RUNNING)
            starts.append((i, self.attempt[i]))
            call = self.factory.call(self.graph.instances[i], self.attempt[i])
            call.tiny = self._tiny(self.graph.instances[i].spec_index)
            calls.append(call)
        self.db.start_attempts(starts)
        if self.deadline is not None:
            self._queued_seconds += sum(self._estimate(i) for i in chunk)
        name = f"hpcflow-chunk-{next(self._chunk_ids)}"
        self._calls_by_key[name] = calls  # kept to report a lost chunk
        self._count_inflight(name, key.pool)
        outbox[0].append(calls)
        outbox[1].append(name)

    def _send(self, outbox: dict[GroupKey, tuple[list[list[TaskCall]], list[str]]]) -> None:
        """Hand the round's chunks to the engine, one call per resource shape."""
        for key, (chunks, names) in outbox.items():
            if chunks:
                for future in submit_chunks(self.client, chunks, names, key.dask_resources()):
                    future.add_done_callback(self._done.put)

    def _by_value(self, i: int) -> bool:
        """Whether task ``i`` is a Dask task of its own whose value stays on its worker,
        or that receives such values."""
        if not self.values_in_memory:
            return False
        inst = self.graph.instances[i]
        return bool(inst.values) or i in self._consumers_left

    def _submit_made(self, key: GroupKey, i: int) -> None:
        """Submit python task ``i`` alone: its value (if any task receives it) stays on
        its worker, and what it receives comes from the producers' workers."""
        inst = self.graph.instances[i]
        self.attempt[i] += 1
        self._set_state(i, st.RUNNING)
        self.db.start_attempts([(i, self.attempt[i])])
        call = self.factory.call(inst, self.attempt[i])
        if not self.graph.template(inst).spec.persist:
            call.value_out = ""  # kept in memory only: a later run makes it again
        received = {
            name: (
                arg.shape,
                [
                    (k, self._made[p] if p in self._made else self.factory.value_file(p))
                    for k, p in zip(
                        arg.keys or (None,) * len(arg.producers), arg.producers, strict=True
                    )
                ],
            )
            for name, arg in inst.values.items()
        }
        if self.deadline is not None:
            self._queued_seconds += self._estimate(i)
        suffix = f"{i}-{self.attempt[i]}-{next(self._chunk_ids)}"
        made = self.client.submit(
            run_made,
            call,
            received,
            key=f"hpcflow-made-{suffix}",
            resources=key.dask_resources(),
            pure=False,
        )
        outcome = self.client.submit(outcome_of, made, key=f"hpcflow-outcome-{suffix}", pure=False)
        self._calls_by_key[outcome.key] = self._calls_by_key[made.key] = [call]
        self._made_keys[outcome.key] = made.key
        self._made_any = True
        if i in self._consumers_left:
            self._made[i] = made  # replaced by a retry's; dropped once no consumer needs it
        self._count_inflight(outcome.key, key.pool)
        outcome.add_done_callback(self._done.put)

    def _count_inflight(self, key: str, pool: str | None) -> None:
        self._inflight += 1
        self._inflight_in[pool] = self._inflight_in.get(pool, 0) + 1
        self._pool_of_key[key] = pool

    def _finished(self, i: int) -> None:
        """Task ``i`` has reached its final state in this run: one less to go, in its
        pool too; a releasable pool with none left is released."""
        self.remaining -= 1
        self._ended(i)
        if self.pools is None:
            return
        pool = self.pools.of_template.get(self.graph.instances[i].spec_index)
        if pool is None or pool not in self._pool_left:
            return
        self._pool_left[pool] -= 1
        if self._pool_left[pool] == 0 and pool in self.pools.releasable:
            log.info("pool %s: its last task has ended; releasing its workers", pool)
            # Committed first: the submit side reads that the pool has nothing left before
            # its allocation can end.
            self.db.flush()
            if self.pools.on_done is not None:
                self.pools.on_done(pool)

    def _ended(self, i: int) -> None:
        """Task ``i`` will not run again in this run: the values it received may go, and
        so may its own if it failed (its consumers are skipped)."""
        if not self._made:
            return
        if self.state[i] != st.SUCCEEDED:
            self._made.pop(i, None)
        for p in {p for arg in self.graph.instances[i].values.values() for p in arg.producers}:
            left = self._consumers_left.get(p, 0) - 1
            self._consumers_left[p] = left
            if left <= 0:
                self._made.pop(p, None)

    def _results(self, futures: list[Any]) -> list[Any]:
        """Each future's result, or the exception it ended with. Dask futures that
        finished are fetched in one round trip, not one each (a batch of value tasks
        ends as many small futures)."""
        finished = [f for f in futures if getattr(f, "status", None) == "finished"]
        fetched: dict[Any, Any] = {}
        if len(finished) > 1:
            try:
                # (Client.gather takes no timeout; Future.result passes its own this way.)
                got = self.client.sync(
                    self.client._gather, finished, callback_timeout=GATHER_SECONDS
                )
                fetched = dict(zip([f.key for f in finished], got, strict=True))
            except Exception:  # one of them is gone since (a lost worker): one by one
                fetched = {}
        results: list[Any] = []
        for future in futures:
            if future.key in fetched:
                results.append(fetched[future.key])
                continue
            try:
                results.append(
                    fetch_result(future, self.workers_gone, lambda: has_workers(self.client))
                )
            except WorkersGone:
                raise
            except Exception as exc:  # a lost worker or a crash outside any task
                if getattr(future, "status", None) != "error":
                    # Its result went with its worker: not made again behind our back.
                    with contextlib.suppress(Exception):
                        self.client.cancel([future])
                results.append(exc)
        return results

    def _handle(self, futures: list[Any]) -> None:
        outcomes: list[Outcome] = []
        for future, result in zip(futures, self._results(futures), strict=True):
            self._inflight -= 1
            pool = self._pool_of_key.pop(future.key, None)
            self._inflight_in[pool] = self._inflight_in.get(pool, 1) - 1
            calls = self._calls_by_key.pop(future.key)
            made_key = self._made_keys.pop(future.key, None)
            if made_key is not None:
                self._calls_by_key.pop(made_key, None)
            if isinstance(result, Exception):  # a lost worker or a crash outside any task
                now = time.time()
                log.warning("chunk of %d tasks lost: %s", len(calls), result)
                outcomes.extend(
                    Outcome.failed(c, now, f"worker lost: {type(result).__name__}: {result}"[:500])
                    for c in calls
                )
            else:
                outcomes.extend(result)
        for out in outcomes:
            i = out.index
            if self.deadline is not None:
                self._queued_seconds = max(0.0, self._queued_seconds - self._estimate(i))
            self._learn(self.graph.instances[i].spec_index, out.ended - out.started)
        new_states = self.ledger.record((out.index, (out,)) for out in outcomes)
        messages = {out.index: out.message for out in outcomes}
        interrupted = {out.index for out in outcomes if out.state == st.INTERRUPTED}
        ended: list[int] = []
        for i, state in new_states.items():
            self._set_state(i, state)
            if i in interrupted:
                # Stopped by its checkpoint signal: the continuation goes on from there.
                self._held.add(i)
                log.info("%s interrupted before the walltime", self.graph.instances[i].id)
            elif state == st.SUCCEEDED:
                self._finished(i)
                for child in self.dependents[i]:
                    if self.state[child] == st.PENDING:
                        self.waiting[child] -= 1
                        if self.waiting[child] == 0:
                            self._make_ready(child)
            elif state in (st.FAILED, st.CANCELLED):
                self._finished(i)
                ended.append(i)
            else:  # failed, and its retry policy allows another attempt
                policy = self.graph.template(self.graph.instances[i]).retries
                delay = policy.delay(self.attempt[i])
                heapq.heappush(self._retry_heap, (time.monotonic() + delay, i))
                log.info(
                    "retrying %s in %.1fs (%s)", self.graph.instances[i].id, delay, messages[i]
                )
        if ended:
            skipped = self.ledger.skip_downstream(
                self.dependents, ended, lambda child: self.state[child] == st.PENDING
            )
            for child in skipped:
                self._set_state(child, st.SKIPPED)
                self._finished(child)

    def _signal_checkpoints(self) -> None:
        """Send each running task that asked for one (``checkpoint:``) its signal, once,
        when its time before the allocation's end has come; every worker signals those
        it runs."""
        if self.deadline is None or not self._checkpointing:
            return
        now = time.time()
        due: dict[int, list[tuple[int, int]]] = {}
        for calls in list(self._calls_by_key.values()):
            for call in calls:
                key = (call.index, call.attempt)
                if (
                    call.checkpoint_signal
                    and key not in self._signalled
                    and now >= self.deadline - call.checkpoint_before
                ):
                    self._signalled.add(key)
                    due.setdefault(call.checkpoint_signal, []).append(key)
        for signum, keys in due.items():
            log.info("checkpoint signal %d to %d task(s) before the walltime", signum, len(keys))
            try:
                # Each worker answers at once (it only sends signals); a hung one
                # must not hold the driver up.
                self.client.run(signal_attempts, keys, signum, callback_timeout=SIGNAL_SECONDS)
            except Exception as exc:  # a lost worker: its tasks end with it
                log.warning("could not send the checkpoint signal: %s", exc)

    def _estimate(self, i: int) -> float:
        inst = self.graph.instances[i]
        estimate = self.graph.template(inst).resources.walltime
        if estimate is None:
            estimate = self._mean_seconds.get(inst.spec_index, 0.0)
        return estimate

    def _fits(self, i: int) -> bool:
        """Whether task ``i`` can still finish before the deadline, as far as we know: it
        starts once the work already queued ahead of it is done."""
        start = time.time() + self._queued_seconds / self.slots
        return start + self._estimate(i) + self.drain_margin <= (self.deadline or float("inf"))

    def _release_retries(self) -> None:
        now = time.monotonic()
        while self._retry_heap and self._retry_heap[0][0] <= now:
            _, i = heapq.heappop(self._retry_heap)
            self._make_ready(i)

    def _learn(self, spec_index: int, seconds: float) -> None:
        self._observed_all += 1
        self._mean_all += (seconds - self._mean_all) / min(self._observed_all, 50)
        seen = self._observed.get(spec_index, 0)
        mean = self._mean_seconds.get(spec_index, seconds)
        self._mean_seconds[spec_index] = mean + (seconds - mean) / min(seen + 1, 20)
        self._observed[spec_index] = seen + 1

    # -- cancel, bookkeeping ------------------------------------------------------------

    def _cancel(self) -> None:
        log.warning("cancelling: killing running tasks")
        kill_on_workers(self.client)
        changes = []
        for i, state in enumerate(self.state):
            if state in (st.RUNNING, st.PENDING):
                self._set_state(i, st.CANCELLED)
                changes.append((i, st.CANCELLED))
        self.db.set_states(changes, message="run cancelled")

    def _set_state(self, i: int, state: st.TaskState) -> None:
        old = self.state[i]
        if old == state:
            return
        bucket = self.counts[self.names[i]]
        bucket[old] -= 1
        bucket[state] = bucket.get(state, 0) + 1
        self.state[i] = state

    def _progress(self, force: bool = False) -> None:
        if self.observer is None:
            return
        now = time.monotonic()
        if force or now - self._last_progress > 0.1:
            self._last_progress = now
            self.observer.update({k: dict(v) for k, v in self.counts.items()})

    def _totals(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for state in self.state:
            totals[state] = totals.get(state, 0) + 1
        return totals

    def _failed(self) -> list[int]:
        return [i for i, s in enumerate(self.state) if s == st.FAILED]
