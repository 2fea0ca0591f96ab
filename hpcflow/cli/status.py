"""`hpcflow status [RUN]`: the state of a run, live or finished, from any shell."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import click

from hpcflow.spec.units import format_elapsed
from hpcflow.store.states import RunStatus

#: Run states after which nothing changes any more.
FINAL = tuple(status for status in RunStatus if status.final)


@click.command("status")
@click.argument("run", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--watch", is_flag=True, help="Keep showing the status until the run ends.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.2),
    default=2.0,
    show_default=True,
    help="Seconds between refreshes with --watch.",
)
def command(run: str | None, as_json: bool, watch: bool, interval: float) -> None:
    """Show RUN (a run id, its prefix, or a run directory; default: the latest run of
    the workflows in this folder, else your latest anywhere)."""
    from rich.console import Console

    from hpcflow.cli._common import find_run

    paths = find_run(run)
    if as_json:
        snap = take_snapshot(paths)
        while watch and not snap.ended:
            click.echo(json.dumps(snap.as_json()))
            time.sleep(interval)
            snap = take_snapshot(paths)
        click.echo(json.dumps(snap.as_json(), indent=None if watch else 2))
        return
    out = Console()
    snap = take_snapshot(paths)
    if not watch or snap.ended:
        out.print(render(snap))
        return
    if not out.is_terminal:
        # A log file or a pipe: a line whenever the counts change, the full view at the end.
        last = None
        while not snap.ended:
            line = snap.one_line()
            if line != last:
                out.print(line, highlight=False, soft_wrap=True)
                last = line
            time.sleep(interval)
            snap = take_snapshot(paths)
        out.print(render(snap))
        return
    from rich.live import Live

    with Live(render(snap), console=out, refresh_per_second=4, transient=False) as live:
        try:
            while not snap.ended:
                time.sleep(interval)
                snap = take_snapshot(paths)
                live.update(render(snap))
        except KeyboardInterrupt:
            pass  # stop watching; the run goes on


@dataclass
class Snapshot:
    """Everything `status` shows, read once from the run directory and the batch system."""

    paths: Any
    view: Any
    status: str
    failed: list[Any]
    running: list[Any]
    allocations: list[Any]
    dashboard: Any
    elastic: dict[str, Any] | None = None  # the latest sample of an elastic cluster

    @property
    def ended(self) -> bool:
        return self.status in FINAL or self.status.startswith(("ended early", "interrupted"))

    def one_line(self) -> str:
        totals: dict[str, int] = {}
        for counts in self.view.counts.values():
            for state, n in counts.items():
                totals[state] = totals.get(state, 0) + n
        parts = ", ".join(f"{n} {state}" for state, n in sorted(totals.items()))
        run_id = self.view.meta.get("run_id")
        return f"{time.strftime('%H:%M:%S')} run {run_id}: {self.status}: {parts}"

    def as_json(self) -> dict[str, Any]:
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
        from hpcflow.store.tasklogs import LogIndex, locate_attempt_log

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


#: `--watch` asks the batch system at most this often, whatever --interval says.
REFRESH_SECONDS = 5.0
_last_refresh: float | None = None


def take_snapshot(paths: Any) -> Snapshot:
    from hpcflow.backends.base import AllocationState
    from hpcflow.cli._common import fresh_allocations, view_of
    from hpcflow.cli._dashboard import dashboard_at, find_dashboard
    from hpcflow.errors import RunError
    from hpcflow.store import statedb as st
    from hpcflow.store.statedb import StateDB

    global _last_refresh
    try:
        # One reader: the counts, the task lists and the status are of one commit.
        with StateDB(paths.state_db, readonly=True) as db:
            view = view_of(paths, db)
            failed = db.tasks(states=(st.FAILED,))
            running = db.tasks(states=(st.RUNNING,))
            allocations = db.allocations()
    except (FileNotFoundError, OSError) as exc:
        raise RunError(f"cannot read run state in {paths.run_dir}: {exc}") from None
    if _last_refresh is None or time.monotonic() - _last_refresh >= REFRESH_SECONDS:
        _last_refresh = time.monotonic()
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
        if paths.cancel_request.exists():
            status = RunStatus.CANCELLED  # by `hpcflow cancel`, before its driver could say so
        else:
            status = f"ended early (allocation {allocations[-1].native_id} {allocations[-1].state})"
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


def _latest_sample(path: Any) -> dict[str, Any] | None:
    """The last line of an elastic run's worker log (None without one)."""
    from hpcflow.store.tail import tail_lines

    lines = tail_lines(path, 1, max_bytes=4096)
    if not lines:
        return None
    try:
        sample = json.loads(lines[-1])
    except ValueError:
        return None
    return sample if isinstance(sample, dict) else None


