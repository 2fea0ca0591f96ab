"""Compose a run: load → graph → resume decision → run directory → cluster → driver."""

from __future__ import annotations

import errno
import gc
import logging
import os
import secrets
import shutil
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcflow import __version__
from hpcflow.dag.graph import TaskGraph, build_graph
from hpcflow.errors import ResourceError, RunError
from hpcflow.runtime.calls_factory import CallFactory
from hpcflow.runtime.driver import Driver, Observer
from hpcflow.runtime.journal import close_journals
from hpcflow.runtime.resume import ResumeDecision, decide
from hpcflow.spec.loader import load_workflow
from hpcflow.store import statedb as st
from hpcflow.store.atomic import write_json_atomic
from hpcflow.store.lock import RunLock
from hpcflow.store.memo import Memo, remove_journals
from hpcflow.store.paths import RunPaths, StateRoot, workflow_key
from hpcflow.store.process import ProcessIdentity
from hpcflow.store.registry import register_run

if TYPE_CHECKING:
    from hpcflow.backends.local.backend import LocalCapacity

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunOptions:
    """What `hpcflow run` was asked to do."""

    run_dir: Path | None = None
    force: bool = False
    rerun: tuple[str, ...] = ()
    workers: int | None = None
    threads: int | None = None
    #: Local runs: ``pool`` (no Dask), ``dask`` (the embedded cluster) or ``auto``.
    engine: str = "auto"


@dataclass
class RunSummary:
    """How a run ended."""

    run_id: str
    paths: RunPaths
    totals: dict[str, int]
    failed: list[int] = field(default_factory=list)
    cancelled: bool = False
    elapsed: float = 0.0
    drained: bool = False

    @property
    def ok(self) -> bool:
        return not self.cancelled and not self.failed and not self.totals.get(st.SKIPPED)


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


@dataclass
class PreparedRun:
    """A loaded and decided run, before anything executes (also what --dry-run shows)."""

    workflow_file: Path
    graph: TaskGraph
    decision: ResumeDecision
    factory: CallFactory
    memo: Memo
    lock: RunLock
    state_root: StateRoot
    key: str


def prepare(workflow_file: Path, options: RunOptions, *, take_lock: bool = True) -> PreparedRun:
    """Load, validate, plan and decide what must run; takes the workflow's run lock."""
    loaded = load_workflow(workflow_file)
    with collector_paused():
        graph = build_graph(loaded)
    root = StateRoot.beside(workflow_file)
    key = workflow_key(workflow_file)
    lock = RunLock(root.lock_file(key))
    if take_lock:
        lock.acquire({"pid": os.getpid(), "host": socket.gethostname(), "run_id": "starting"})
    try:
        memo = Memo(root.memo_db, key)
        # Successes of earlier runs that were killed before they committed them.
        memo.fold_journals(root.journal_dir(key))
        factory = CallFactory(graph)
        with collector_paused():
            decision = decide(graph, memo.load(), factory, force=options.force, rerun=options.rerun)
    except BaseException:
        lock.release()
        raise
    return PreparedRun(workflow_file, graph, decision, factory, memo, lock, root, key)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Build the plan without the cyclic garbage collector, then exempt it from collection.

    A plan is millions of small objects that live as long as the run. Left on, the
    collector re-scans all of them again and again while they are built (a 1M-task
    plan took 37 s instead of 15 s), and at every full collection afterwards.
    ``gc.freeze`` moves them to the permanent generation; reference counting still frees
    whatever is dropped.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def check_capacity(
    graph: TaskGraph,
    run: list[bool],
    max_cpus: int,
    gpus: int,
    where: str = "the local cluster",
    mpi_wrapped: bool = False,
) -> None:
    """Refuse, before anything runs, tasks that can never fit on this cluster."""
    for inst in graph.instances:
        if not run[inst.index]:
            continue
        res = graph.template(inst).resources
        # An MPI task launched as its own step (srun/mpirun) holds only its cpus on a worker.
        need = res.cpus if mpi_wrapped else max(res.cpus, res.ranks)
        if need > max_cpus:
            raise ResourceError(
                f"task {inst.id!r} asks for {need} cpus but {where} has at most "
                f"{max_cpus} per worker",
                hint="lower its resources.cpus/ranks, raise --threads, or use a batch profile",
            )
        if res.gpus > gpus:
            raise ResourceError(
                f"task {inst.id!r} asks for {res.gpus} GPUs but {where} has {gpus} per worker",
                hint="run it with a GPU profile, e.g. --profile slurm-gpu",
            )


