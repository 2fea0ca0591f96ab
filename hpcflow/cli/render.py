"""`hpcflow render WORKFLOW --profile NAME`: the exact batch script a run would submit."""

from __future__ import annotations

from pathlib import Path

import click

from hpcflow.cli._options import allocation_options, resolve_cli_profile


@click.command("render")
@click.argument("workflow", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--profile", envvar="HPCFLOW_PROFILE", required=True, help="A batch profile.")
@allocation_options
@click.option(
    "--mode",
    type=click.Choice(["pilot", "jobs", "elastic"]),
    help="pilot: the one allocation's script; jobs: every task's job script; "
    "elastic: the worker job's script.",
)
def command(
    workflow: Path,
    profile: str,
    nodes: int | None,
    partition: str | None,
    account: str | None,
    walltime: str | None,
    mode: str | None,
) -> None:
    """Print the batch script(s) for WORKFLOW (the run id is a placeholder until
    submitted): the pilot allocation's, every job of jobs mode, or elastic mode's worker
    job, as the profile's mode says (``--mode`` overrides it)."""
    from hpcflow.api.scripts import batch_scripts

    overrides = {
        "nodes": nodes,
        "partition": partition,
        "account": account,
        "walltime": walltime,
        "mode": mode,
    }
    resolved = resolve_cli_profile(profile, overrides)
    for heading, script in batch_scripts(workflow, resolved):
        if heading is not None:
            click.echo(f"# ---- {heading} ----")
        click.echo(script, nl=False)
