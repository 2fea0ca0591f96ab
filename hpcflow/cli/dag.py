"""`hpcflow dag WORKFLOW`: the dependency graph as text, Mermaid or dot."""

from __future__ import annotations

from pathlib import Path

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
    from hpcflow.dag import render
    from hpcflow.dag.graph import build_graph
    from hpcflow.spec.loader import load_workflow

    graph = build_graph(load_workflow(workflow), check_files=False)
    renderer = {
        "text": render.render_text,
        "mermaid": render.render_mermaid,
        "dot": render.render_dot,
    }[fmt]
    click.echo(renderer(graph, instances))
