"""`hpcflow schema`: the JSON Schema of workflow files, for editors."""

from __future__ import annotations

import json

import click


@click.command("schema")
def command() -> None:
    """Print the JSON Schema of the workflow format."""
    from hpcflow.spec.models import Workflow

    schema = Workflow.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "hpcflow workflow"
    click.echo(json.dumps(schema, indent=2))
