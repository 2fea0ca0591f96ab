"""Load a workflow and decide what must run; or reopen a run that already exists."""

from __future__ import annotations

import gc
import json
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from hpcflow.backends.registry import allocations_live
from hpcflow.dag.graph import TaskGraph, build_graph, renumbered
from hpcflow.engine.calls_factory import CallFactory, TaskLaunch
from hpcflow.engine.resume import ResumeDecision, decide
from hpcflow.envs.environments import Environments
from hpcflow.envs.site import SiteEnvironment
from hpcflow.errors import RunError
from hpcflow.spec.loader import load_workflow, parse_workflow
from hpcflow.store import statedb as st
from hpcflow.store.lock import RunLock
from hpcflow.store.memo import Memo, MemoEntry, read_run_journals
from hpcflow.store.paths import RunPaths, StateRoot, task_slug, workflow_key
from hpcflow.store.registry import RunFinder
from hpcflow.store.values import kept as value_file_kept

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
    #: How the site runs tasks' containers and modules (the profile's settings).
    site: SiteEnvironment = field(default_factory=SiteEnvironment)
    #: --dry-run: decide and show, write nothing (no image is pulled).
    dry_run: bool = False


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
    #: --force and --rerun: tasks planned during the run (a sweep over files a task
    #: made) are decided as those planned at the start were.
    force: bool = False
    rerun: tuple[str, ...] = ()


def prepare(workflow_file: Path, options: RunOptions, *, take_lock: bool = True) -> PreparedRun:
    """Load, validate, plan and decide what must run; takes the workflow's run lock."""
    loaded = load_workflow(workflow_file)
    with collector_paused():
        graph = build_graph(loaded)
    root = StateRoot.beside(workflow_file)
    key = workflow_key(workflow_file)
    lock = RunLock(root.lock_file(key), ask=allocations_live)
    if take_lock:  # the workflow's lease, held before the memo is opened for writing
        lock.acquire({"run_id": "starting", "workflow": str(workflow_file.resolve())})
    try:
        if options.dry_run:  # decides as a run would, writes nothing
            memo = Memo.preview(root.memo_db, key, root.journal_dir(key))
        else:
            memo = Memo(root.memo_db, key)
            # Successes of earlier runs that were killed before they committed them.
            memo.fold_journals(root.journal_dir(key))
        environments = Environments(options.site, images=root.images)
        with collector_paused():  # an entry per task, kept for the whole run
            entries = memo.load()

        find_run = RunFinder(root.runs)

        def value_kept(producer: int, entry: MemoEntry) -> bool:
            return value_file_kept(_value_run(find_run, entry, factory, producer))

        ready: frozenset[str] = frozenset()
        while True:
            factory = CallFactory(graph, environments=environments)
            check_environments(factory, pull=not options.dry_run)
            with collector_paused():
                decision = decide(
                    graph,
                    entries,
                    factory,
                    force=options.force,
                    rerun=options.rerun,
                    value_kept=value_kept,
                )
            # Sweeps over files of tasks that are up to date read those files now.
            more = files_made(graph, decision.run)
            if more <= ready:
                break
            ready |= more
            loaded = load_workflow(workflow_file, ready)
            with collector_paused():
                graph = build_graph(loaded)
        factory = replace(
            factory, value_runs=_locate_values(graph, factory, find_run, entries, decision.run)
        )
    except BaseException:
        lock.release()
        raise
    return PreparedRun(
        workflow_file=workflow_file,
        graph=graph,
        decision=decision,
        factory=factory,
        memo=memo,
        lock=lock,
        state_root=root,
        key=key,
        force=options.force,
        rerun=options.rerun,
    )


