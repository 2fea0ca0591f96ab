"""`hpcflow dag WORKFLOW`: the dependency graph as text, Mermaid or dot."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import click


@click.command("dag")
@click.argument("workflow", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "mermaid", "dot"]),
    default="text",
    show_default=True,
)
@click.option("--instances", is_flag=True, help="One node per task instance, not per task.")
def command(workflow: Path, fmt: str, instances: bool) -> None:
    """Print the dependency graph of WORKFLOW."""
    from hpcflow.api.graph import GraphFormat, draw_graph

    click.echo(draw_graph(workflow, cast(GraphFormat, fmt), instances))
