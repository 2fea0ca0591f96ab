"""`hpcflow result RUN TASK`: a python task's return value, printed or saved."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command("result")
@click.argument("run")
@click.argument("task")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Save the value to this file (JSON when it is JSON, else a pickle) instead of "
    "printing it.",
)
def command(run: str, task: str, output: Path | None) -> None:
    """Print the return value of python TASK (its id, e.g. make[i=3]) in RUN."""
    from hpcflow.api.results import save_result, type_name
    from hpcflow.api.run import open_run

    found = open_run(run)
    if output is not None:
        kind = save_result(found, task, output)
        click.echo(f"saved {task} to {output} ({kind}, {output.stat().st_size} bytes)")
        return
    source = found.result_file(task)
    value = found.result(task)
    try:
        click.echo(json.dumps(value, indent=2))
    except (TypeError, ValueError):
        click.echo(f"{type_name(value)} ({source.stat().st_size} bytes pickled)")
        click.echo(repr(value)[:2000])
