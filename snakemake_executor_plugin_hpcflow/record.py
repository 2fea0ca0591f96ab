"""A Snakemake run as hpcflow records its own: ``state.sqlite`` plus the per-user run index.

With it, ``hpcflow runs`` lists a Snakemake run, ``hpcflow status`` shows its jobs by rule
(running, succeeded, failed, with their log files) and its allocation, and ``hpcflow logs``
finds a job's output, exactly as for a run started by ``hpcflow run``. Every Snakemake job
is one task row (its attempts are Snakemake's retries); the task's name is the rule (or
``group:NAME`` for a group job), so ``status`` counts jobs per rule. A row's deps are
the rows of the jobs it depends on in Snakemake's DAG that ran in this run (a job already
up to date never runs and has no row), so ``hpcflow report`` draws the rules' edges.

The executor calls :meth:`RunRecord.started` from Snakemake's main thread and
:meth:`RunRecord.ended` from its status thread. SQLite connections belong to one thread, so
each write opens the database, writes one transaction and closes it again (several
milliseconds with its sync to disk): ``started`` only notes the attempt in memory, and
the status thread writes every attempt started since its last check at once
(:meth:`RunRecord.flush`, also before it records finished ones).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from hpcflow.engine.lifecycle import make_run_dir, new_run_id, run_meta
from hpcflow.store import statedb as st
from hpcflow.store.paths import RunPaths, StateRoot
from hpcflow.store.states import RunStatus
from hpcflow.worker.calls import Outcome
from snakemake_executor_plugin_hpcflow.translate import TaskRequest

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Ended:
    """One finished attempt: the task's row, and what the worker reported (None: lost)."""

    task_idx: int
    attempt: int
    outcome: Outcome | None
    #: What to store when there is no outcome (the job's worker or cluster went away).
    message: str = ""


def create_run_dir(
    workdir: Path, mode: str, snakefile: str, backend: str
) -> tuple[str, RunPaths, RunRecord]:
    """A fresh run directory under ``WORKDIR/.hpcflow/runs/`` as every hpcflow run has one
    (:func:`hpcflow.engine.lifecycle.make_run_dir`: ``run.json``, the per-user index of
    runs), and its ``state.sqlite``."""
    run_id = new_run_id()
    workflow = str((workdir / snakefile).resolve())
    started = time.time()
    extra = {"engine": "snakemake", "mode": mode}
    run_dir = StateRoot.in_folder(workdir).runs / run_id
    paths = make_run_dir(run_dir, run_id, workflow, backend, workdir, started, extra)
    record = RunRecord(paths)
    record.create(run_id, workflow, mode, backend, started)
    return run_id, paths, record


