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
    from hpcflow.store.tasklogs import LogIndex


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
    from hpcflow.api.logs import log_file, log_index, matching_tasks, read_log, task_finished

    paths = find_run(run)
    if task is None:
        _print_file(paths.driver_log, follow, lambda: False)
        return
    rows = matching_tasks(paths, task)
    if len(rows) > 1 and not follow:
        # task_logs: per-worker: one index of the records for every task named.
        index = log_index(paths)
        for row in rows:
            click.secho(f"==> {row.id} <==", bold=True)
            _print_task(paths, row, attempt, stream, index)
        return
    row = rows[0]
    if follow:
        number = attempt or max(row.attempts, 1)
        name: Stream = "stderr" if stream == "stderr" else "stdout"

        def finished() -> bool:
            return task_finished(paths, row)

        index = log_index(paths)
        if index is not None:  # task_logs: per-worker
            _follow_records(lambda: read_log(paths, row, name, number, index), finished)
        else:
            _print_file(log_file(paths, row, name, number), True, finished)
        return
    _print_task(paths, row, attempt, stream)


def _print_task(
    paths: RunPaths, row: TaskRow, attempt: int | None, stream: str, index: LogIndex | None = None
) -> None:
    from hpcflow.api.logs import log_index, log_place, read_log

    if (attempt or row.attempts) < 1:
        click.echo(f"({row.id} has not started: {row.state})")
        return
    if index is None:  # task_logs: per-worker
        index = log_index(paths)
    names: tuple[Stream, ...] = ("stdout", "stderr")
    for name in names:
        if stream not in ("both", name):
            continue
        data = read_log(paths, row, name, attempt, index)
        if stream == "both":
            click.secho(f"--- {name} ({log_place(paths, row, name, attempt, index)})", dim=True)
        if data is None:
            click.secho("(empty: the task printed nothing here)", dim=True)
        else:
            sys.stdout.write(data.decode("utf-8", errors="replace"))
        sys.stdout.flush()


def _follow_records(read, finished) -> None:  # type: ignore[no-untyped-def]
    """Print a stream held in per-worker log records as it grows, until ``finished()``."""
    shown = 0
    while True:
        done = finished()
        data = read() or b""
        if len(data) > shown:
            sys.stdout.write(data[shown:].decode("utf-8", errors="replace"))
            sys.stdout.flush()
            shown = len(data)
        if done:
            return
        time.sleep(0.5)


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
