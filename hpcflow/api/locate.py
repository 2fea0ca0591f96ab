"""Finding runs and reading what they are: by id, prefix, directory or "the latest", for
the commands that read runs (status, logs, result, report, cancel) and for
:class:`~hpcflow.api.run.Run`."""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcflow.errors import RunError
from hpcflow.store.paths import RunPaths, StateRoot
from hpcflow.store.private import check_private
from hpcflow.store.process import ProcessIdentity
from hpcflow.store.registry import RegisteredRun, list_runs
from hpcflow.store.statedb import StateDB
from hpcflow.store.states import RunStatus

log = logging.getLogger(__name__)


def find_run(ref: str | None, folder: Path | None = None) -> RunPaths:
    """A run by directory path, by run id (or unique prefix), or the latest one.

    ``latest`` (or no reference at all) names the most recent run of the workflows in
    ``folder`` (default: the current folder; :func:`latest_run_in`), or, when there is
    none, the user's most recent run anywhere, with a warning that names it.

    A run folder or state file that another account owns, or may change, is refused
    (:class:`~hpcflow.store.private.StateNotPrivate`): what it says is not read.
    """
    paths = _find_run(ref, folder)
    check_private(paths.run_dir)
    if paths.state_db.exists():
        check_private(paths.state_db)
    return paths


def _find_run(ref: str | None, folder: Path | None) -> RunPaths:
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
    cwd = (folder or Path.cwd()).resolve()
    registered = list_runs()
    here = latest_run_in(cwd, registered)
    if here is not None:
        return RunPaths(here)
    runs = [r for r in registered if RunPaths(r.run_dir).state_db.exists()]
    if not runs:
        raise RunError("no runs yet", hint="start one with `hpcflow run WORKFLOW.yaml`")
    latest = runs[-1]
    log.warning(
        "no run of a workflow in %s: using your latest run anywhere, %s (%s); "
        "pass RUN to choose another (`hpcflow runs` lists them)",
        cwd,
        latest.run_id,
        latest.workflow,
    )
    return RunPaths(latest.run_dir)


def latest_run_in(folder: Path, registered: list[RegisteredRun]) -> Path | None:
    """The directory of the newest run of the workflows in ``folder`` (resolved); where
    it has none, of the workflows in its subfolders (a project's root); None if neither
    has one (:func:`runs_in`)."""
    own, below = runs_in(folder, registered)
    if own:
        return max(own, key=lambda run_dir: own[run_dir])
    return below[-1].run_dir.resolve() if below else None


def runs_in(
    folder: Path, registered: list[RegisteredRun]
) -> tuple[dict[Path, tuple[str, float]], list[RegisteredRun]]:
    """The runs of the workflows in ``folder`` (resolved): those in its
    ``.hpcflow/runs/`` (hpcflow's and Snakemake's) and those of a workflow file in it kept
    elsewhere (``--run-dir``), as run directory → what orders them (the second in the run
    id, then the start the index has); and those of workflows in its subfolders, among
    ``registered``."""
    # Newest by the second in the run id, then by the start the index has (runs of
    # the same second); a run the index lacks is then the oldest of its second.
    started = {run.run_dir.resolve(): run.started for run in registered}
    own: dict[Path, tuple[str, float]] = {}
    runs = StateRoot.in_folder(folder).runs
    if runs.is_dir():
        for child in runs.iterdir():
            if RunPaths(child).state_db.exists():
                run_dir = child.resolve()
                own[run_dir] = (child.name[:15], started.get(run_dir, 0.0))
    below: list[RegisteredRun] = []
    for run in registered:
        if not RunPaths(run.run_dir).state_db.exists():
            continue
        workflow = Path(run.workflow)
        if workflow.parent == folder:
            own[run.run_dir.resolve()] = (run.run_id[:15], run.started)
        elif folder in workflow.parents:
            below.append(run)
    return own, below


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
    """What the run is now: its meta, counts and task order, all of one commit (one
    snapshot: :mod:`hpcflow.store.snapshot`)."""
    try:
        with StateDB(paths.state_db, readonly=True) as db:
            return view_of(paths, db)
    except (FileNotFoundError, OSError) as exc:
        raise RunError(f"cannot read run state in {paths.run_dir}: {exc}") from None


def view_of(paths: RunPaths, db: StateDB) -> RunView:
    """The :class:`RunView` of the commit ``db`` (a reader) reads."""
    return RunView(paths, db.meta(), db.counts(), db.names_in_order())


def fresh_allocations(rows: list[Any]) -> list[Any]:
    """``rows`` with the batch system's word on the unfinished ones (one query per
    backend). Only shown: the run's files belong to its driver and submitting process."""
    import dataclasses

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
            log.warning("could not refresh allocation states: %s", exc)
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
