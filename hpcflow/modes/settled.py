"""A local run of a workflow unchanged since a run after which every task was up to date.

Such a run has nothing to run as long as every task's outputs are as the memo recorded
them. The memo says which run that was (:meth:`~hpcflow.store.memo.Memo.settle`), for
which workflow text and hpcflow version, and holds only while no success has been
recorded since. :func:`resume_settled` then checks each task's outputs (size and
modification time, as a full resume does) and records the run as that run's tasks, every
one cached, without loading the workflow, planning it or rendering a command: a resume
of 100,000 up-to-date tasks is the time it takes to look at their outputs.

Only workflows whose plan depends on nothing but their text settle (:func:`settles`):
no included files, no sweeps read from files, no task planned during the run, no task
with inputs (a glob may match new files), a software environment (an image may change)
or values from other tasks. A run that cannot take this path, or whose checks fail,
returns None and is planned in full, which decides exactly as before.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hpcflow._version import __version__
from hpcflow.engine.lifecycle import (
    RunSummary,
    conclude,
    log_to,
    make_run_dir,
    new_run_id,
    run_meta,
)
from hpcflow.launchers.environment import allocation_layout
from hpcflow.settings.lookup import DEFAULT_PROFILE, SUFFIXES, user_profile_dir
from hpcflow.store import statedb as st
from hpcflow.store.atomic import write_json_atomic
from hpcflow.store.lock import RunLock
from hpcflow.store.memo import Memo, signatures
from hpcflow.store.paths import RunPaths, StateRoot, workflow_key
from hpcflow.store.process import MARK_VAR
from hpcflow.store.states import RunStatus
from hpcflow.store.storage_errors import storage_errors
from hpcflow.worker.local_cluster import LocalCapacity

if TYPE_CHECKING:
    from hpcflow.engine.prepare import PreparedRun

log = logging.getLogger(__name__)

#: ``HPCFLOW_*`` variables that change nothing in how a run is planned (the folder of the
#: per-user index of runs; the task mark a run started inside another run's task carries);
#: any other one leaves the run to be planned in full.
_UNRELATED = frozenset({"HPCFLOW_HOME", MARK_VAR})


def workflow_digest(text: str) -> str:
    """What a settled run's workflow is: its text, with the hpcflow version (another
    version may fingerprint tasks otherwise)."""
    return hashlib.sha1(f"{__version__}\n{text}".encode(), usedforsecurity=False).hexdigest()


def local_engine(engine: str, workers: int | None) -> str:
    """Which engine a local run uses: ``pool`` or ``dask``.

    ``auto`` takes the pool (threads in the driver for commands, worker processes for
    Python calls): a local run gains nothing from Dask but its start-up and round trips.
    ``--workers`` above 1 asks for Dask's worker processes, so it takes Dask.
    """
    if engine != "auto":
        return engine
    if workers is not None and workers > 1:
        return "dask"
    return "pool"


def settles(prepared: PreparedRun) -> bool:
    """Whether the plan of ``prepared`` depends on nothing but the workflow's text (see
    the module's description), so that a run of it can settle."""
    graph = prepared.graph
    loaded = graph.loaded
    if loaded.included or loaded.sources or loaded.waiting or graph.waiting:
        return False
    return all(not t.inputs and t.software is None and not t.spec.from_ for t in graph.templates)


def settle(prepared: PreparedRun, run_dir: Path, summary: RunSummary) -> None:
    """After a local run: note it in the memo if every task ended up to date and the
    workflow settles."""
    done = set(summary.totals) <= {st.SUCCEEDED, st.CACHED}
    if summary.status == RunStatus.SUCCEEDED and done and settles(prepared):
        with storage_errors(run_dir):
            prepared.memo.settle(run_dir, workflow_digest(prepared.graph.loaded.text))


