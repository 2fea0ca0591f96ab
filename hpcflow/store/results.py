"""A python task's return value, read back after its run: ``hpcflow.load_result`` and
``hpcflow result``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hpcflow.errors import RunError
from hpcflow.store import statedb as st
from hpcflow.store.paths import RunPaths
from hpcflow.store.values import ValueUnreadable, load_value


def result_file(run_dir: Path, task_id: str) -> Path:
    """The file that holds ``task_id``'s return value: its value file when a task
    received it, else the JSON of its last attempt. A task that was up to date in this
    run has its value in the latest earlier run, beside this one, where it succeeded.
    Raises :class:`RunError` (with what to do) when there is none."""
    for paths in _runs_to_search(RunPaths(run_dir), task_id):
        with st.StateDB(paths.state_db, readonly=True) as db:
            row = next((r for r in db.tasks() if r.id == task_id), None)
        if row is None or row.state != st.SUCCEEDED:
            continue
        value = Path(paths.value(row.slug))
        if value.exists():
            return value
        result = paths.result(row.slug, row.attempts)
        if result.exists():
            return result
        raise RunError(
            f"{task_id!r} succeeded in run {paths.run_dir.name} but left no result",
            hint="only python tasks return values",
        )
    raise RunError(
        f"no successful attempt of {task_id!r} in {run_dir} or the runs before it",
        hint="`hpcflow status RUN` lists the tasks and their states",
    )


def _runs_to_search(paths: RunPaths, task_id: str) -> list[RunPaths]:
    if not paths.state_db.exists():
        raise RunError(f"{paths.run_dir} is not a run directory")
    with st.StateDB(paths.state_db, readonly=True) as db:
        row = next((r for r in db.tasks() if r.id == task_id), None)
    if row is None:
        raise RunError(
            f"no task {task_id!r} in run {paths.run_dir.name}",
            hint="`hpcflow status RUN` lists the tasks (ids look like name[param=value])",
        )
    if row.state != st.CACHED:
        return [paths]
    # Earlier by their start (two runs of one second have ids in random order).
    mine = _start(paths)
    earlier = sorted(
        (
            RunPaths(p)
            for p in paths.run_dir.parent.iterdir()
            if RunPaths(p).state_db.exists() and _start(RunPaths(p)) < mine
        ),
        key=_start,
        reverse=True,
    )
    return [paths, *earlier]


def _start(paths: RunPaths) -> tuple[float, str]:
    """When a run started (its run.json), then its id: what orders a folder's runs."""
    try:
        started = float(json.loads(paths.run_info.read_text(encoding="utf-8"))["started"])
    except (OSError, ValueError, KeyError, TypeError):
        started = 0.0
    return started, paths.run_dir.name


def load_result(run_dir: str | Path, task_id: str) -> Any:
    """The return value of python task ``task_id`` in the run at ``run_dir``."""
    path = result_file(Path(run_dir), task_id)
    if path.suffix == ".json":
        return json.loads(path.read_text(encoding="utf-8"))
    try:
        return load_value(str(path))
    except ValueUnreadable as exc:
        raise RunError(str(exc), hint=f"hpcflow run WORKFLOW --rerun '{task_id}'") from exc