def create_run(
    prepared: PreparedRun,
    options: RunOptions,
    *,
    backend: str = "local",
    extra: dict[str, object] | None = None,
) -> tuple[str, RunPaths, st.StateDB]:
    """Make the run directory and its state database (every task pending or cached)."""
    started = time.time()
    graph = prepared.graph
    run = prepared.decision.run
    run_id = new_run_id()
    paths = _create_run_dir(prepared, options, run_id, started, backend, extra or {})
    db = st.StateDB(paths.state_db)
    db.add_tasks(
        (
            inst.index,
            inst.id,
            graph.template(inst).spec.name,
            prepared.factory.slug(inst),
            inst.deps,
            st.PENDING if run[inst.index] else st.CACHED,
        )
        for inst in graph.instances
    )
    db.set_meta(
        run_id=run_id,
        status="created",
        started=started,
        pid=os.getpid(),
        host=socket.gethostname(),
        creator=ProcessIdentity.current().to_meta(),
        workflow=str(prepared.workflow_file.resolve()),
        backend=backend,
        total=len(graph.instances),
        to_run=prepared.decision.to_run,
    )
    write_json_atomic(paths.plan, plan_summary(prepared))
    prepared.factory.paths = paths
    prepared.factory.journal = prepared.state_root.journal_prefix(prepared.key, run_id)
    return run_id, paths, db


def plan_summary(prepared: PreparedRun) -> dict[str, object]:
    """The resolved plan per task definition (every instance is in state.sqlite)."""
    graph = prepared.graph
    counts = graph.counts_by_task()
    to_run: dict[str, int] = {}
    for inst in graph.instances:
        if prepared.decision.run[inst.index]:
            name = graph.template(inst).spec.name
            to_run[name] = to_run.get(name, 0) + 1
    tasks = []
    for template in graph.templates:
        name = template.spec.name
        tasks.append(
            {
                "name": name,
                "kind": template.spec.kind,
                "instances": counts.get(name, 0),
                "to_run": to_run.get(name, 0),
                "resources": template.resources.model_dump(),
                "retries": template.retries.model_dump(),
                "timeout": template.timeout,
            }
        )
    return {
        "workflow": graph.loaded.workflow.name,
        "total": len(graph.instances),
        "to_run": prepared.decision.to_run,
        "tasks": tasks,
    }


def drive(
    prepared: PreparedRun,
    db: st.StateDB,
    run_id: str,
    client: object,
    slots: int,
    observer: Observer | None = None,
    deadline: float | None = None,
    drain_margin: float = 30.0,
    on_driver: Callable[[Driver], None] | None = None,
) -> RunSummary:
    """Run the pending tasks of an existing run on a connected Dask ``client``.

    ``on_driver`` is given the driver before it starts (elastic mode reads its backlog).
    """
    started = time.time()
    paths = prepared.factory.paths
    if paths is None:
        raise RunError("drive() needs a run directory")
    db.set_meta(
        status="running",
        driver_pid=os.getpid(),
        driver_host=socket.gethostname(),
        driver=ProcessIdentity.current().to_meta(),
    )
    driver = Driver(
        prepared.graph,
        prepared.factory,
        db,
        prepared.memo,
        client,
        slots,
        run_id,
        observer,
        deadline=deadline,
        drain_margin=drain_margin,
        cancel_request=paths.cancel_request,
    )
    if on_driver is not None:
        on_driver(driver)
    attempts = [row.attempts for row in db.tasks()]
    try:
        result = driver.run(prepared.decision.run, attempts)
        # Every success the driver saw is in the memo now: the journal is no longer needed.
        prepared.memo.flush()
        close_journals()
        remove_journals(prepared.state_root.journal_dir(prepared.key), run_id)
    except KeyboardInterrupt:
        return _finish(db, paths, run_id, RunSummary(run_id, paths, {}, cancelled=True), started)
    except (OSError, sqlite3.Error) as exc:
        problem = storage_problem(exc)
        if problem is None:
            raise
        # SQLite commits are atomic: what was recorded before the failure stands, and the
        # memo holds only finished successes. The cluster is closed by our callers.
        raise RunError(
            f"the run stopped: {problem} ({exc}) under {paths.run_dir.parent}",
            hint="free space (or make the folder writable again), then run the same "
            "command: the run resumes, and tasks that succeeded are not run again",
        ) from None
    summary = RunSummary(
        run_id, paths, result.counts, result.failed, result.cancelled, drained=result.drained
    )
    return _finish(db, paths, run_id, summary, started)


