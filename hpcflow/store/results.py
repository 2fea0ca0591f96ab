"""A python task's return value, read back after its run: ``hpcflow.load_result`` and
``hpcflow result``.

Only this user's files are read (:mod:`hpcflow.store.private`): the run folder, its
state and the value file must be this user's and writable by no one else. A task that
was up to date in the run has its value in the run that made it: the memo of the
workflow (this user's, beside the workflow) names that run, and the per-user index of
runs (or the workflow's own ``.hpcflow/runs``) says where its folder is. No folder is
searched: a run folder another account put beside this one is never looked at.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hpcflow.errors import RunError
from hpcflow.store import statedb as st
from hpcflow.store.paths import RunPaths, StateRoot, workflow_key
from hpcflow.store.private import StateNotPrivate, check_private
from hpcflow.store.registry import RunFinder
from hpcflow.store.sqlite import connect_reader
from hpcflow.store.values import ValueUnreadable, key_from, load_value, user_key


def result_file(run_dir: Path, task_id: str) -> Path:
    """The file that holds ``task_id``'s return value: its value file when a task
    received it, else the JSON of its last attempt. A task that was up to date in this
    run has its value in the run the workflow's memo names. Raises :class:`RunError`
    (with what to do) when there is none, :class:`StateNotPrivate` for a run folder or
    file that is not this user's alone."""
    paths = RunPaths(run_dir)
    row = _task_row(paths, task_id)
    if row is None:
        raise RunError(
            f"no task {task_id!r} in run {paths.run_dir.name}",
            hint="`hpcflow status RUN` lists the tasks (ids look like name[param=value])",
        )
    if row.state == st.CACHED:
        paths = _producer_run(paths, task_id)
        row = _task_row(paths, task_id)
    if row is None or row.state != st.SUCCEEDED:
        raise RunError(
            f"no successful attempt of {task_id!r} in {run_dir} or the run that made it",
            hint="`hpcflow status RUN` lists the tasks and their states",
        )
    for candidate in (Path(paths.value(row.slug)), paths.result(row.slug, row.attempts)):
        if candidate.exists():
            check_private(candidate)
            return candidate
    raise RunError(
        f"{task_id!r} succeeded in run {paths.run_dir.name} but left no result",
        hint="only python tasks return values",
    )


def _task_row(paths: RunPaths, task_id: str) -> st.TaskRow | None:
    """``task_id``'s row in the run at ``paths``, once the run folder and its state are
    shown to be this user's alone."""
    if not paths.state_db.exists():
        raise RunError(f"{paths.run_dir} is not a run directory")
    check_private(paths.run_dir)
    check_private(paths.state_db)
    with st.StateDB(paths.state_db, readonly=True) as db:
        return next((r for r in db.tasks() if r.id == task_id), None)


def _producer_run(paths: RunPaths, task_id: str) -> RunPaths:
    """The run that made ``task_id``'s value, for a run where it was up to date: the
    one the workflow's memo names."""
    try:
        workflow = Path(str(json.loads(paths.run_info.read_text(encoding="utf-8"))["workflow"]))
    except (OSError, ValueError, KeyError, TypeError):
        raise RunError(
            f"run {paths.run_dir.name} has no readable run.json: which run made "
            f"{task_id!r} is unknown",
            hint=f"hpcflow run WORKFLOW --rerun '{task_id}'",
        ) from None
    root = StateRoot.beside(workflow)
    run_id = _memo_run(root, workflow_key(workflow), task_id)
    if run_id is None:
        raise RunError(
            f"{task_id!r} was up to date in run {paths.run_dir.name}, but the memo of "
            f"{workflow} no longer names the run that made it",
            hint=f"hpcflow run {workflow} --rerun '{task_id}'",
        )
    found = _run_folder(root, run_id)
    if found is None:
        raise RunError(
            f"{task_id!r} was up to date in run {paths.run_dir.name}; the run that made "
            f"it ({run_id}) is not among your runs any more",
            hint=f"hpcflow run {workflow} --rerun '{task_id}'",
        )
    return found


def _memo_run(root: StateRoot, key: str, task_id: str) -> str | None:
    """The run that the memo in ``root`` says last made ``task_id``."""
    memo = root.memo_db
    if not memo.exists():
        return None
    check_private(root.root)
    check_private(memo)
    conn = connect_reader(memo)
    try:
        rows = conn.execute(
            "SELECT run_id FROM memo WHERE workflow = ? AND task_id = ?", (key, task_id)
        ).fetchall()
    finally:
        conn.close()
    return str(rows[0][0]) if rows else None


def _run_folder(root: StateRoot, run_id: str) -> RunPaths | None:
    """Where run ``run_id`` is (:class:`~hpcflow.store.registry.RunFinder`)."""
    found = RunPaths(RunFinder(root.runs)(run_id))
    return found if found.state_db.exists() else None


def load_result(run_dir: str | Path, task_id: str) -> Any:
    """The return value of python task ``task_id`` in the run at ``run_dir``."""
    path = result_file(Path(run_dir), task_id)
    if path.suffix == ".json":
        return json.loads(path.read_text(encoding="utf-8"))
    try:
        return load_value(str(path), *value_keys(path))
    except ValueUnreadable as exc:
        raise RunError(str(exc), hint=f"hpcflow run WORKFLOW --rerun '{task_id}'") from exc


def value_keys(value_file: Path) -> tuple[bytes, ...]:
    """The keys a value file found by :func:`result_file` may be signed with: the user's
    own, then the copy in the run folder that made it (``$HPCFLOW_HOME`` may have been
    another then), which counts only as this user's private file in this user's
    private run folder (checked by :func:`result_file`)."""
    mine = user_key()
    run_key = RunPaths(value_file.parents[2]).value_key
    if not run_key.exists():
        return (mine,)
    theirs = key_from(str(run_key))
    return (mine,) if theirs == mine else (mine, theirs)


__all__ = ["StateNotPrivate", "load_result", "result_file", "value_keys"]
