"""`hpcflow status [RUN]`: the state of a run, live or finished, from any shell."""

from __future__ import annotations

import json
import time

import click


@click.command("status")
@click.argument("run", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def command(run: str | None, as_json: bool) -> None:
    """Show RUN (a run id, its prefix, or a run directory; default: the latest run)."""
    from rich.console import Console

    from hpcflow.backends.base import AllocationState
    from hpcflow.cli import console as ui
    from hpcflow.cli._common import find_run, read_run
    from hpcflow.cli._dashboard import find_dashboard
    from hpcflow.store import statedb as st
    from hpcflow.store.statedb import StateDB

    paths = find_run(run)
    _refresh_allocations(paths)
    view = read_run(paths)
    with StateDB(paths.state_db, readonly=True) as db:
        failed = db.tasks(states=(st.FAILED,))
        running = db.tasks(states=(st.RUNNING,))
        allocations = db.allocations()
    status = view.status
    live = status in ("submitted", "running")
    dashboard = find_dashboard(paths.run_dir / "scheduler.json") if live else None
    if (
        allocations
        and status in ("submitted", "running", "interrupted")
        and all(AllocationState(a.state).final for a in allocations)
    ):
        status = f"ended early (allocation {allocations[-1].native_id} {allocations[-1].state})"
    if as_json:
        click.echo(
            json.dumps(
                {
                    "run_id": view.meta.get("run_id"),
                    "run_dir": str(paths.run_dir),
                    "status": status,
                    "workflow": view.meta.get("workflow"),
                    "started": view.meta.get("started"),
                    "ended": view.meta.get("ended"),
                    "counts": view.counts,
                    "failed": [
                        {
                            "id": r.id,
                            "exit_code": r.exit_code,
                            "attempts": r.attempts,
                            "message": r.message,
                            "stderr": str(paths.stderr(r.slug, r.attempts)),
                        }
                        for r in failed
                    ],
                    "running": [
                        {"id": r.id, "host": r.host, "started": r.started} for r in running
                    ],
                    "allocations": [
                        {
                            "native_id": a.native_id,
                            "backend": a.backend,
                            "state": a.state,
                            "native_state": a.native_state,
                            "reason": a.reason,
                            "stdout": a.stdout,
                            "stderr": a.stderr,
                        }
                        for a in allocations
                    ],
                    "error": view.meta.get("error"),
                    "dashboard": (
                        {"url": dashboard.url, "tunnel": dashboard.tunnel} if dashboard else None
                    ),
                },
                indent=2,
            )
        )
        return
    out = Console()
    started = view.meta.get("started")
    ended = view.meta.get("ended") or time.time()
    elapsed = f"{ended - started:.1f}s" if isinstance(started, float | int) else "?"
    out.print(f"run [bold]{view.meta.get('run_id')}[/bold] · {status} · {elapsed}", highlight=False)
    out.print(f"workflow {view.meta.get('workflow')}", highlight=False, soft_wrap=True)
    out.print(f"run dir  {paths.run_dir}", highlight=False, soft_wrap=True)
    for a in allocations:
        reason = f" — {a.reason}" if a.reason else ""
        out.print(
            f"allocation {a.native_id} ({a.backend}): {a.native_state or a.state}{reason}",
            highlight=False,
            soft_wrap=True,
        )
    if dashboard is not None:
        out.print(f"dashboard {dashboard.url}", highlight=False, soft_wrap=True)
        if dashboard.tunnel:
            out.print(
                f"  from your machine: {dashboard.tunnel}  then open {dashboard.local_url}",
                highlight=False,
                soft_wrap=True,
            )
    if view.meta.get("error"):
        out.print(f"[red]error:[/red] {view.meta['error']}", highlight=False, soft_wrap=True)
    out.print(ui.counts_table(view.counts, view.order))
    if running:
        out.print(
            f"running: {', '.join(r.id for r in running[:10])}"
            + (" …" if len(running) > 10 else ""),
            highlight=False,
        )
    if failed:
        ui.failures(out, paths, failed)


def _refresh_allocations(paths) -> None:  # type: ignore[no-untyped-def]
    """Ask the batch system (one query per backend) about the run's unfinished allocations."""
    import logging

    from hpcflow.backends.base import AllocationState
    from hpcflow.backends.registry import get_backend
    from hpcflow.errors import HpcflowError
    from hpcflow.store.statedb import StateDB

    try:
        with StateDB(paths.state_db) as db:
            active: dict[str, list[str]] = {}
            for row in db.allocations():
                if not AllocationState(row.state).final and row.backend != "allocation":
                    active.setdefault(row.backend, []).append(row.native_id)
            for backend_name, ids in active.items():
                answer = get_backend(backend_name).poll(ids)
                for native_id, found in answer.items():
                    db.update_allocation(
                        native_id, found.state.value, found.native_state, found.reason
                    )
    except (HpcflowError, OSError) as exc:
        logging.getLogger(__name__).warning("could not refresh allocation states: %s", exc)
    except Exception as exc:  # sqlite3 errors on a read-only run directory
        logging.getLogger(__name__).warning("could not refresh allocation states: %s", exc)
