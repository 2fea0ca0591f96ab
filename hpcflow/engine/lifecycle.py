"""One run's life cycle on the side that creates it, written once for every mode.

:class:`RunLife` creates the run directory and its state database, attaches the run's
log file, short-cuts a run with nothing to run, records how the run ended (a summary, a
Ctrl-C, a failure) and, whatever happens, closes the state database, the memo, the
workflow's lock and the log file. Local, pilot, jobs and elastic mode all go through
it; they differ only in where the workers come from and who drives them. The Snakemake
plugin does not (Snakemake drives its jobs, and its ``RunRecord`` writes their rows): it
makes its run directory, id and meta with this module's :func:`make_run_dir`,
:func:`new_run_id` and :func:`run_meta`, so its run reads back as any other.
"""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from hpcflow._version import __version__
from hpcflow.errors import RunError
from hpcflow.spec.units import format_elapsed
from hpcflow.store import statedb as st
from hpcflow.store.atomic import write_bytes_atomic, write_json_atomic
from hpcflow.store.paths import RunPaths
from hpcflow.store.private import check_private, private_dir, private_file
from hpcflow.store.process import ProcessIdentity
from hpcflow.store.registry import register_run
from hpcflow.store.states import RunStatus
from hpcflow.store.storage_errors import storage_errors, storage_problem
from hpcflow.store.values import write_run_key

if TYPE_CHECKING:  # the driver and the loader are imported by what drives or plans a run
    from hpcflow.engine.driver import Observer
    from hpcflow.engine.prepare import PreparedRun, RunOptions

log = logging.getLogger(__name__)


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
        """Every task ended well: none failed, skipped, cancelled or left unfinished (a
        driver that died before it ran them)."""
        unfinished = any(
            self.totals.get(state) for state in (st.SKIPPED, st.PENDING, st.RUNNING, st.CANCELLED)
        )
        return not self.cancelled and not self.failed and not unfinished

    @property
    def status(self) -> RunStatus:
        """The run's status as this summary says it ended."""
        if self.drained and not self.failed:
            return RunStatus.DRAINED
        if self.cancelled:
            return RunStatus.CANCELLED
        return RunStatus.SUCCEEDED if self.ok else RunStatus.FAILED


def new_run_id() -> str:
    # os.urandom is what secrets.token_hex reads, without importing secrets (hmac, random).
    return time.strftime("%Y%m%d-%H%M%S") + "-" + os.urandom(3).hex()


