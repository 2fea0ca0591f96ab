"""What ``hpcflow status`` shows of a run, read once: its state database's view, its
failed and running tasks, its allocations as the batch system has them now, the Dask
dashboard of a live run and an elastic run's latest worker sample."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hpcflow.api.dashboard import Dashboard, dashboard_at, find_dashboard
from hpcflow.api.locate import RunView, fresh_allocations, view_of
from hpcflow.backends.base import AllocationState
from hpcflow.errors import RunError
from hpcflow.store.statedb import StateDB
from hpcflow.store.states import RunStatus, TaskState
from hpcflow.store.tail import tail_lines
from hpcflow.store.tasklogs import LogIndex, locate_attempt_log

if TYPE_CHECKING:
    from pathlib import Path

    from hpcflow.store.paths import RunPaths
    from hpcflow.store.statedb import TaskRow

#: Run states after which nothing changes any more.
FINAL = tuple(status for status in RunStatus if status.final)

#: `--watch` asks the batch system at most this often, whatever --interval says.
REFRESH_SECONDS = 5.0


@dataclass
class Snapshot:
    """Everything `status` shows, read once from the run directory and the batch system."""

    paths: RunPaths
    view: RunView
    #: The run's status, or ``ended early (allocation ID STATE)`` where its allocations
    #: ended under it.
    status: str
    failed: list[TaskRow]
    running: list[TaskRow]
    allocations: list[Any]
    dashboard: Dashboard | None
    elastic: dict[str, Any] | None = None  # the latest sample of an elastic cluster

    @property
    def ended(self) -> bool:
        """Whether nothing about the run changes any more (unless it is resumed)."""
        return self.status in FINAL or self.status.startswith(("ended early", "interrupted"))

    def one_line(self) -> str:
        """The time, the run and its counts of tasks per state, on one line."""
        totals: dict[str, int] = {}
        for counts in self.view.counts.values():
            for state, n in counts.items():
                totals[state] = totals.get(state, 0) + n
        parts = ", ".join(f"{n} {state}" for state, n in sorted(totals.items()))
        run_id = self.view.meta.get("run_id")
        return f"{time.strftime('%H:%M:%S')} run {run_id}: {self.status}: {parts}"

    def as_json(self) -> dict[str, Any]:
        """The snapshot as ``hpcflow status --json`` prints it."""
        view, paths = self.view, self.paths
        return {
            "run_id": view.meta.get("run_id"),
            "run_dir": str(paths.run_dir),
            "status": self.status,
            "workflow": view.meta.get("workflow"),
            "engine": view.meta.get("engine", "hpcflow"),
            "started": view.meta.get("started"),
            "ended": view.meta.get("ended"),
            "counts": view.counts,
            "failed": self._failed_json(),
            "running": [{"id": r.id, "host": r.host, "started": r.started} for r in self.running],
            "allocations": [
                {
                    "native_id": a.native_id,
                    "backend": a.backend,
                    "pool": a.pool,
                    "state": a.state,
                    "native_state": a.native_state,
                    "reason": a.reason,
                    "stdout": a.stdout,
                    "stderr": a.stderr,
                }
                for a in self.allocations
            ],
            "error": view.meta.get("error"),
            "waiting": view.meta.get("waiting") or [],
            "dashboard": (
                {"url": self.dashboard.url, "tunnel": self.dashboard.tunnel}
                if self.dashboard
                else None
            ),
            "elastic": self.elastic,
        }

    def _failed_json(self) -> list[dict[str, Any]]:
        """The failed tasks; each one's ``stderr`` file, or with per-worker logs ``null``,
        its ``stderr_records`` and the ``log_command`` that prints them."""
        paths = self.paths
        run = str(self.view.meta.get("run_id") or paths.run_dir.name)
        index = LogIndex(paths.logs_dir) if self.failed and paths.logs_dir.is_dir() else None
        return [
            {
                "id": r.id,
                "exit_code": r.exit_code,
                "attempts": r.attempts,
                "message": r.message,
                **locate_attempt_log(
                    paths, run, r.id, paths.stderr(r.slug, r.attempts), index
                ).as_json("stderr"),
            }
            for r in self.failed
        ]


class StatusReader:
    """Takes snapshots of one run, again and again (``hpcflow status --watch``), asking
    the batch system about its allocations at most every ``refresh_every`` seconds (in
    between, they are as the run's state database has them)."""

    def __init__(self, paths: RunPaths, refresh_every: float = REFRESH_SECONDS) -> None:
        self.paths = paths
        self.refresh_every = refresh_every
        self._refreshed: float | None = None

    def snapshot(self) -> Snapshot:
        """The :class:`Snapshot` of the run now."""
        paths = self.paths
        try:
            # One reader: the counts, the task lists and the status are of one commit.
            with StateDB(paths.state_db, readonly=True) as db:
                view = view_of(paths, db)
                failed = db.tasks(states=(TaskState.FAILED,))
                running = db.tasks(states=(TaskState.RUNNING,))
                allocations = db.allocations()
        except (FileNotFoundError, OSError) as exc:
            raise RunError(f"cannot read run state in {paths.run_dir}: {exc}") from None
        now = time.monotonic()
        if self._refreshed is None or now - self._refreshed >= self.refresh_every:
            self._refreshed = now
            allocations = fresh_allocations(allocations)
        status = view.status
        live = status in (RunStatus.SUBMITTED, RunStatus.RUNNING)
        dashboard = find_dashboard(paths.scheduler_address) if live else None
        elastic = _latest_sample(paths.elastic_log) if live else None
        if live and dashboard is None and view.meta.get("dashboard"):
            # Elastic mode: the scheduler (and its dashboard) run in the submitting process.
            dashboard = dashboard_at(str(view.meta["dashboard"]))
        if (
            allocations
            and status in (RunStatus.SUBMITTED, RunStatus.RUNNING, RunStatus.INTERRUPTED)
            and all(AllocationState(a.state).final for a in allocations)
        ):
            last = allocations[-1]
            if paths.cancel_request.exists():
                status = RunStatus.CANCELLED  # by `hpcflow cancel`, before its driver said so
            else:
                status = f"ended early (allocation {last.native_id} {last.state})"
        return Snapshot(
            paths=paths,
            view=view,
            status=status,
            failed=failed,
            running=running,
            allocations=allocations,
            dashboard=dashboard,
            elastic=elastic,
        )


def allocation_queued(allocation: Any) -> bool:
    """Whether an allocation (a row of the run's state database) waits in the queue."""
    return AllocationState(allocation.state) is AllocationState.QUEUED


def _latest_sample(path: Path) -> dict[str, Any] | None:
    """The last line of an elastic run's worker log (None without one)."""
    lines = tail_lines(path, 1, max_bytes=4096)
    if not lines:
        return None
    try:
        sample = json.loads(lines[-1])
    except ValueError:
        return None
    return sample if isinstance(sample, dict) else None
