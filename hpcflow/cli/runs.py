"""`hpcflow runs`: the runs this user started, newest last."""

from __future__ import annotations

import time

import click

from hpcflow.errors import RunError


@click.command("runs")
@click.option("-n", "--last", default=20, show_default=True, help="How many to show.")
def command(last: int) -> None:
    """List known runs with their status (``damaged`` for a run whose state file SQLite
    cannot read: its path and what to do follow the table, on stderr)."""
    from rich.console import Console

    from hpcflow.api.listing import listed_runs
    from hpcflow.cli.console import fit_columns, fitted_table, short_path, tilde

    console = Console()
    cells: list[list[str]] = []
    workflows: list[tuple[str, str]] = []  # the path (~ for the home folder), the engine
    damaged: list[RunError] = []
    for listed in listed_runs(last):
        entry, view = listed.entry, listed.view
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.started))
        if view is None:  # damaged: listed, flagged; the others still read
            if listed.damaged is not None:
                damaged.append(listed.damaged)
            cells.append([entry.run_id, started, DAMAGED, "?"])
            workflows.append((tilde(entry.workflow), ""))
            continue
        total = sum(sum(c.values()) for c in view.counts.values())
        cells.append([entry.run_id, started, str(view.status), str(total)])
        workflows.append((tilde(entry.workflow), engine_note(view.meta)))
    # Ids, dates and statuses never wrap: a path too long loses its middle; where that is
    # not enough the task counts, then the start times, then the paths are left out.
    natural = [
        max([len(head), *(len(row[k]) for row in cells)]) for k, head in enumerate(HEADS[:4])
    ]
    natural.append(max([len(HEADS[4]), *(len(path + note) for path, note in workflows)]))
    notes = max((len(note) for _, note in workflows), default=0)
    minimum = [*natural[:4], min(natural[4], PATH_ROOM + notes)]
    widths = fit_columns(console.width, natural, minimum, shrink=(4,), drop=(3, 1, 4))
    table = fitted_table(widths, HEADS)
    room = widths[4] or natural[4]
    for row, (path, note) in zip(cells, workflows, strict=True):
        row.append(short_path(path, room - len(note)) + note)
        table.add_row(*(cell for cell, w in zip(row, widths, strict=True) if w is not None))
    console.print(table, crop=False)
    for problem in damaged:
        click.echo(f"warning: {problem}", err=True)


#: The status shown for a run whose state file cannot be read
#: (:class:`~hpcflow.api.listing.ListedRun` ``damaged``).
DAMAGED = "damaged"

#: The columns of `hpcflow runs`.
HEADS = ("run", "started", "status", "tasks", "workflow")

#: The least room a workflow's path is given (``~/…/sweep/workflow.yaml`` is 23 wide):
#: where the terminal is too narrow for it, other columns are left out, then the paths.
PATH_ROOM = 22


def engine_note(meta: dict[str, object]) -> str:
    """`` (snakemake)`` for a run another engine drove through hpcflow, else nothing."""
    engine = meta.get("engine")
    return f" ({engine})" if engine and engine != "hpcflow" else ""