class RunLife:
    """A run from the creation of its directory to the last close, on the creating side.

    Use it as a context manager around everything a mode does with ``prepared``: checks
    that fail before :meth:`create` still release the workflow's lock and the memo.
    ``backend`` and ``extra`` go to ``run.json`` (the profile, the mode, its sizes).
    """

    def __init__(
        self,
        prepared: PreparedRun,
        options: RunOptions,
        *,
        backend: str = "local",
        extra: Mapping[str, object] | None = None,
    ) -> None:
        self.prepared = prepared
        self.options = options
        self.backend = backend
        self.extra = dict(extra or {})
        self.started = time.time()
        self._run_id: str | None = None
        self._paths: RunPaths | None = None
        self._db: st.StateDB | None = None
        self._handler: logging.Handler | None = None

    def __enter__(self) -> RunLife:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- what exists once the run is created --------------------------------------

    @property
    def run_id(self) -> str:
        if self._run_id is None:
            raise RunError("the run has not been created yet")
        return self._run_id

    @property
    def paths(self) -> RunPaths:
        if self._paths is None:
            raise RunError("the run has not been created yet")
        return self._paths

    @property
    def db(self) -> st.StateDB:
        """The run's state database, while this side is its writer."""
        if self._db is None:
            raise RunError("this side no longer writes the run's state")
        return self._db

    def create(self) -> PreparedRun:
        """Make the run directory and its state (every task pending or cached); log to
        the run's ``driver.log`` from now on. Returns the run as prepared for it (also
        :attr:`prepared` from now on): its calls name the run's files."""
        self.prepared, self._run_id, self._paths, self._db = create_run(
            self.prepared, self.options, backend=self.backend, extra=self.extra
        )
        self._handler = log_to(self._paths.driver_log)
        # The workflow's lease names the run; should another run ever take it, this one
        # stops as `hpcflow cancel` would stop it.
        self.prepared.lock.set_run(self._run_id)
        self.prepared.lock.on_lost = lease_lost(self._paths)
        return self.prepared

    @property
    def nothing_to_run(self) -> bool:
        """Whether every task is cached: the run succeeds without any worker."""
        return self.prepared.decision.to_run == 0

    def all_cached(self, observer: Observer | None = None) -> RunSummary:
        """End a run whose tasks are all cached."""
        totals: dict[str, int] = {st.CACHED: len(self.prepared.graph.instances)}
        if observer is not None:
            observer.update(self.db.counts())
        with storage_errors(self.paths.run_dir):
            return conclude(self.db, RunSummary(self.run_id, self.paths, totals), self.started)

    def hand_over(self) -> None:
        """From now on a driver elsewhere (inside the allocation) is the only writer of
        the state database and of the memo: close both here."""
        if self._db is not None:
            self._db.close()
            self._db = None
        self.prepared.memo.close()

    # -- how the run ends ---------------------------------------------------------

    def summary(self, *, cancelled: bool = False) -> RunSummary:
        """The run's summary, read back from its state database."""
        return summarize(self.db, self.paths, self.run_id, self.started, cancelled)

    def conclude(self, summary: RunSummary | None = None) -> RunSummary:
        """Record how the run ended (from ``summary``, or from the state database)."""
        return conclude(self.db, summary or self.summary(), self.started)

    def follow(
        self,
        body: Callable[[], RunSummary | None],
        *,
        on_stop: Callable[[str], None] | None = None,
        failure: str = "run failed",
    ) -> RunSummary:
        """Run ``body`` (this side drives or follows the run) and record its end.

        Ctrl-C (and ``hpcflow cancel``) end the run as cancelled; any other exception
        ends it as failed and propagates. Either way ``on_stop`` is told why first (to
        cancel what was submitted), and tasks left running or pending are marked
        cancelled. ``body`` returns the summary, or None to read it back.
        """
        try:
            summary = body()
        except KeyboardInterrupt:
            if on_stop is not None:
                on_stop("run cancelled")
            with storage_errors(self.paths.run_dir):
                mark_unfinished(self.db, "run cancelled")
                self.db.set_meta(status=RunStatus.CANCELLED, ended=time.time())
            return self.summary(cancelled=True)
        except BaseException as exc:
            if on_stop is not None:
                on_stop(f"{failure}: {exc}")
            self._record_failure(f"{failure}: {exc}", str(exc))
            raise
        with storage_errors(self.paths.run_dir):
            return summary if summary is not None else self.conclude()

    def _record_failure(self, why: str, error: str) -> None:
        """Record the run as failed, ``why`` on its unfinished tasks. A full or unwritable
        disk (often why it failed) is said in the log: the failure itself is what the
        caller raises, not the write that could not record it."""
        try:
            mark_unfinished(self.db, why[:500])
            self.db.set_meta(status=RunStatus.FAILED, error=error[:2000], ended=time.time())
        except (OSError, sqlite3.Error) as exc:
            if storage_problem(exc) is None:
                raise
            log.error("could not record the run's failure in %s: %s", self.paths.state_db, exc)

    def close(self) -> None:
        """Close what this side holds: state database, memo, lock, log file (idempotent)."""
        if self._db is not None:
            self._db.close()
            self._db = None
        self.prepared.memo.close()
        self.prepared.lock.release()
        if self._handler is not None:
            logging.getLogger("hpcflow").removeHandler(self._handler)
            self._handler.close()
            self._handler = None


def create_run(
    prepared: PreparedRun,
    options: RunOptions,
    *,
    backend: str = "local",
    extra: dict[str, object] | None = None,
) -> tuple[PreparedRun, str, RunPaths, st.StateDB]:
    """Make the run directory and its state database (every task pending or cached).

    Returns ``prepared`` for this run (its calls name the run's files and journal), the
    run's id, paths and state database."""
    started = time.time()
    graph = prepared.graph
    run = prepared.decision.run
    run_id = new_run_id()
    paths = _create_run_dir(prepared, options, run_id, started, backend, extra or {})
    db = st.StateDB(paths.state_db)
    names = [template.spec.name for template in graph.templates]
    slug = prepared.factory.slug
    db.add_tasks(
        (
            inst.index,
            inst.id,
            names[inst.spec_index],
            slug(inst),
            inst.deps,
            st.PENDING if run[inst.index] else st.CACHED,
        )
        for inst in graph.instances
    )
    db.set_meta(
        **run_meta(
            run_id,
            RunStatus.CREATED,
            started,
            str(prepared.workflow_file.resolve()),
            backend,
            total=len(graph.instances),
            to_run=prepared.decision.to_run,
            waiting=[graph.templates[i].spec.name for i in sorted(graph.waiting)],
        )
    )
    write_json_atomic(paths.plan, plan_summary(prepared))
    journal = prepared.state_root.journal_prefix(prepared.key, run_id)
    for_run = replace(prepared, factory=prepared.factory.for_run(paths, journal))
    return for_run, run_id, paths, db


def run_meta(
    run_id: str, status: RunStatus, started: float, workflow: str, backend: str, **extra: object
) -> dict[str, object]:
    """What ``state.sqlite``'s meta says of a new run: its id, status, start, the
    creating process (host, pid and the identity that proves it later), the workflow file,
    the backend, and ``extra``."""
    return {
        "run_id": run_id,
        "status": status,
        "started": started,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "creator": ProcessIdentity.current().to_meta(),
        "workflow": workflow,
        "backend": backend,
        **extra,
    }


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


