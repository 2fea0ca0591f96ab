"""`hpcflow logs RUN [TASK]`: a task's stdout/stderr, or the driver log."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from hpcflow.api.logs import Stream
    from hpcflow.store.paths import RunPaths
    from hpcflow.store.statedb import TaskRow


@click.command("logs")
@click.argument("run")
@click.argument("task", required=False)
@click.option("--attempt", type=int, help="Attempt number (default: the latest).")
@click.option(
    "--stream", type=click.Choice(["both", "stdout", "stderr"]), default="both", show_default=True
)
@click.option("-f", "--follow", is_flag=True, help="Keep printing as the log grows.")
def command(run: str, task: str | None, attempt: int | None, stream: str, follow: bool) -> None:
    """Print logs of TASK (id, name or glob) in RUN; without TASK, the driver log."""
    from hpcflow.api.locate import find_run
    from hpcflow.api.logs import log_file, matching_tasks
    from hpcflow.store import statedb as st
    from hpcflow.store.statedb import StateDB

    paths = find_run(run)
    if task is None:
        _print_file(paths.driver_log, follow, lambda: False)
        return
    rows = matching_tasks(paths, task)
    if len(rows) > 1 and not follow:
        for row in rows:
            click.secho(f"==> {row.id} <==", bold=True)
            _print_task(paths, row, attempt, stream)
        return
    row = rows[0]
    if follow:
        number = attempt or max(row.attempts, 1)
        log = log_file(paths, row, "stderr" if stream == "stderr" else "stdout", number)

        def finished() -> bool:
            with StateDB(paths.state_db, readonly=True) as db:
                current = db.tasks(idx=row.idx)[0]
            return current.state in st.FINAL_STATES

        _print_file(log, True, finished)
        return
    _print_task(paths, row, attempt, stream)


def _print_task(paths: RunPaths, row: TaskRow, attempt: int | None, stream: str) -> None:
    from hpcflow.api.logs import log_file

    if (attempt or row.attempts) < 1:
        click.echo(f"({row.id} has not started: {row.state})")
        return
    names: tuple[Stream, ...] = ("stdout", "stderr")
    for name in names:
        if stream not in ("both", name):
            continue
        path = log_file(paths, row, name, attempt)
        if stream == "both":
            click.secho(f"--- {name} ({path})", dim=True)
        try:
            sys.stdout.write(path.read_text(encoding="utf-8", errors="replace"))
        except FileNotFoundError:
            click.secho("(empty: the task printed nothing here)", dim=True)
        sys.stdout.flush()


def _print_file(path: Path, follow: bool, finished) -> None:  # type: ignore[no-untyped-def]
    position = 0
    while True:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                handle.seek(position)
                chunk = handle.read()
                position = handle.tell()
        except FileNotFoundError:
            chunk = ""
        if chunk:
            sys.stdout.write(chunk)
            sys.stdout.flush()
        if not follow or finished():
            return
        time.sleep(0.5)
