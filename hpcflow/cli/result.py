"""`hpcflow result RUN TASK`: a python task's return value, printed or saved."""

from __future__ import annotations

import json
import shutil
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
    from hpcflow.api.run import open_run
    from hpcflow.worker.values import type_name

    found = open_run(run)
    source = found.result_file(task)
    if output is not None:
        shutil.copyfile(source, output)
        kind = "JSON" if source.suffix == ".json" else "a pickle"
        click.echo(f"saved {task} to {output} ({kind}, {source.stat().st_size} bytes)")
        return
    value = found.result(task)
    try:
        click.echo(json.dumps(value, indent=2))
    except (TypeError, ValueError):
        click.echo(f"{type_name(value)} ({source.stat().st_size} bytes pickled)")
        click.echo(repr(value)[:2000])