def storage_problem(exc: BaseException) -> str | None:
    """A plain name for a full or unwritable file system behind ``exc`` (else None)."""
    if isinstance(exc, OSError):
        names = {
            errno.ENOSPC: "the disk is full",
            errno.EDQUOT: "the disk quota is exceeded",
            errno.EROFS: "the file system is read-only",
            errno.EACCES: "the run directory is not writable",
        }
        return names.get(exc.errno or 0)
    text = str(exc).lower()
    if "disk is full" in text or "disk i/o error" in text:
        return "the disk is full (or failing)"
    if "readonly" in text or "read-only" in text:
        return "the run directory is not writable"
    return None


def local_engine(options: RunOptions) -> str:
    """Which engine a local run uses: ``pool`` or ``dask``.

    ``auto`` takes the pool (threads in the driver for commands, worker processes for
    Python calls): a local run gains nothing from Dask but its start-up and round trips.
    ``--workers`` above 1 asks for Dask's worker processes, so it takes Dask.
    """
    if options.engine != "auto":
        return options.engine
    if options.workers is not None and options.workers > 1:
        return "dask"
    return "pool"


def execute(
    prepared: PreparedRun, options: RunOptions, observer: Observer | None = None
) -> RunSummary:
    """Run on this machine: create the run directory, start the local engine, drive."""
    from hpcflow.backends.local.backend import LocalCapacity

    started = time.time()
    graph = prepared.graph
    capacity = LocalCapacity.detect(options.workers, options.threads)
    engine = local_engine(options)
    try:
        check_capacity(graph, prepared.decision.run, capacity.max_cpus_per_task, capacity.gpus)
        run_id, paths, db = create_run(
            prepared, options, extra={"slots": capacity.slots, "engine": engine}
        )
    except BaseException:
        prepared.memo.close()
        prepared.lock.release()
        raise
    handler = log_to(paths.driver_log)
    try:
        if prepared.decision.to_run == 0:
            totals = {st.CACHED: len(graph.instances)}
            if observer:
                observer.update(db.counts())
            return _finish(db, paths, run_id, RunSummary(run_id, paths, totals), started)
        log.info(
            "run %s: %d of %d tasks to run on %d slots (%s engine)",
            run_id,
            prepared.decision.to_run,
            len(graph.instances),
            capacity.slots,
            engine,
        )
        with _local_engine(engine, capacity, str(Path(graph.loaded.base_dir))) as cluster:
            summary = drive(prepared, db, run_id, cluster.client, capacity.slots, observer)
        summary.elapsed = time.time() - started
        return summary
    finally:
        db.close()
        prepared.memo.close()
        prepared.lock.release()
        logging.getLogger("hpcflow").removeHandler(handler)
        handler.close()


def _local_engine(engine: str, capacity: LocalCapacity, workdir: str) -> Any:
    """The context manager that provides the local engine's client."""
    if engine == "pool":
        from hpcflow.backends.local.pool import LocalPool

        return LocalPool(capacity.slots, workdir)
    from hpcflow.backends.local.backend import LocalCluster

    return LocalCluster(capacity, workdir)


