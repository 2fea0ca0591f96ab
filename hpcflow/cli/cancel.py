"""`hpcflow cancel RUN`: stop a run: its allocations, or its local driver."""

from __future__ import annotations

import os
import signal
import socket

import click


@click.command("cancel")
@click.argument("run")
def command(run: str) -> None:
    """Cancel RUN (run id, prefix or directory): scancel its allocations, or stop its driver."""
    from hpcflow.backends.base import AllocationState
    from hpcflow.backends.registry import get_backend
    from hpcflow.cli._common import driver_alive, find_run
    from hpcflow.errors import RunError
    from hpcflow.store.statedb import StateDB

    paths = find_run(run)
    with StateDB(paths.state_db) as db:
        meta = db.meta()
        allocations = [a for a in db.allocations() if not AllocationState(a.state).final]
        if allocations:
            by_backend: dict[str, list[str]] = {}
            for row in allocations:
                by_backend.setdefault(row.backend, []).append(row.native_id)
            for backend, ids in by_backend.items():
                get_backend(backend).cancel(ids)
                for native_id in ids:
                    db.update_allocation(
                        native_id,
                        AllocationState.CANCELLED.value,
                        None,
                        "cancelled by hpcflow cancel",
                    )
            click.echo(f"cancelled allocation(s) {', '.join(a.native_id for a in allocations)}")
    pid = meta.get("pid")
    if meta.get("status") in ("running", "submitted", "created") and isinstance(pid, int):
        if meta.get("host") != socket.gethostname():
            raise RunError(f"the run's driver runs on {meta.get('host')}; cancel it there")
        if driver_alive(meta):
            os.kill(pid, signal.SIGTERM)
            click.echo(f"asked the driver (pid {pid}) to stop")
            return
    if not allocations:
        click.echo(f"run {meta.get('run_id')} is not active ({meta.get('status')})")
