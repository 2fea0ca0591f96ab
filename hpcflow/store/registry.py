"""The per-user index of runs, so `hpcflow runs` and `hpcflow status` work from any folder."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from hpcflow.store.paths import hpcflow_home
from hpcflow.store.private import private_dir


@dataclass(frozen=True)
class RegisteredRun:
    run_id: str
    run_dir: Path
    workflow: str
    started: float


def _index() -> Path:
    return hpcflow_home() / "runs.jsonl"


def register_run(run_id: str, run_dir: Path, workflow: str, started: float) -> None:
    """Append a run to the index (one O_APPEND write: concurrent runs do not interleave)."""
    path = _index()
    private_dir(path.parent)
    line = json.dumps(
        {"run_id": run_id, "run_dir": str(run_dir), "workflow": workflow, "started": started}
    )
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def list_runs() -> list[RegisteredRun]:
    """Known runs whose directory still exists, oldest first."""
    path = _index()
    if not path.exists():
        return []
    runs: dict[str, RegisteredRun] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            data = json.loads(line)
            run = RegisteredRun(
                data["run_id"], Path(data["run_dir"]), data["workflow"], float(data["started"])
            )
        except (ValueError, KeyError, TypeError):
            continue
        if run.run_dir.is_dir():
            runs[str(run.run_dir)] = run
    return sorted(runs.values(), key=lambda r: r.started)


def run_folders() -> dict[str, Path]:
    """Each known run's folder by run id (the latest listing of an id wins)."""
    return {run.run_id: run.run_dir for run in list_runs()}


class RunFinder:
    """Where a workflow's runs are, by run id: in its own ``.hpcflow/runs``, or where the
    per-user index of runs says (a run given ``--run-dir``). Read the index once, when
    first needed. What it finds is only a place: whoever reads a file there checks that
    the file is this user's (:mod:`hpcflow.store.private`)."""

    def __init__(self, runs: Path) -> None:
        self._runs = runs
        self._index: dict[str, Path] | None = None

    def __call__(self, run_id: str) -> Path:
        """Run ``run_id``'s folder (in the workflow's runs folder when it is nowhere)."""
        default = self._runs / run_id
        if default.is_dir():
            return default
        if self._index is None:
            self._index = run_folders()
        return self._index.get(run_id, default)
