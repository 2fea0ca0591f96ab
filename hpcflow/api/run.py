"""A run read back: its status, task states, logs and results, from its run directory.

A :class:`Run` is a reader: it opens ``state.sqlite`` read-only for each question (the
run's driver, here or in an allocation, is its only writer), so it can follow a run that
is still going, from any process, and is never stale.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcflow.api.locate import find_run, fresh_allocations, read_run, runs_in
from hpcflow.api.logs import Stream, matching_tasks, read_log
from hpcflow.errors import RunError
from hpcflow.store.paths import RunPaths
from hpcflow.store.registry import list_runs
from hpcflow.store.results import load_result, result_file
from hpcflow.store.statedb import StateDB, TaskRow
from hpcflow.store.states import RunStatus, TaskState

if TYPE_CHECKING:
    from hpcflow.api.cancel import Cancellation

#: The counts of a run's tasks: per task name, how many are in each state.
Counts = dict[str, dict[str, int]]
#: How often :meth:`Run.wait` reads the state at most, and at least.
_FIRST_POLL, _LAST_POLL = 0.05, 2.0
#: How often a waiting reader asks the batch system whether the allocations still exist.
_ALLOCATIONS_EVERY = 30.0


@dataclass(frozen=True)
class TaskInfo:
    """One task instance of a run, as its state database has it."""

    id: str
    name: str
    state: TaskState
    attempts: int
    exit_code: int | None
    started: float | None
    ended: float | None
    #: The host (node) its latest attempt ran on.
    node: str | None
    #: Peak resident memory of its latest attempt, in bytes (when measured).
    peak_rss: int | None
    message: str | None

    @property
    def elapsed(self) -> float | None:
        """Seconds its latest attempt ran (None before it ended)."""
        if self.started is None or self.ended is None:
            return None
        return self.ended - self.started

    @classmethod
    def from_row(cls, row: TaskRow) -> TaskInfo:
        return cls(
            row.id,
            row.name,
            TaskState(row.state),
            row.attempts,
            row.exit_code,
            row.started,
            row.ended,
            row.host,
            row.peak_rss,
            row.message,
        )


class Run:
    """A run of a workflow, by its directory: ``hpcflow.api.open_run(RUN)`` finds one by
    id or prefix, ``Workflow.run`` returns the one it made."""

    def __init__(self, run_dir: str | Path) -> None:
        self.paths = RunPaths(Path(run_dir).resolve())
        if not self.paths.state_db.exists():
            raise RunError(f"{run_dir} is not a run directory (it has no state.sqlite)")

    def __repr__(self) -> str:
        return f"Run({str(self.run_dir)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Run) and other.run_dir == self.run_dir

    def __hash__(self) -> int:
        return hash(self.run_dir)

    # -- what the run is --------------------------------------------------------------

    @property
    def run_dir(self) -> Path:
        """The run directory: state, logs and results."""
        return self.paths.run_dir

    @property
    def id(self) -> str:
        """The run id (``hpcflow status ID``)."""
        return str(self._meta().get("run_id") or self.run_dir.name)

    @property
    def workflow(self) -> Path:
        """The workflow file the run ran."""
        return Path(str(self._meta().get("workflow", "")))

    @property
    def status(self) -> RunStatus:
        """The run's status now: ``running`` while its driver runs; ``interrupted`` when
        the driver on this machine has gone without saying how the run ended."""
        return _status(read_run(self.paths).status)

    @property
    def ended(self) -> bool:
        """Whether the run has ended (nothing will change any more unless it is resumed)."""
        status = self.status
        return status.final or status == RunStatus.INTERRUPTED

    @property
    def ok(self) -> bool:
        """Whether the run has ended and every task succeeded (or was up to date)."""
        return self.status == RunStatus.SUCCEEDED

    @property
    def started(self) -> float | None:
        """When the run started (seconds since the epoch)."""
        value = self._meta().get("started")
        return float(value) if isinstance(value, int | float) else None

    @property
    def elapsed(self) -> float | None:
        """Seconds from the start to the end (or to now, while it runs)."""
        started = self.started
        if started is None:
            return None
        ended = self._meta().get("ended")
        return (float(ended) if isinstance(ended, int | float) else time.time()) - started

    @property
    def error(self) -> str | None:
        """Why the run failed as a whole (a lost allocation, a driver error), if it did."""
        error = self._meta().get("error")
        return str(error) if error else None

    def counts(self) -> Counts:
        """Per task name, how many tasks are in each state."""
        return read_run(self.paths).counts

    # -- its tasks -----------------------------------------------------------------------

    def tasks(self, name: str | None = None) -> list[TaskInfo]:
        """Every task instance in the workflow's order; with ``name``, only those a task
        name, an id or a glob over ids names."""
        if name is not None:
            return [TaskInfo.from_row(row) for row in matching_tasks(self.paths, name)]
        with StateDB(self.paths.state_db, readonly=True) as db:
            return [TaskInfo.from_row(row) for row in db.tasks()]

    def task(self, task_id: str) -> TaskInfo:
        """The task instance ``task_id`` (an id such as ``make[i=3]``, or the name of a
        task without a sweep)."""
        return TaskInfo.from_row(self._row(task_id))

    def states(self) -> dict[str, TaskState]:
        """Every task instance's state, by id."""
        return {task.id: task.state for task in self.tasks()}

    def log(self, task_id: str, stream: Stream = "stdout", attempt: int | None = None) -> str:
        """What task ``task_id`` wrote to ``stream`` in ``attempt`` (default: its latest);
        empty when it wrote nothing there or has not started."""
        data = read_log(self.paths, self._row(task_id), stream, attempt)
        return "" if data is None else data.decode("utf-8", errors="replace")

    def driver_log(self) -> str:
        """The run's own log (``driver.log``)."""
        try:
            return self.paths.driver_log.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def result(self, task_id: str) -> Any:
        """The return value of python task ``task_id``, as the object it returned (from
        the run that made it, for a task that was up to date here). Raises
        :class:`RunError` for a task that did not succeed or returned nothing."""
        return load_result(self.run_dir, task_id)

    def result_file(self, task_id: str) -> Path:
        """The file holding ``task_id``'s return value (``value.pickle``: hpcflow's header
        with the MAC, then the pickle; or the attempt's JSON): :meth:`result` reads it,
        ``hpcflow result -o`` saves the bare pickle."""
        return result_file(self.run_dir, task_id)

    def results(self, name: str) -> dict[str, Any]:
        """The return values of every instance of python task ``name`` (a sweep), by
        instance id, in sweep order."""
        return {row.id: self.result(row.id) for row in self._rows_named(name)}

    # -- following it ----------------------------------------------------------------------

    def wait(self, timeout: float | None = None) -> Run:
        """Wait until the run has ended (a detached batch run, or one another process
        drives) and return it. Reads the state database, at first often, then at most
        every 2 s; asks the batch system every 30 s whether the run's allocations still
        exist. Raises :class:`TimeoutError` after ``timeout`` seconds, and
        :class:`RunError` when the allocations ended without the driver ending the run."""
        for _ in self.follow(timeout=timeout):
            pass
        return self

    def follow(
        self, timeout: float | None = None, on_change: Callable[[Counts], None] | None = None
    ) -> Iterator[Counts]:
        """The task counts each time they change, until the run ends (the last counts
        come last); ``on_change`` is called with them too. See :meth:`wait`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = _FIRST_POLL
        last: Counts | None = None
        checked = time.monotonic()
        while True:
            view = read_run(self.paths)
            if view.counts != last:
                last = view.counts
                delay = _FIRST_POLL
                if on_change is not None:
                    on_change(last)
                yield last
            status = _status(view.status)
            if status.final or status == RunStatus.INTERRUPTED:
                return
            if time.monotonic() - checked >= _ALLOCATIONS_EVERY:
                checked = time.monotonic()
                self._check_allocations()
            if deadline is not None and time.monotonic() + delay > deadline:
                raise TimeoutError(f"run {self.id} is still {status} after {timeout} s")
            time.sleep(delay)
            delay = min(delay * 1.5, _LAST_POLL)

    def cancel(self) -> Cancellation:
        """Cancel the run: ask its driver to stop, and the batch system to end its
        allocations (``hpcflow cancel``; :mod:`hpcflow.api.cancel` says how). Returns
        what was done; a run that has ended is left as it is."""
        from hpcflow.api.cancel import cancel_run

        return cancel_run(self.paths)

    def _check_allocations(self) -> None:
        """Raise :class:`RunError` when every allocation of the run has ended (as the
        batch system says now) while the run has not."""
        from hpcflow.backends.base import AllocationState

        with StateDB(self.paths.state_db, readonly=True) as db:
            allocations = db.allocations()
        if not allocations:
            return
        fresh = fresh_allocations(allocations)
        if all(AllocationState(a.state).final for a in fresh) and not self.ended:
            last = fresh[-1]
            raise RunError(
                f"run {self.id}: allocation {last.native_id} ended {last.state} before the run did",
                hint=f"its log: {last.stderr}; `hpcflow run` of the workflow resumes it",
            )

    # -- helpers ---------------------------------------------------------------------------

    def _meta(self) -> dict[str, Any]:
        return read_run(self.paths).meta

    def _row(self, task_id: str) -> TaskRow:
        with StateDB(self.paths.state_db, readonly=True) as db:
            row = next((r for r in db.tasks() if r.id == task_id), None)
        if row is None:
            raise RunError(
                f"no task {task_id!r} in run {self.run_dir.name}",
                hint="Run.tasks() lists them (ids look like name[param=value])",
            )
        return row

    def _rows_named(self, name: str) -> list[TaskRow]:
        with StateDB(self.paths.state_db, readonly=True) as db:
            rows = [r for r in db.tasks() if r.name == name]
        if not rows:
            raise RunError(f"no task named {name!r} in run {self.run_dir.name}")
        return rows


def open_run(run: str | Path = "latest", folder: str | Path | None = None) -> Run:
    """A run by its id (or a unique prefix of it), its directory, or ``"latest"``: the
    newest run of the workflows in ``folder`` (default: the current folder)."""
    found = find_run(str(run), Path(folder) if folder is not None else None)
    return Run(found.run_dir)


def runs(folder: str | Path | None = None) -> list[Run]:
    """The runs of the workflows in ``folder``, oldest first (those kept in its
    ``.hpcflow/runs`` and those of its workflow files kept elsewhere); without a folder,
    every run of yours that hpcflow knows of."""
    registered = list_runs()
    if folder is None:
        return [Run(r.run_dir) for r in registered if RunPaths(r.run_dir).state_db.exists()]
    own, _ = runs_in(Path(folder).resolve(), registered)
    return [Run(run_dir) for run_dir in sorted(own, key=lambda d: own[d])]


def _status(text: str) -> RunStatus:
    """A run's status as recorded (a run being created has none yet)."""
    try:
        return RunStatus(text)
    except ValueError:
        return RunStatus.CREATED
