"""`hpcflow result RUN TASK`: a python task's return value, printed or saved."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import click

from hpcflow.errors import RunError


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
        if source.suffix == ".json":
            shutil.copyfile(source, output)
            kind = "JSON"
        else:  # the pickle alone, its MAC checked (the header is hpcflow's)
            from hpcflow.store.results import value_keys
            from hpcflow.store.values import ValueUnreadable, value_pickle

            try:
                data = value_pickle(str(source), *value_keys(source))
            except ValueUnreadable as exc:
                raise RunError(str(exc), hint=f"hpcflow run WORKFLOW --rerun '{task}'") from None
            output.write_bytes(data)
            kind = "a pickle"
        click.echo(f"saved {task} to {output} ({kind}, {output.stat().st_size} bytes)")
        return
    value = found.result(task)
    try:
        click.echo(json.dumps(value, indent=2))
    except (TypeError, ValueError):
        click.echo(f"{type_name(value)} ({source.stat().st_size} bytes pickled)")
        click.echo(repr(value)[:2000])
