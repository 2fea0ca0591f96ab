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