def resume_settled(
    workflow_file: Path, *, workers: int | None, threads: int | None, engine: str
) -> tuple[RunSummary, list[str]] | None:
    """Record a local run of ``workflow_file`` with every task cached, if the workflow is
    settled and every task's outputs are as the memo says; else None (plan it in full).

    Takes the workflow's lock as any run does (:class:`~hpcflow.errors.RunLockedError`
    while another run of it is active). Returns the run's summary and its task names in
    the workflow's order.
    """
    env = os.environ
    if any(n.startswith("HPCFLOW_") and n not in _UNRELATED for n in env):
        return None  # a profile or a setting from the environment: resolved in full
    if allocation_layout(env) is not None:
        return None  # inside an allocation: a run may boot on it
    user = user_profile_dir(env)
    if any((user / f"{DEFAULT_PROFILE}{suffix}").is_file() for suffix in SUFFIXES):
        return None  # the user's own profile named local (HPCFLOW_PROFILE_PATH is unset)
    try:
        text = workflow_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None  # the full path says what is wrong
    root = StateRoot.beside(workflow_file)
    if not root.memo_db.is_file():
        return None
    capacity = LocalCapacity.detect(workers, threads)
    key = workflow_key(workflow_file)
    lock = RunLock(root.lock_file(key), ask=_allocations_live)
    lock.acquire({"pid": os.getpid(), "host": socket.gethostname(), "run_id": "starting"})
    memo = None
    try:
        memo = Memo(root.memo_db, key)
        memo.fold_journals(root.journal_dir(key))
        settled = memo.settled()
        if settled is None or settled.digest != workflow_digest(text):
            return None
        earlier = RunPaths(settled.run_dir)
        order = _up_to_date(memo, earlier)
        if order is None:
            return None
        run_engine = local_engine(engine, workers)
        with storage_errors(root.root):
            summary = _record(workflow_file, earlier, memo, settled.digest, capacity, run_engine)
        return summary, order
    finally:
        if memo is not None:
            memo.close()
        lock.release()


def _allocations_live(backend: str, ids: Sequence[str]) -> list[str]:
    """The backends' answer (imported only when a lease names allocations)."""
    from hpcflow.backends.registry import allocations_live

    return allocations_live(backend, ids)


def _up_to_date(memo: Memo, earlier: RunPaths) -> list[str] | None:
    """The task names of ``earlier`` in the workflow's order, if every one of its tasks is
    up to date: a memo entry whose outputs are there with the same size and modification
    time (what :func:`hpcflow.engine.resume.decide` checks); else None."""
    try:
        with st.StateDB(earlier.state_db, readonly=True) as db:
            rows = db.task_ids()
    except (OSError, sqlite3.Error):
        return None  # removed, or not readable: plan in full
    outputs = memo.outputs_without_inputs()
    names: dict[str, None] = {}
    for task_id, name in rows:
        stored = outputs.get(task_id)
        if stored is None:
            return None
        for path, sig in signatures(stored).items():
            try:
                stat = os.stat(path)
            except OSError:
                return None
            if sig != [stat.st_size, stat.st_mtime_ns]:
                return None
        names[name] = None
    return list(names)


def _record(
    workflow_file: Path,
    earlier: RunPaths,
    memo: Memo,
    digest: str,
    capacity: LocalCapacity,
    engine: str,
) -> RunSummary:
    """Make the run's directory and state as a full resume with every task cached does
    (:func:`hpcflow.engine.lifecycle.create_run`, then the run's end), from ``earlier``'s."""
    import json

    started = time.time()
    info = json.loads(earlier.run_info.read_text(encoding="utf-8"))
    plan = json.loads(earlier.plan.read_text(encoding="utf-8"))
    run_id = new_run_id()
    workflow = str(workflow_file.resolve())
    paths = make_run_dir(
        (StateRoot.beside(workflow_file).runs / run_id).resolve(),
        run_id,
        workflow,
        "local",
        Path(info["base_dir"]),
        started,
        {
            "workflow_name": info["workflow_name"],
            "options": {"force": False, "rerun": []},
            "slots": capacity.slots,
            "engine": engine,
        },
        copy=workflow_file,
    )
    handler = log_to(paths.driver_log)
    db = st.StateDB(paths.state_db)
    try:
        db.copy_tasks(earlier.state_db, st.CACHED)
        total = int(plan["total"])
        db.set_meta(
            **run_meta(
                run_id, RunStatus.CREATED, started, workflow, "local", total=total, to_run=0,
                waiting=[],
            )
        )  # fmt: skip
        plan["to_run"] = 0
        for task in plan["tasks"]:
            task["to_run"] = 0
        write_json_atomic(paths.plan, plan)
        summary = conclude(db, RunSummary(run_id, paths, {st.CACHED: total}), started)
        memo.settle(paths.run_dir, digest)
        log.debug("run %s: the workflow is as run %s left it", run_id, earlier.run_dir.name)
        return summary
    finally:
        db.close()
        logging.getLogger("hpcflow").removeHandler(handler)
        handler.close()
