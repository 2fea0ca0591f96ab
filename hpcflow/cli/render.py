"""`hpcflow render WORKFLOW --profile NAME`: the exact batch script a run would submit."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("render")
@click.argument("workflow", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--profile", envvar="HPCFLOW_PROFILE", required=True, help="A batch profile.")
@click.option("--nodes", type=click.IntRange(min=1))
@click.option("--partition")
@click.option("--account")
@click.option("--walltime")
def command(
    workflow: Path,
    profile: str,
    nodes: int | None,
    partition: str | None,
    account: str | None,
    walltime: str | None,
) -> None:
    """Print the batch script for WORKFLOW (the run id is a placeholder until submitted)."""
    from hpcflow.backends.registry import get_backend
    from hpcflow.dag.graph import build_graph
    from hpcflow.runtime.pilot import plan_pilot
    from hpcflow.settings import resolve_profile
    from hpcflow.spec.loader import load_workflow
    from hpcflow.store.paths import RunPaths, StateRoot

    overrides = {"nodes": nodes, "partition": partition, "account": account, "walltime": walltime}
    resolved = resolve_profile(
        profile, overrides=overrides, flags={k: f"--{k}" for k in overrides}
    ).profile
    graph = build_graph(load_workflow(workflow), check_files=False)
    run_id = "RUN_ID"
    paths = RunPaths(StateRoot.beside(workflow).runs / run_id)
    plan = plan_pilot(resolved, paths, run_id, graph.loaded.base_dir)
    click.echo(get_backend(resolved.backend, profile=resolved).render(plan.request), nl=False)
