"""`hpcflow runs`: the runs this user started, newest last."""

from __future__ import annotations

import time

import click


@click.command("runs")
@click.option("-n", "--last", default=20, show_default=True, help="How many to show.")
def command(last: int) -> None:
    """List known runs with their status."""
    from rich.console import Console
    from rich.table import Table

    from hpcflow.cli._common import read_run
    from hpcflow.errors import RunError
    from hpcflow.store.paths import RunPaths
    from hpcflow.store.registry import list_runs

    table = Table(box=None)
    for column in ("run", "started", "status", "tasks", "workflow"):
        table.add_column(column)
    for entry in list_runs()[-last:]:
        try:
            view = read_run(RunPaths(entry.run_dir))
        except RunError:
            continue
        total = sum(sum(c.values()) for c in view.counts.values())
        table.add_row(
            entry.run_id,
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry.started)),
            view.status,
            str(total),
            entry.workflow + engine_note(view.meta),
        )
    Console().print(table)


def engine_note(meta: dict[str, object]) -> str:
    """`` (snakemake)`` for a run another engine drove through hpcflow, else nothing."""
    engine = meta.get("engine")
    return f" ({engine})" if engine and engine != "hpcflow" else ""
