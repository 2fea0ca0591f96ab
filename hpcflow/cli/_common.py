"""Helpers shared by CLI commands: finding runs, reading their state."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcflow.errors import RunError
from hpcflow.store.paths import RunPaths
from hpcflow.store.registry import list_runs
from hpcflow.store.statedb import StateDB


def find_run(ref: str | None) -> RunPaths:
    """A run by directory path, by run id (or unique prefix), or the latest one.

    ``latest`` (or no reference at all) names the most recent run.
    """
    if ref == "latest":
        ref = None
    if ref:
        candidate = Path(ref)
        if (candidate / "state.sqlite").exists():
            return RunPaths(candidate.resolve())
        matches = [r for r in list_runs() if r.run_id.startswith(ref)]
        if len(matches) == 1:
            return RunPaths(matches[0].run_dir)
        if len(matches) > 1:
            raise RunError(f"{ref!r} matches {len(matches)} runs", hint="give more of the run id")
        raise RunError(f"no run {ref!r}", hint="`hpcflow runs` lists the known runs")
    runs = [r for r in list_runs() if (r.run_dir / "state.sqlite").exists()]
    if not runs:
        raise RunError("no runs yet", hint="start one with `hpcflow run WORKFLOW.yaml`")
    return RunPaths(runs[-1].run_dir)


@dataclass(frozen=True)
class RunView:
    """What status/runs/logs show of a run."""

    paths: RunPaths
    meta: dict[str, Any]
    counts: dict[str, dict[str, int]]
    order: list[str]

    @property
    def status(self) -> str:
        status = str(self.meta.get("status", "unknown"))
        if status == "running" and not driver_alive(self.meta):
            return "interrupted"
        return status


def driver_alive(meta: dict[str, Any]) -> bool:
    """Whether the run's driver process still exists (only knowable on its own host).

    A pilot's driver runs inside the allocation and records itself as ``driver_pid``/
    ``driver_host``; ``pid``/``host`` are the process that created the run.
    """
    host = meta.get("driver_host", meta.get("host"))
    if host != socket.gethostname():
        return True
    pid = meta.get("driver_pid", meta.get("pid"))
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_run(paths: RunPaths) -> RunView:
    try:
        with StateDB(paths.state_db, readonly=True) as db:
            return RunView(paths, db.meta(), db.counts(), db.names_in_order())
    except (FileNotFoundError, OSError) as exc:
        raise RunError(f"cannot read run state in {paths.run_dir}: {exc}") from None