def files_made(graph: TaskGraph, pending: Sequence[bool]) -> frozenset[str]:
    """The tasks whose files waiting sweeps read (``after:``) that have made them: they
    are planned and none of their instances is ``pending`` (to run, or not finished)."""
    instances_of: dict[int, list[int]] = {}
    for inst in graph.instances:
        instances_of.setdefault(inst.spec_index, []).append(inst.index)
    names = {t.spec.name: i for i, t in enumerate(graph.templates)}
    made: set[str] = set()
    for after in graph.loaded.waiting.values():
        for name in after:
            spec_index = names[name]
            if spec_index in graph.waiting:
                continue
            if not any(pending[i] for i in instances_of.get(spec_index, [])):
                made.add(name)
    return frozenset(made)


def check_environments(factory: CallFactory, *, pull: bool = True) -> None:
    """The preflight of the tasks' software environments (images, runtimes, venvs): one
    error naming every task whose environment cannot work, before anything runs; then,
    unless ``pull`` is false (a dry run writes nothing), the registry images they name are
    pulled here, once."""
    uses = [
        (t.spec.name, key, t.software, t.base_dir, t.resources.gpus > 0)
        for key, t in enumerate(factory.graph.templates)
        if t.software is not None
    ]
    factory.environments.preflight(uses)
    if pull:
        factory.environments.pull(uses)


def _value_run(find: RunFinder, entry: MemoEntry, factory: CallFactory, producer: int) -> str:
    """Where the run that last made ``producer`` (``entry``) left its return value."""
    return RunPaths(find(entry.run_id)).value(factory.slug(factory.graph.instances[producer]))


def _locate_values(
    graph: TaskGraph,
    factory: CallFactory,
    find: RunFinder,
    entries: dict[str, MemoEntry],
    run: list[bool],
) -> dict[int, RunPaths]:
    """The runs holding the values of producers that do not run, for their consumers'
    calls (the runs the memo names: in the workflow's runs folder, or given
    ``--run-dir``): :attr:`CallFactory.value_runs`."""
    located: dict[int, RunPaths] = {}
    for producer in factory.received():
        entry = None if run[producer] else entries.get(graph.instances[producer].id)
        if entry is not None:  # (no entry: the consumer names a file that is not there)
            located[producer] = RunPaths(find(entry.run_id))
    return located


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


def load_run_graph(paths: RunPaths) -> tuple[TaskGraph, dict[str, object]]:
    """A run's task graph, from the workflow copy in its run directory, and its run.json
    (file positions in errors still name the original workflow file)."""
    info = json.loads(paths.run_info.read_text(encoding="utf-8"))
    original = Path(str(info["workflow"]))
    text = paths.workflow_copy.read_text(encoding="utf-8")
    frozen = None
    if paths.sweep_sources.exists():
        frozen = json.loads(paths.sweep_sources.read_text(encoding="utf-8"))
    included = None
    if paths.included_files.exists():
        included = json.loads(paths.included_files.read_text(encoding="utf-8"))
    loaded = parse_workflow(
        text, str(original), source=original, frozen_sources=frozen, frozen_includes=included
    )
    graph = build_graph(loaded, check_files=False)
    if paths.instance_order.exists():
        # The run planned more tasks as it went (a fan-out): number them as it did.
        graph = renumbered(graph, json.loads(paths.instance_order.read_text(encoding="utf-8")))
    return graph, info


def open_run(
    run_dir: Path,
    site: SiteEnvironment | None = None,
    *,
    take_lease: bool = True,
    allocation: str | None = None,
    launch: TaskLaunch | None = None,
) -> tuple[PreparedRun, st.StateDB, str]:
    """Reopen an existing run (inside its allocation, or for a continuation): the workflow as
    submitted, the graph, and a decision that runs every task not yet succeeded. Holds the
    workflow's lease for the run (the driver runs in batch job ``allocation``) before
    anything is written (raises
    :class:`~hpcflow.errors.RunLockedError` when another run holds it). Its calls start
    MPI tasks as ``launch`` says (the pilot's config)."""
    paths = RunPaths(run_dir)
    graph, info = load_run_graph(paths)
    original = Path(str(info["workflow"]))
    run_id = str(info["run_id"])
    root = StateRoot.beside(original)
    key = workflow_key(original)
    lock = RunLock(root.lock_file(key), ask=allocations_live)
    if take_lease:  # the lease its submitter took for this run: no other run may drive
        lock.adopt(run_id, allocation)
    try:
        return _reopen(
            paths, graph, original, run_id, root, key, lock, site, launch or TaskLaunch()
        )
    except BaseException:
        lock.release()
        raise