def _create_run_dir(
    prepared: PreparedRun,
    options: RunOptions,
    run_id: str,
    started: float,
    backend: str,
    extra: dict[str, object],
) -> RunPaths:
    run_dir = options.run_dir or (prepared.state_root.runs / run_id)
    run_dir = run_dir.resolve()
    if run_dir.exists() and any(run_dir.iterdir()):
        raise RunError(f"run directory {run_dir} is not empty", hint="choose a new --run-dir")
    try:
        run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(run_dir, 0o700)
        paths = RunPaths(run_dir)
        shutil.copyfile(prepared.workflow_file, paths.workflow_copy)
        write_json_atomic(
            paths.run_info,
            {
                "run_id": run_id,
                "workflow": str(prepared.workflow_file.resolve()),
                "workflow_name": prepared.graph.loaded.workflow.name,
                "started": started,
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "hpcflow": __version__,
                "backend": backend,
                "base_dir": str(prepared.graph.loaded.base_dir),
                "options": {"force": options.force, "rerun": list(options.rerun)},
                **extra,
            },
        )
    except OSError as exc:
        raise RunError(f"cannot create run directory {run_dir}: {exc}") from None
    register_run(run_id, run_dir, str(prepared.workflow_file.resolve()), started)
    return paths


def _finish(
    db: st.StateDB, paths: RunPaths, run_id: str, summary: RunSummary, started: float
) -> RunSummary:
    summary.elapsed = time.time() - started
    if summary.drained and not summary.failed:
        status = "drained"
    else:
        status = "cancelled" if summary.cancelled else ("succeeded" if summary.ok else "failed")
    db.set_meta(status=status, ended=time.time())
    log.info("run %s %s in %.1fs: %s", run_id, status, summary.elapsed, summary.totals)
    return summary


def log_to(path: Path) -> logging.Handler:
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("hpcflow")
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > logging.INFO:
        logger.setLevel(logging.INFO)
    return handler


def open_run(run_dir: Path) -> tuple[PreparedRun, st.StateDB, str]:
    """Reopen an existing run (inside its allocation, or for a continuation): the workflow as
    submitted, the graph, and a decision that runs every task not yet succeeded."""
    import json

    from hpcflow.spec.loader import parse_workflow

    paths = RunPaths(run_dir)
    info = json.loads(paths.run_info.read_text(encoding="utf-8"))
    original = Path(info["workflow"])
    text = paths.workflow_copy.read_text(encoding="utf-8")
    loaded = parse_workflow(text, str(original), source=original)
    graph = build_graph(loaded, check_files=False)
    db = st.StateDB(paths.state_db)
    rows = db.tasks()
    if len(rows) != len(graph.instances) or any(r.id != graph.instances[r.idx].id for r in rows):
        db.close()
        raise RunError(f"the tasks recorded in {paths.state_db} do not match the workflow copy")
    run = [r.state not in (st.SUCCEEDED, st.CACHED) for r in rows]
    reasons = ["not finished" if r else "done" for r in run]
    root = StateRoot.beside(original)
    key = workflow_key(original)
    memo = Memo(root.memo_db, key)
    factory = CallFactory(graph, paths)
    factory.journal = root.journal_prefix(key, str(info["run_id"]))
    prepared = PreparedRun(
        original,
        graph,
        ResumeDecision(run, reasons),
        factory,
        memo,
        RunLock(root.lock_file(key)),
        root,
        key,
    )
    # Attempts continue their numbering across allocations.
    return prepared, db, str(info["run_id"])


def mark_unfinished(db: st.StateDB, message: str) -> None:
    """Mark every task still running or pending as cancelled, saying why."""
    rows = db.tasks(states=(st.RUNNING, st.PENDING))
    db.set_states(((r.idx, st.CANCELLED) for r in rows), message=message)


def summarize(
    db: st.StateDB, paths: RunPaths, run_id: str, started: float, cancelled: bool = False
) -> RunSummary:
    """The :class:`RunSummary` of a batch run, read back from its state database."""
    totals: dict[str, int] = {}
    for counts in db.counts().values():
        for state, n in counts.items():
            totals[state] = totals.get(state, 0) + n
    failed = [r.idx for r in db.tasks(states=(st.FAILED,))]
    return RunSummary(run_id, paths, totals, failed, cancelled, time.time() - started)
