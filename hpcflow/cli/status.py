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

    from hpcflow.cli import console as ui
    from hpcflow.cli._common import find_run, read_run
    from hpcflow.store import statedb as st
    from hpcflow.store.statedb import StateDB

    paths = find_run(run)
    view = read_run(paths)
    with StateDB(paths.state_db, readonly=True) as db:
        failed = db.tasks(where="WHERE state = ?", params=(st.FAILED,))
        running = db.tasks(where="WHERE state = ?", params=(st.RUNNING,))
    if as_json:
        click.echo(json.dumps({
            "run_id": view.meta.get("run_id"),
            "run_dir": str(paths.run_dir),
            "status": view.status,
            "workflow": view.meta.get("workflow"),
            "started": view.meta.get("started"),
            "ended": view.meta.get("ended"),
            "counts": view.counts,
            "failed": [
                {"id": r.id, "exit_code": r.exit_code, "attempts": r.attempts, "message": r.message,
                 "stderr": str(paths.stderr(r.slug, r.attempts))}
                for r in failed
            ],
            "running": [{"id": r.id, "host": r.host, "started": r.started} for r in running],
        }, indent=2))
        return
    out = Console()
    started = view.meta.get("started")
    ended = view.meta.get("ended") or time.time()
    elapsed = f"{ended - started:.1f}s" if isinstance(started, float | int) else "?"
    out.print(f"run [bold]{view.meta.get('run_id')}[/bold] · {view.status} · {elapsed}", highlight=False)
    out.print(f"workflow {view.meta.get('workflow')}", highlight=False, soft_wrap=True)
    out.print(f"run dir  {paths.run_dir}", highlight=False, soft_wrap=True)
    out.print(ui.counts_table(view.counts, view.order))
    if running:
        out.print(f"running: {', '.join(r.id for r in running[:10])}"
                  + (" …" if len(running) > 10 else ""), highlight=False)
    if failed:
        ui.failures(out, paths, failed)