def _reopen(
    paths: RunPaths,
    graph: TaskGraph,
    original: Path,
    run_id: str,
    root: StateRoot,
    key: str,
    lock: RunLock,
    site: SiteEnvironment | None,
    launch: TaskLaunch,
) -> tuple[PreparedRun, st.StateDB, str]:
    db = st.StateDB(paths.state_db)
    rows = db.tasks()
    if len(rows) > len(graph.instances) or any(r.id != graph.instances[r.idx].id for r in rows):
        db.close()
        raise RunError(f"the tasks recorded in {paths.state_db} do not match the workflow copy")
    if len(rows) < len(graph.instances):
        # Planned during the run (a fan-out) by an allocation stopped before it recorded
        # them: they have not run.
        db.add_tasks(
            (inst.index, inst.id, graph.template(inst).spec.name, task_slug(inst.id), inst.deps,
             st.PENDING)
            for inst in graph.instances[len(rows) :]
        )  # fmt: skip
        rows = db.tasks()
    memo = Memo(root.memo_db, key)
    environments = Environments(site or SiteEnvironment(), images=root.images)
    factory = CallFactory(
        graph,
        paths,
        launch=launch,
        journal=root.journal_prefix(key, run_id),
        environments=environments,
        # Interrupted by their checkpoint signal in an earlier allocation: they continue.
        continued=db.interrupted_last(),
    )
    recovered = _journaled_successes(graph, factory, rows, root.journal_dir(key), run_id)
    if recovered:
        # An earlier allocation of this run finished them but was killed before it
        # committed them: record them now, never run them again.
        db.set_states(((i, st.SUCCEEDED) for i in recovered), message="finished (journal)")
        memo.record(recovered.values())
        memo.flush()
        log.info("%d task(s) finished by an earlier allocation, from its journal", len(recovered))
    run = [r.state not in (st.SUCCEEDED, st.CACHED) and r.idx not in recovered for r in rows]
    # Producers decided up to date when the run was made hold their values in earlier runs.
    cached = [r.state == st.CACHED for r in rows]
    entries = memo.load() if any(cached[p] for p in factory.received()) else {}
    located = _locate_values(graph, factory, RunFinder(root.runs), entries, [not c for c in cached])
    factory = replace(factory, value_runs=located)
    reasons = ["not finished" if r else "done" for r in run]
    prepared = PreparedRun(
        workflow_file=original,
        graph=graph,
        decision=ResumeDecision(run, reasons),
        factory=factory,
        memo=memo,
        lock=lock,
        state_root=root,
        key=key,
    )
    # Attempts continue their numbering across allocations.
    return prepared, db, run_id


def _journaled_successes(
    graph: TaskGraph,
    factory: CallFactory,
    rows: list[st.TaskRow],
    folder: Path,
    run_id: str,
) -> dict[int, MemoEntry]:
    """Tasks of ``run_id`` not recorded as done whose success is in the run's own
    journals (same task, same fingerprint), by index."""
    entries = {entry.task_id: entry for entry in read_run_journals(folder, run_id)}
    found: dict[int, MemoEntry] = {}
    for row in rows:
        entry = entries.get(row.id)
        if entry is None or row.state in (st.SUCCEEDED, st.CACHED):
            continue
        if entry.fingerprint == factory.fingerprint(graph.instances[row.idx]):
            found[row.idx] = entry
    return found
