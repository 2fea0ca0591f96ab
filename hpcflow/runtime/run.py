"""Compose a run: load → graph → resume decision → run directory → cluster → driver."""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from hpcflow import __version__
from hpcflow.dag.graph import TaskGraph, build_graph
from hpcflow.errors import ResourceError, RunError
from hpcflow.runtime.calls_factory import CallFactory
from hpcflow.runtime.driver import Driver, Observer
from hpcflow.runtime.resume import ResumeDecision, decide
from hpcflow.spec.loader import load_workflow
from hpcflow.store import statedb as st
from hpcflow.store.atomic import write_json_atomic
from hpcflow.store.lock import RunLock
from hpcflow.store.memo import Memo
from hpcflow.store.paths import RunPaths, StateRoot, task_slug, workflow_key
from hpcflow.store.registry import register_run

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunOptions:
    """What `hpcflow run` was asked to do."""

    run_dir: Path | None = None
    force: bool = False
    rerun: tuple[str, ...] = ()
    workers: int | None = None
    threads: int | None = None


@dataclass
class RunSummary:
    """How a run ended."""

    run_id: str
    paths: RunPaths
    totals: dict[str, int]
    failed: list[int] = field(default_factory=list)
    cancelled: bool = False
    elapsed: float = 0.0

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
    graph = build_graph(loaded)
    root = StateRoot.beside(workflow_file)
    key = workflow_key(workflow_file)
    lock = RunLock(root.lock_file(key))
    if take_lock:
        lock.acquire({"pid": os.getpid(), "host": socket.gethostname(), "run_id": "starting"})
    try:
        memo = Memo(root.memo_db, key)
        factory = CallFactory(graph)
        decision = decide(graph, memo.load(), factory, force=options.force, rerun=options.rerun)
    except BaseException:
        lock.release()
        raise
    return PreparedRun(workflow_file, graph, decision, factory, memo, lock, root, key)


def check_capacity(graph: TaskGraph, run: list[bool], max_cpus: int, gpus: int) -> None:
    """Refuse, before anything runs, tasks that can never fit on this cluster."""
    for inst in graph.instances:
        if not run[inst.index]:
            continue
        res = graph.template(inst).resources
        need = max(res.cpus, res.ranks)
        if need > max_cpus:
            raise ResourceError(
                f"task {inst.id!r} asks for {need} cpus but the local cluster has at most "
                f"{max_cpus} per worker",
                hint="lower its resources.cpus/ranks, raise --threads, or use a batch profile",
            )
        if res.gpus > gpus:
            raise ResourceError(
                f"task {inst.id!r} asks for {res.gpus} GPUs but the local cluster has {gpus}",
                hint="run it with a GPU profile, e.g. --profile slurm-gpu",
            )


def execute(prepared: PreparedRun, options: RunOptions, observer: Observer | None = None) -> RunSummary:
    """Create the run directory and run what the decision says must run."""
    from hpcflow.backends.local.backend import LocalCapacity, LocalCluster

    started = time.time()
    graph = prepared.graph
    run = prepared.decision.run
    capacity = LocalCapacity.detect(options.workers, options.threads)
    try:
        check_capacity(graph, run, capacity.max_cpus_per_task, capacity.gpus)
        run_id = new_run_id()
        paths = _create_run_dir(prepared, options, run_id, started)
    except BaseException:
        prepared.lock.release()
        raise
    handler = _log_to(paths.driver_log)
    db = st.StateDB(paths.state_db)
    try:
        db.add_tasks(
            (inst.index, inst.id, graph.template(inst).spec.name, task_slug(inst.id), inst.deps,
             st.PENDING if run[inst.index] else st.CACHED)
            for inst in graph.instances
        )
        db.set_meta(run_id=run_id, status="running", started=started, pid=os.getpid(),
                    host=socket.gethostname(), workflow=str(prepared.workflow_file),
                    backend="local", slots=capacity.slots)
        prepared.factory.paths = paths
        if prepared.decision.to_run == 0:
            totals = {st.CACHED: len(graph.instances)}
            if observer:
                observer.update(db.counts())
            return _finish(db, paths, run_id, RunSummary(run_id, paths, totals), started)
        log.info("run %s: %d of %d tasks to run on %d slots", run_id,
                 prepared.decision.to_run, len(graph.instances), capacity.slots)
        workdir = str(Path(graph.loaded.base_dir))
        with LocalCluster(capacity, workdir) as cluster:
            driver = Driver(graph, prepared.factory, db, prepared.memo, cluster.client,
                            capacity.slots, run_id, observer)
            try:
                result = driver.run(run)
            except KeyboardInterrupt:
                result = None
        if result is None:
            summary = RunSummary(run_id, paths, {}, cancelled=True)
        else:
            summary = RunSummary(run_id, paths, result.counts, result.failed, result.cancelled)
        return _finish(db, paths, run_id, summary, started)
    finally:
        db.close()
        prepared.memo.close()
        prepared.lock.release()
        logging.getLogger("hpcflow").removeHandler(handler)
        handler.close()


def _create_run_dir(prepared: PreparedRun, options: RunOptions, run_id: str, started: float) -> RunPaths:
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
            {"run_id": run_id, "workflow": str(prepared.workflow_file.resolve()),
             "workflow_name": prepared.graph.loaded.workflow.name, "started": started,
             "pid": os.getpid(), "host": socket.gethostname(), "hpcflow": __version__,
             "backend": "local", "options": {"force": options.force, "rerun": list(options.rerun)}},
        )
    except OSError as exc:
        raise RunError(f"cannot create run directory {run_dir}: {exc}") from None
    register_run(run_id, run_dir, str(prepared.workflow_file.resolve()), started)
    return paths


def _finish(db: st.StateDB, paths: RunPaths, run_id: str, summary: RunSummary, started: float) -> RunSummary:
    summary.elapsed = time.time() - started
    status = "cancelled" if summary.cancelled else ("succeeded" if summary.ok else "failed")
    db.set_meta(status=status, ended=time.time())
    log.info("run %s %s in %.1fs: %s", run_id, status, summary.elapsed, summary.totals)
    return summary


def _log_to(path: Path) -> logging.Handler:
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("hpcflow")
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > logging.INFO:
        logger.setLevel(logging.INFO)
    return handler
