"""`hpcflow run WORKFLOW`: run (or resume) a workflow with live progress."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import click

from hpcflow.cli._options import allocation_options

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console

    from hpcflow.api.launch import RunRequest
    from hpcflow.engine.lifecycle import RunSummary
    from hpcflow.store.paths import RunPaths


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@click.command("run")
@click.argument("workflow", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--profile",
    envvar="HPCFLOW_PROFILE",
    default=None,
    help="Where to run: a site profile name or file (`hpcflow profiles list`). "
    "Default: local, or the current allocation when run inside one.",
)
@click.option(
    "--detach", is_flag=True, help="Batch profiles: return once the allocation is submitted."
)
@allocation_options
@click.option(
    "--mode",
    type=click.Choice(["pilot", "jobs", "elastic"]),
    help="Batch profiles: pilot (one allocation runs everything), jobs (a batch job per "
    "task, arrays for sweeps) or elastic (workers come and go as batch jobs).",
)
@click.option(
    "--transport",
    type=click.Choice(["tcp", "tls", "ucx"]),
    help="Batch profiles: how Dask's processes talk (default tls: per-run certificates).",
)
@click.option(
    "--run-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Run directory (default: .hpcflow/runs/RUN_ID beside the workflow).",
)
@click.option("--force", is_flag=True, help="Run every task, even those up to date.")
@click.option(
    "--rerun",
    multiple=True,
    metavar="PATTERN",
    help="Run tasks whose id or name matches (glob), and what depends on them.",
)
@click.option("--workers", type=click.IntRange(min=1), help="Local worker processes.")
@click.option("--threads", type=click.IntRange(min=1), help="Slots per local worker.")
@click.option(
    "--engine",
    type=click.Choice(["auto", "pool", "dask"]),
    default="auto",
    show_default=True,
    help="Local runs: a pool in this process (threads start commands, worker processes "
    "run Python calls; no Dask) or the embedded Dask cluster; auto takes the pool unless "
    "--workers > 1.",
)
@click.option("--dry-run", is_flag=True, help="Print the plan; run nothing.")
@click.option(
    "-q",
    "--quiet",
    is_flag=True,
    help="No live progress and no table: failed tasks, if any, and the summary line.",
)
def command(
    workflow: Path,
    profile: str | None,
    detach: bool,
    nodes: int | None,
    partition: str | None,
    account: str | None,
    walltime: str | None,
    mode: str | None,
    transport: str | None,
    run_dir: Path | None,
    force: bool,
    rerun: tuple[str, ...],
    workers: int | None,
    threads: int | None,
    engine: str,
    dry_run: bool,
    quiet: bool,
) -> None:
    """Run WORKFLOW (a workflow.yaml). A re-run resumes: up-to-date tasks are skipped."""
    from hpcflow.api import TaskState
    from hpcflow.api.launch import RunRequest, settled_run
    from hpcflow.api.outcome import read_outcome
    from hpcflow.api.units import format_elapsed

    consoles: list[Console] = []

    def out() -> Console:
        # Made when first needed: a quiet run with nothing to show but its summary line
        # never imports rich (a resume with every task up to date is mostly start-up).
        if not consoles:
            from rich.console import Console

            consoles.append(Console(stderr=False))
        return consoles[0]

    request = RunRequest(
        profile=profile,
        overrides={
            "nodes": nodes,
            "partition": partition,
            "account": account,
            "walltime": walltime,
            "mode": mode,
            "transport": transport,
        },
        run_dir=run_dir,
        force=force,
        rerun=rerun,
        workers=workers,
        threads=threads,
        engine=engine,
        dry_run=dry_run,
        detach=detach,
    )
    # A local resume of a workflow unchanged since every task was up to date is recorded
    # without loading or planning the workflow; any other run is planned in full.
    ended = settled_run(workflow, request) or _plan_and_run(workflow, request, out, quiet)
    if ended is None:  # a dry run (its plan printed), or a batch run left on its own
        return
    summary, order = ended
    paths = summary.paths
    outcome = read_outcome(paths)
    counts, failed_rows = outcome.counts, outcome.failed
    if not quiet or failed_rows:
        from hpcflow.cli import console as ui

        if not quiet:
            out().print(ui.counts_table(counts, order, title=f"run {summary.run_id}"))
            if failed_rows:
                out().print()
        if failed_rows:
            ui.failures(out(), paths, failed_rows, run=summary.run_id)
    done = outcome.count(TaskState.SUCCEEDED)
    cached = outcome.count(TaskState.CACHED)
    line = (
        f"{done} ran, {cached} up to date, {len(failed_rows)} failed of {outcome.total} tasks in "
        f"{format_elapsed(summary.elapsed)} · run dir {paths.run_dir}"
    )
    if consoles or sys.stdout.isatty() or os.environ.get("FORCE_COLOR"):
        style = "green" if summary.ok else "red"
        out().print(f"[{style}]{summary.status}[/{style}]: {line}", highlight=False, soft_wrap=True)
    else:  # plain text, as rich writes it to a file, without importing rich
        click.echo(f"{summary.status}: {line}")
    if summary.cancelled:
        sys.exit(130)
    sys.exit(0 if summary.ok else 1)


def _plan_and_run(
    workflow: Path, request: RunRequest, out: Callable[[], Console], quiet: bool
) -> tuple[RunSummary, list[str]] | None:
    """Plan the run in full and run it: its summary and task names in the workflow's
    order; None for a dry run (the plan is printed) and a detached batch run."""
    from hpcflow.api import RunStatus
    from hpcflow.api.launch import plan_run

    planned = plan_run(workflow, request)
    detach = request.detach
    if request.dry_run:
        from hpcflow.cli.plan import print_plan

        print_plan(out(), planned)
        return None
    signal.signal(signal.SIGTERM, _raise_interrupt)
    # A command started in the background by a script inherits SIGINT ignored; Ctrl-C,
    # `kill -INT` and the interrupts hpcflow raises itself (elastic mode's watch, when no
    # worker job can be submitted) must still stop the run.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    live = not quiet and not detach and out().is_terminal

    def submitted(native_id: str, paths: RunPaths) -> None:
        out().print(
            f"submitted allocation {native_id} ({planned.profile.backend}) · run dir "
            f"{paths.run_dir}",
            highlight=False,
            soft_wrap=True,
        )

    if live:
        from hpcflow.cli import console as ui

        with ui.LiveProgress(out(), planned.order) as progress:
            summary = planned.execute(progress, submitted)
    else:
        summary = planned.execute(None, submitted)
    if detach and RunStatus.SUBMITTED in summary.totals:
        out().print(f"detached: follow with `hpcflow status {summary.run_id}`", highlight=False)
        return None
    return summary, planned.order