class RunRecord:
    """Writes one Snakemake run's ``state.sqlite`` (the run directory must exist)."""

    def __init__(self, paths: RunPaths) -> None:
        self.paths = paths
        self._lock = threading.Lock()
        self._index: dict[str, int] = {}
        #: The row of each Snakemake job id started (a group job's members: the group's).
        self._rows: dict[int, int] = {}
        self._error: str | None = None
        #: Tasks and attempts started and not written yet: (row, id, name, slug, deps,
        #: state) and (row, attempt, when).
        self._new_tasks: list[tuple[int, str, str, str, tuple[int, ...], str]] = []
        self._starts: list[tuple[int, int, float]] = []

    def create(self, run_id: str, workflow: str, mode: str, backend: str, started: float) -> None:
        """Write the run's meta data."""
        with st.StateDB(self.paths.state_db) as db:
            db.set_meta(
                **run_meta(
                    run_id,
                    RunStatus.RUNNING,
                    started,
                    workflow,
                    backend,
                    engine="snakemake",
                    mode=mode,
                    total=0,
                )  # fmt: skip
            )

    def set_meta(self, **values: object) -> None:
        """Add to the run's meta data (e.g. an elastic cluster's scheduler address)."""
        with self._lock, st.StateDB(self.paths.state_db) as db:
            self._write_started(db)
            db.set_meta(**values)

    def started(
        self, task: TaskRequest, jobs: Sequence[int] = (), upstream: Sequence[int] = ()
    ) -> int:
        """Note that ``task``'s attempt was sent to the cluster (written by the next
        :meth:`flush`); returns its row. ``jobs`` are the Snakemake job ids it runs (a
        group job's members), ``upstream`` those of the jobs they depend on: the rows of
        those already started are the row's deps (the others did not run in this run)."""
        with self._lock:
            idx = self._index.get(task.task_id)
            if idx is None:
                idx = len(self._index)
                self._index[task.task_id] = idx
                deps = tuple(sorted({self._rows[j] for j in upstream if j in self._rows} - {idx}))
                self._new_tasks.append((idx, task.task_id, task.name, task.slug, deps, st.PENDING))
            for jobid in jobs:
                self._rows.setdefault(jobid, idx)
            self._starts.append((idx, task.attempt, time.time()))
        return idx

    def flush(self) -> None:
        """Write the attempts started since the last write (one transaction; a failure
        to write is logged, not raised)."""
        with self._lock:
            if not self._starts:
                return
            try:
                with st.StateDB(self.paths.state_db) as db:
                    self._write_started(db)
            except Exception as exc:  # sqlite3 errors must not fail the Snakemake run
                log.warning("could not record %d started jobs: %s", len(self._starts), exc)

    def _write_started(self, db: st.StateDB) -> None:
        """Write what :meth:`started` noted (the caller holds the lock)."""
        if self._new_tasks:
            db.add_tasks(self._new_tasks)
            db.set_meta(total=len(self._index))
        for idx, attempt, when in self._starts:
            db.start_attempts([(idx, attempt)], when)
        self._new_tasks, self._starts = [], []

    def ended(self, finished: Sequence[Ended]) -> None:
        """Record finished attempts (one transaction for all of them; a failure to write
        is logged, not raised)."""
        if not finished:
            return
        now = time.time()
        records: list[st.AttemptRecord] = []
        states: dict[int, str] = {}
        for item in finished:
            if item.outcome is not None:
                record = item.outcome.record(item.task_idx)
                # The worker numbers calls itself; the attempt is Snakemake's (and its
                # values are not kept).
                record = replace(record, attempt=item.attempt, values=None)
            else:
                record = st.AttemptRecord(
                    task_idx=item.task_idx,
                    attempt=item.attempt,
                    state=st.FAILED,
                    exit_code=None,
                    started=None,
                    ended=now,
                    peak_rss=None,
                    host=None,
                    message=item.message or "lost: its Dask worker died or the cluster went away",
                )
            records.append(record)
            states[item.task_idx] = record.state
        try:
            with self._lock, st.StateDB(self.paths.state_db) as db:
                self._write_started(db)
                db.record_attempts(records, states)
        except Exception as exc:  # sqlite3 errors must not fail the Snakemake run
            log.warning("could not record %d finished jobs: %s", len(records), exc)

    def cancel_running(self) -> None:
        """Mark every task still running as cancelled (Ctrl-C, or Snakemake gave up)."""
        with self._lock, st.StateDB(self.paths.state_db) as db:
            self._write_started(db)
            running = db.tasks(states=(st.RUNNING,))
            db.set_states(((row.idx, st.CANCELLED) for row in running), "cancelled")

    def error(self, message: str) -> None:
        """Remember why the run fails although no job did (e.g. a job no worker fits)."""
        self._error = message
        with self._lock, st.StateDB(self.paths.state_db) as db:
            self._write_started(db)
            db.set_meta(error=message[:2000])

    def finish(self, cancelled: bool) -> str:
        """Write the run's final status: ``failed`` if a job's last attempt failed or the
        run had an error, else ``cancelled`` if jobs were cancelled, else ``succeeded``."""
        with self._lock, st.StateDB(self.paths.state_db) as db:
            self._write_started(db)
            failed = bool(db.tasks(states=(st.FAILED,))) or self._error is not None
            status = RunStatus.CANCELLED if cancelled else RunStatus.SUCCEEDED
            if failed:
                status = RunStatus.FAILED
            db.set_meta(status=status, ended=time.time())
        log.info("run in %s %s", self.paths.run_dir, status)
        return status

    def conclude(self, cancelled: bool) -> None:
        """The run's end: jobs still running were killed with the cluster, then the final
        status (a failure to write is logged: the run's result stands without it)."""
        try:
            self.cancel_running()
            self.finish(cancelled)
        except Exception as exc:  # sqlite3 errors
            log.warning("could not record the end of the run in %s: %s", self.paths.run_dir, exc)
