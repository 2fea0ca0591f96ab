"""`hpcflow validate WORKFLOW`: check a workflow file without running it."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("validate")
@click.argument("workflow", type=click.Path(dir_okay=False, path_type=Path))
def command(workflow: Path) -> None:
    """Check WORKFLOW: syntax, keys, types, placeholders, dependencies and cycles."""
    from hpcflow.api.graph import workflow_graph

    graph = workflow_graph(workflow)
    names = len(graph.templates)
    click.echo(f"{workflow}: ok — {names} task definition(s), {len(graph.instances)} task(s)")
