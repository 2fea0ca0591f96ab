"""`hpcflow status [RUN]`: the state of a run, live or finished, from any shell."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import click

from hpcflow.api.units import format_elapsed

if TYPE_CHECKING:
    from hpcflow.api.status import Snapshot


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

    from hpcflow.api.locate import find_run
    from hpcflow.api.status import StatusReader

    reader = StatusReader(find_run(run))
    if as_json:
        snap = reader.snapshot()
        while watch and not snap.ended:
            click.echo(json.dumps(snap.as_json()))
            time.sleep(interval)
            snap = reader.snapshot()
        click.echo(json.dumps(snap.as_json(), indent=None if watch else 2))
        return
    out = Console()
    snap = reader.snapshot()
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
            snap = reader.snapshot()
        out.print(render(snap))
        return
    from rich.live import Live

    with Live(render(snap), console=out, refresh_per_second=4, transient=False) as live:
        try:
            while not snap.ended:
                time.sleep(interval)
                snap = reader.snapshot()
                live.update(render(snap))
        except KeyboardInterrupt:
            pass  # stop watching; the run goes on


def render(snap: Snapshot) -> Any:
    """The human view of a snapshot, as one rich renderable."""
    from rich.console import Group
    from rich.text import Text

    from hpcflow.api.status import allocation_queued
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
        waiting = f" (queued {_ago(a.submitted)})" if allocation_queued(a) else ""
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
