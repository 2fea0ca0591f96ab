"""A run's task logs: which tasks a reference names, which file holds an attempt's
stdout or stderr, and what it wrote there, from its own file or the run's per-worker log
files (``hpcflow logs`` and :meth:`hpcflow.api.Run.log`)."""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path
from typing import Literal

from hpcflow.errors import RunError
from hpcflow.store.paths import RunPaths
from hpcflow.store.statedb import FINAL_STATES, StateDB, TaskRow
from hpcflow.store.tasklogs import (
    LogIndex,
    LogLocation,
    attempt_log_tail,
    locate_attempt_log,
    read_attempt_log,
    record_key,
)

#: A task's output streams.
Stream = Literal["stdout", "stderr"]


def matching_tasks(paths: RunPaths, task: str) -> list[TaskRow]:
    """The tasks of the run at ``paths`` that ``task`` names: an id (``make[i=3]``), a
    task's name (every instance of a sweep) or a glob over ids. Raises
    :class:`RunError` when it names none."""
    with StateDB(paths.state_db, readonly=True) as db:
        rows = [r for r in db.tasks() if r.id == task or r.name == task or fnmatchcase(r.id, task)]
    if not rows:
        raise RunError(
            f"no task {task!r} in run {paths.run_dir.name}",
            hint="`hpcflow status RUN` lists the tasks",
        )
    return rows


def log_index(paths: RunPaths) -> LogIndex | None:
    """The index of the run's per-worker log files, to keep for many look-ups; None for
    a run whose tasks write files of their own (``task_logs: per-task``)."""
    return LogIndex(paths.logs_dir) if paths.logs_dir.is_dir() else None


def task_finished(paths: RunPaths, row: TaskRow) -> bool:
    """Whether the task of ``row`` is in a final state now (a reader of the run)."""
    with StateDB(paths.state_db, readonly=True) as db:
        current = db.tasks(idx=row.idx)[0]
    return current.state in FINAL_STATES


def stderr_place(
    paths: RunPaths, run: str, row: TaskRow, index: LogIndex | None = None
) -> LogLocation:
    """Where the stderr of ``row``'s latest attempt is, to tell a user: its file, or the
    ``hpcflow logs`` command (``run``: the run id it takes) and the per-worker files."""
    return locate_attempt_log(paths, run, row.id, paths.stderr(row.slug, row.attempts), index)


def stderr_tail(
    paths: RunPaths, row: TaskRow, lines: int = 5, index: LogIndex | None = None
) -> list[str]:
    """The last ``lines`` lines ``row``'s latest attempt wrote to stderr (none when it
    wrote nothing); ``index`` as for :func:`read_log`."""
    path = paths.stderr(row.slug, row.attempts)
    return attempt_log_tail(path, lines, max_bytes=8192, index=index) or []


def log_file(paths: RunPaths, row: TaskRow, stream: Stream, attempt: int | None = None) -> Path:
    """The file of ``row``'s ``stream`` in ``attempt`` (default: its latest; a task that
    has not started has attempt 0's, which never exists). The file exists only once the
    attempt wrote to the stream."""
    number = attempt or row.attempts
    return paths.stderr(row.slug, number) if stream == "stderr" else paths.stdout(row.slug, number)


def read_log(
    paths: RunPaths,
    row: TaskRow,
    stream: Stream,
    attempt: int | None = None,
    index: LogIndex | None = None,
) -> bytes | None:
    """What ``row``'s ``attempt`` (default: its latest) wrote to ``stream``, from its own
    file or the run's per-worker logs (``index``: one kept for many look-ups); None when
    it wrote nothing there."""
    if index is None and paths.logs_dir.is_dir():
        index = LogIndex(paths.logs_dir)
    return read_attempt_log(log_file(paths, row, stream, attempt), index)


def log_place(
    paths: RunPaths,
    row: TaskRow,
    stream: Stream,
    attempt: int | None = None,
    index: LogIndex | None = None,
) -> str:
    """Where that stream is, to show: its own file, or the per-worker files holding it."""
    path = log_file(paths, row, stream, attempt)
    if index is None or path.exists():
        return str(path)
    files = index.files(record_key(str(path)))
    return ", ".join(str(f) for f in files) if files else str(path)
