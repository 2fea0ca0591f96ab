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
    from hpcflow.cli.console import short_path
    from hpcflow.errors import RunError
    from hpcflow.store.paths import RunPaths
    from hpcflow.store.registry import list_runs

    console = Console()
    cells: list[list[str]] = []
    workflows: list[tuple[str, str]] = []
    for entry in list_runs()[-last:]:
        try:
            view = read_run(RunPaths(entry.run_dir))
        except RunError:
            continue
        total = sum(sum(c.values()) for c in view.counts.values())
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.started))
        cells.append([entry.run_id, started, str(view.status), str(total)])
        workflows.append((entry.workflow, engine_note(view.meta)))
    # Ids, dates and paths never wrap: a path too long for what is left keeps its end.
    widths = [max([len(head), *(len(row[k]) for row in cells)]) for k, head in enumerate(HEADS[:4])]
    room = max(20, console.width - sum(w + 2 for w in widths) - 1)
    table = Table(box=None, pad_edge=False)
    for column in HEADS:
        table.add_column(column, no_wrap=True)
    for row, (workflow, note) in zip(cells, workflows, strict=True):
        table.add_row(*row, short_path(workflow, room - len(note)) + note)
    console.print(table)


#: The columns of `hpcflow runs`.
HEADS = ("run", "started", "status", "tasks", "workflow")


def engine_note(meta: dict[str, object]) -> str:
    """`` (snakemake)`` for a run another engine drove through hpcflow, else nothing."""
    engine = meta.get("engine")
    return f" ({engine})" if engine and engine != "hpcflow" else ""