def _create_run_dir(
    prepared: PreparedRun,
    options: RunOptions,
    run_id: str,
    started: float,
    backend: str,
    extra: dict[str, object],
) -> RunPaths:
    run_dir = options.run_dir or (prepared.state_root.runs / run_id)
    fields = {
        "workflow_name": prepared.graph.loaded.workflow.name,
        "options": {"force": options.force, "rerun": list(options.rerun)},
        **extra,
    }
    paths = make_run_dir(
        run_dir.resolve(),
        run_id,
        str(prepared.workflow_file.resolve()),
        backend,
        prepared.graph.loaded.base_dir,
        started,
        fields,
        copy=prepared.workflow_file,
    )
    if prepared.graph.loaded.sources:
        # The files the sweeps read may change; the run's allocations use what was read.
        write_json_atomic(paths.sweep_sources, prepared.graph.loaded.sources)
    if prepared.graph.loaded.included:
        write_json_atomic(paths.included_files, prepared.graph.loaded.included)
    return paths


def make_run_dir(
    run_dir: Path,
    run_id: str,
    workflow: str,
    backend: str,
    base_dir: Path,
    started: float,
    extra: Mapping[str, object],
    *,
    copy: Path | None = None,
) -> RunPaths:
    """Create a run's directory (owner only; new or empty) with its ``run.json``, and list
    the run in the per-user index of runs (``hpcflow runs``). Every engine's runs do.

    ``run.json`` has the run's id, workflow, start, creating process, hpcflow version,
    backend and base directory, then ``extra`` (the mode's, or the engine's, own fields).
    ``copy`` is the workflow file to keep a copy of in the run directory.
    """
    if run_dir.exists():
        check_private(run_dir)  # not a folder another account made for us
    if run_dir.exists() and any(run_dir.iterdir()):
        raise RunError(f"run directory {run_dir} is not empty", hint="choose a new --run-dir")
    try:
        private_dir(run_dir)  # 0700, this user's (an existing empty folder too)
        paths = RunPaths(run_dir)
        # Made here, once: tasks on many nodes then each make only their own folder in
        # it, never the same parent at once through different shared-file-system clients.
        private_dir(paths.tasks_dir)
        write_run_key(paths.value_key)  # what the run's workers sign values with
        if copy is not None:
            write_bytes_atomic(paths.workflow_copy, copy.read_bytes(), make_parents=False)
        write_json_atomic(
            paths.run_info,
            {
                "run_id": run_id,
                "workflow": workflow,
                "started": started,
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "hpcflow": __version__,
                "backend": backend,
                "base_dir": str(base_dir),
                **extra,
            },
        )
    except OSError as exc:
        raise RunError(f"cannot create run directory {run_dir}: {exc}") from None
    register_run(run_id, run_dir, workflow, started)
    return paths


def lease_lost(paths: RunPaths) -> Callable[[str], None]:
    """What a run does when another run took the workflow's lease: it asks its own driver
    to stop, as `hpcflow cancel` does (the driver sees the request within a second)."""

    def stop(why: str) -> None:
        write_json_atomic(paths.cancel_request, {"requested": time.time(), "lease_lost": why})

    return stop


def conclude(db: st.StateDB, summary: RunSummary, started: float) -> RunSummary:
    """Record the run's end from ``summary``: its status (drained, cancelled, succeeded or
    failed) and end time."""
    summary.elapsed = time.time() - started
    status = summary.status
    db.set_meta(status=status, ended=time.time())
    counts = ", ".join(f"{n} {state}" for state, n in summary.totals.items()) or "no tasks"
    log.info("run %s %s in %s: %s", summary.run_id, status, format_elapsed(summary.elapsed), counts)
    return summary


def log_to(path: Path) -> logging.Handler:
    private_file(path)  # 0600 whatever the umask
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("hpcflow")
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > logging.INFO:
        logger.setLevel(logging.INFO)
    return handler


def mark_unfinished(db: st.StateDB, message: str) -> None:
    """Mark every task still running or pending as cancelled, saying why."""
    rows = db.tasks(states=(st.RUNNING, st.PENDING))
    db.set_states(((r.idx, st.CANCELLED) for r in rows), message=message)


def summarize(
    db: st.StateDB, paths: RunPaths, run_id: str, started: float, cancelled: bool = False
) -> RunSummary:
    """The :class:`RunSummary` of a batch run, read back from its state database.

    A commit cut short by a killed driver is rolled back by the read
    (:func:`hpcflow.store.damage.roll_back_cut_commit`); a cancelled run whose state still
    cannot be read gets a summary that says so instead of failing the cancellation.
    """
    totals: dict[str, int] = {}
    try:
        for counts in db.counts().values():
            for state, n in counts.items():
                totals[state] = totals.get(state, 0) + n
        failed = [r.idx for r in db.tasks(states=(st.FAILED,))]
    except sqlite3.Error as exc:
        if not cancelled:
            raise
        log.warning(
            "the cancelled run's task states cannot be read now (%s); `hpcflow run` of the "
            "same workflow resumes it from its last commit and the tasks' journals",
            exc,
        )
        totals, failed = {}, []
    return RunSummary(
        run_id=run_id,
        paths=paths,
        totals=totals,
        failed=failed,
        cancelled=cancelled,
        elapsed=time.time() - started,
    )
