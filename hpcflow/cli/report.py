"""`hpcflow report [RUN]`: write one self-contained HTML file about a run."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("report")
@click.argument("run", required=False)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the page (default: RUN_DIR/report.html).",
)
def command(run: str | None, output: Path | None) -> None:
    """Write an HTML report of RUN (default: the latest run in this folder, else anywhere):
    DAG, timeline, tasks, costs."""
    from hpcflow.api.locate import find_run
    from hpcflow.api.report import write_report

    target = write_report(find_run(run), output)
    click.echo(f"report written to {target}")
