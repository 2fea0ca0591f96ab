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
    from hpcflow.backends.registry import get_backend
    from hpcflow.dag.graph import build_graph
    from hpcflow.modes.registry import render_scripts
    from hpcflow.spec.loader import load_workflow
    from hpcflow.store.paths import RunPaths, StateRoot

    overrides = {
        "nodes": nodes,
        "partition": partition,
        "account": account,
        "walltime": walltime,
        "mode": mode,
    }
    resolved = resolve_cli_profile(profile, overrides)
    graph = build_graph(load_workflow(workflow), check_files=False)
    run_id = "RUN_ID"
    paths = RunPaths(StateRoot.beside(workflow).runs / run_id)
    backend = get_backend(resolved.backend, profile=resolved)
    for heading, script in render_scripts(graph, resolved, backend, paths, run_id):
        if heading is not None:
            click.echo(f"# ---- {heading} ----")
        click.echo(script, nl=False)
