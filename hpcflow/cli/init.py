"""`hpcflow init [DIR]`: scaffold a workflow and, for a batch system, a site profile.

Values come from flags; with ``--interactive`` (or on a terminal without ``--yes``) the
missing ones are asked for. Both files are loaded back before the command succeeds, so
what it writes always validates. Existing files are never overwritten without --force.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

WORKFLOW_TEMPLATE = """\
# {name}: a sweep of simulations and a summary. Run it with
#   hpcflow run {workflow_hint}{profile_hint}
# The format is described in hpcflow's docs/workflow-format.md (and `hpcflow schema`).
name: {name_yaml}
description: A parameter sweep and a reduce step (scaffolded by hpcflow init).

tasks:
  - name: simulate
    foreach:
      seed: {{range: [0, 4]}}
    resources: {{cpus: 1, memory: 1GB, walltime: 10m}}
    command: echo "seed={{seed}} value=$((RANDOM % 100))" > {{outputs}}
    outputs: ["results/sim-{{seed}}.txt"]

  - name: summarize
    inputs: ["results/sim-*.txt"]
    command: cat {{inputs}} > {{outputs}}
    outputs: [results/summary.txt]
"""

PROFILE_TEMPLATE = """\
# Site profile for {site} (scaffolded by hpcflow init). Every setting:
#   hpcflow profiles show {profile_hint}
description: {description}
backend: {backend}
mode: pilot
{batch_lines}
# How many nodes one allocation takes, and its time limit.
nodes: {nodes}
walltime: {walltime}
{gpu_lines}
# Per-run TLS certificates protect the Dask scheduler on shared nodes.
transport: tls
"""


@click.command("init")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--name", help="Workflow name (default: the directory's name).")
@click.option(
    "--backend",
    type=click.Choice(["local", "slurm", "pbs"]),
    help="Where it runs: local only, or a SLURM/PBS site (adds a site profile).",
)
@click.option("--site", help="Name of the site profile file (default: site).")
@click.option("--partition", help="Partition (SLURM) or queue (PBS).")
@click.option("--account", help="Account/project to charge.")
@click.option("--nodes", type=click.IntRange(min=1), help="Nodes per allocation.")
@click.option("--walltime", help="Allocation time limit, e.g. 2h.")
@click.option("--gpus", type=click.IntRange(min=0), help="GPUs per node (0: none).")
@click.option("--interactive/--no-interactive", default=None, help="Ask for missing values.")
@click.option("-y", "--yes", is_flag=True, help="Take defaults for everything not given.")
@click.option("--force", is_flag=True, help="Overwrite existing files.")
def command(
    directory: Path,
    name: str | None,
    backend: str | None,
    site: str | None,
    partition: str | None,
    account: str | None,
    nodes: int | None,
    walltime: str | None,
    gpus: int | None,
    interactive: bool | None,
    yes: bool,
    force: bool,
) -> None:
    """Create DIRECTORY/workflow.yaml (and DIRECTORY/SITE.yaml for a batch system)."""
    from hpcflow.errors import HpcflowError

    ask = interactive if interactive is not None else (sys.stdin.isatty() and not yes)
    directory = directory.resolve()

    def value(current, prompt: str, default, **kwargs):  # type: ignore[no-untyped-def]
        if current is not None or not ask:
            return default if current is None else current
        return click.prompt(prompt, default=default, **kwargs)

    name = value(name, "Workflow name", directory.name or "workflow")
    backend = value(backend, "Batch system", "local", type=click.Choice(["local", "slurm", "pbs"]))
    workflow_file = directory / "workflow.yaml"
    targets = [workflow_file]
    profile_text = None
    profile_file = None
    if backend != "local":
        site = value(site, "Site profile name", "site")
        partition = value(partition, "Partition/queue (empty: the site default)", "")
        account = value(account, "Account/project (empty: none)", "")
        nodes = value(nodes, "Nodes per allocation", 1, type=click.IntRange(min=1))
        walltime = value(walltime, "Walltime of one allocation", "1h")
        gpus = value(gpus, "GPUs per node", 0, type=click.IntRange(min=0))
        profile_file = directory / f"{site}.yaml"
        targets.append(profile_file)
        batch_lines = []
        if partition:
            batch_lines.append(f"partition: {json.dumps(partition)}")
        if account:
            batch_lines.append(f"account: {json.dumps(account)}")
        gpu_lines = (
            f"gpus_per_node: {gpus}\nworkers_per_node: per-gpu  # one Dask worker per GPU\n"
            if gpus
            else ""
        )
        profile_text = PROFILE_TEMPLATE.format(
            site=site,
            profile_hint=f"./{profile_file.name}",
            description=json.dumps(f"{site} ({backend})"),
            backend=backend,
            batch_lines="\n".join(batch_lines),
            nodes=nodes,
            walltime=json.dumps(walltime),
            gpu_lines=gpu_lines,
        )
    existing = [p for p in targets if p.exists()]
    if existing and not force:
        raise HpcflowError(
            f"{existing[0]} exists already",
            hint="choose another directory, or pass --force to overwrite it",
        )
    workflow_text = WORKFLOW_TEMPLATE.format(
        name=name,
        name_yaml=json.dumps(name),
        workflow_hint="workflow.yaml",
        profile_hint=f" --profile ./{profile_file.name}" if profile_file else "",
    )
    directory.mkdir(parents=True, exist_ok=True)
    # Loading a workflow and a profile back needs the models: imported only now.
    from hpcflow.api.scaffold import write_checked

    write_checked(workflow_file, workflow_text, profile_file, profile_text)
    click.echo(f"wrote {workflow_file}")
    if profile_file:
        click.echo(f"wrote {profile_file}")
        click.echo(
            f"next: hpcflow run {workflow_file} --profile {profile_file} --dry-run "
            "(then without --dry-run)"
        )
    else:
        click.echo(f"next: hpcflow run {workflow_file}")
