"""`hpcflow schema`: the JSON Schema of workflow files, for editors (or as Markdown)."""

from __future__ import annotations

import json

import click


@click.command("schema")
@click.option("--markdown", is_flag=True, help="The reference tables of docs/workflow-format.md.")
def command(markdown: bool) -> None:
    """Print the JSON Schema of the workflow format."""
    from hpcflow.api.schema import markdown_reference, workflow_schema

    schema = workflow_schema()
    if markdown:
        click.echo(markdown_reference(schema))
        return
    click.echo(json.dumps(schema, indent=2))
