"""Helpers shared by CLI commands: finding runs, reading their state."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcflow.errors import RunError
from hpcflow.store.paths import RunPaths, StateRoot
from hpcflow.store.process import ProcessIdentity
from hpcflow.store.registry import list_runs
from hpcflow.store.statedb import StateDB
from hpcflow.store.states import RunStatus


def find_run(ref: str | None) -> RunPaths:
    """A run by directory path, by run id (or unique prefix), or the latest one.

    ``latest`` (or no reference at all) names the most recent run of the workflows in
    the current folder, or, when there is none, the user's most recent run anywhere.
    """
    if ref == "latest":
        ref = None
    if ref:
        candidate = Path(ref)
        if RunPaths(candidate).state_db.exists():
            return RunPaths(candidate.resolve())
        matches = [r for r in list_runs() if r.run_id.startswith(ref)]
        if len(matches) == 1:
            return RunPaths(matches[0].run_dir)
        if len(matches) > 1:
            raise RunError(f"{ref!r} matches {len(matches)} runs", hint="give more of the run id")
        raise RunError(f"no run {ref!r}", hint="`hpcflow runs` lists the known runs")
    here = StateRoot.in_folder(Path.cwd()).runs
    if here.is_dir():  # run ids start with their time: the last in name order is newest
        local = sorted(p.name for p in here.iterdir() if RunPaths(here / p.name).state_db.exists())
        if local:
            return RunPaths((here / local[-1]).resolve())
    runs = [r for r in list_runs() if RunPaths(r.run_dir).state_db.exists()]
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
        if status == RunStatus.RUNNING and not driver_alive(self.meta):
            return RunStatus.INTERRUPTED
        return status


def driver_alive(meta: dict[str, Any]) -> bool:
    """Whether the run's driver process still exists, as far as this machine can tell.

    A driver on another machine (a pilot's, inside its allocation) cannot be checked from
    here and counts as alive; one recorded on this machine (same host, boot and PID
    namespace: :class:`~hpcflow.store.process.ProcessIdentity`) is alive only while that
    very process (same pid and start time) runs.
    """
    ident = ProcessIdentity.from_meta(meta.get("driver") or meta.get("creator"))
    if ident is None:
        return meta.get("driver_host", meta.get("host")) != socket.gethostname()
    if not ident.on_this_machine():
        return True
    return ident.alive_here()


def read_run(paths: RunPaths) -> RunView:
    try:
        with StateDB(paths.state_db, readonly=True) as db:
            return RunView(paths, db.meta(), db.counts(), db.names_in_order())
    except (FileNotFoundError, OSError) as exc:
        raise RunError(f"cannot read run state in {paths.run_dir}: {exc}") from None


def fresh_allocations(rows: list[Any]) -> list[Any]:
    """``rows`` with the batch system's word on the unfinished ones (one query per
    backend). Only shown: the run's files belong to its driver and submitting process."""
    import dataclasses
    import logging

    from hpcflow.backends.base import AllocationState
    from hpcflow.backends.registry import get_backend
    from hpcflow.errors import HpcflowError

    active: dict[str, list[str]] = {}
    for row in rows:
        if not AllocationState(row.state).final and row.backend != "allocation":
            active.setdefault(row.backend, []).append(row.native_id)
    fresh: dict[str, Any] = {}
    for backend_name, ids in active.items():
        try:
            fresh.update(get_backend(backend_name).poll(ids))
        except (HpcflowError, OSError) as exc:
            logging.getLogger(__name__).warning("could not refresh allocation states: %s", exc)
    out = []
    for row in rows:
        found = fresh.get(row.native_id)
        if found is not None:
            row = dataclasses.replace(
                row, state=found.state.value, native_state=found.native_state,
                reason=found.reason,
            )  # fmt: skip
        out.append(row)
    return out