def render(snap: Snapshot) -> Any:
    """The human view of a snapshot, as one rich renderable."""
    from rich.console import Group
    from rich.text import Text

    from hpcflow.backends.base import AllocationState
    from hpcflow.cli import console as ui

    view, paths = snap.view, snap.paths
    parts: list[Any] = []
    started = view.meta.get("started")
    ended = view.meta.get("ended") or time.time()
    elapsed = format_elapsed(ended - started) if isinstance(started, float | int) else "?"
    parts.append(
        Text.from_markup(f"run [bold]{view.meta.get('run_id')}[/bold] · ")
        + Text(f"{snap.status} · {elapsed}")
    )
    parts.append(Text(f"workflow {view.meta.get('workflow')}"))
    if view.meta.get("engine"):
        # A run another engine drove through hpcflow (the Snakemake executor plugin).
        parts.append(Text(f"engine   {view.meta['engine']} ({view.meta.get('mode', '?')} mode)"))
    parts.append(Text(f"run dir  {paths.run_dir}"))
    for a in snap.allocations:
        reason = f" — {a.reason}" if a.reason else ""
        queued = AllocationState(a.state) is AllocationState.QUEUED
        waiting = f" (queued {_ago(a.submitted)})" if queued else ""
        parts.append(
            Text(
                f"allocation {a.native_id} ({a.backend}{', pool ' + a.pool if a.pool else ''}): "
                f"{a.native_state or a.state}{waiting}{reason}"
            )
        )
    if snap.elastic is not None:
        parts.append(
            Text(
                f"elastic workers: {snap.elastic.get('workers', '?')} connected, "
                f"{snap.elastic.get('requested', '?')} worker job(s) requested"
            )
        )
        for pool, counts in (snap.elastic.get("pools") or {}).items():
            parts.append(
                Text(
                    f"  pool {pool}: {counts.get('workers', '?')} connected, "
                    f"{counts.get('requested', '?')} worker job(s) requested"
                )
            )
    if snap.dashboard is not None:
        parts.append(Text(f"dashboard {snap.dashboard.url}"))
        if snap.dashboard.tunnel:
            parts.append(
                Text(
                    f"  from your machine: {snap.dashboard.tunnel}  "
                    f"then open {snap.dashboard.local_url}"
                )
            )
    if view.meta.get("error"):
        parts.append(Text.from_markup("[red]error:[/red] ") + Text(str(view.meta["error"])))
    parts.append(ui.counts_table(view.counts, view.order))
    if view.meta.get("waiting"):
        waiting = ", ".join(view.meta["waiting"])
        parts.append(Text(f"not planned yet (fan-out during the run): {waiting}"))
    if snap.running:
        shown = ", ".join(f"{r.id} on {r.host}" if r.host else r.id for r in snap.running[:10])
        parts.append(Text(f"running: {shown}" + (" …" if len(snap.running) > 10 else "")))
    if snap.failed:
        parts.append(
            ui.failures_renderable(paths, snap.failed, run=str(view.meta.get("run_id") or ""))
        )
    return Group(*parts)


def _ago(stamp: float | None) -> str:
    if not stamp:
        return "?"
    seconds = max(0, int(time.time() - stamp))
    if seconds < 120:
        return f"{seconds}s ago"
    return f"{seconds // 60} min ago"
