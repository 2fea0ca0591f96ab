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
    type=click.Choice(["pilot", "jobs"]),
    help="pilot: the one allocation's script; jobs: every task's job script.",
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
    """Print the batch script for WORKFLOW (the run id is a placeholder until submitted)."""
    from hpcflow.backends.registry import get_backend
    from hpcflow.dag.graph import build_graph
    from hpcflow.modes.pilot import plan_pilot
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
    if resolved.mode == "jobs":
        from hpcflow.modes.jobs import render_all

        for unit, script in render_all(graph, resolved, backend, paths, run_id):
            noun = "instance" if unit.size == 1 else "instances"
            click.echo(f"# ---- job {unit.number} ({unit.size} {noun}) ----")
            click.echo(script, nl=False)
        return
    plan = plan_pilot(resolved, paths, run_id, graph.loaded.base_dir)
    click.echo(backend.render(plan.request), nl=False)
