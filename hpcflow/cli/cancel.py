"""`hpcflow cancel RUN`: stop a run from any shell, in every mode, without writing its state.

The run's state belongs to its driver, so cancel asks instead of writing: it leaves a
request file in the run directory, which the driver (local, elastic, jobs mode, or inside
an allocation) sees within a second and acts on as on Ctrl-C; and it asks the batch
system to cancel the run's unfinished allocations. A local driver that does not stop in
time is sent SIGTERM, but only when it is provably this run's driver on this machine
(:class:`~hpcflow.store.process.ProcessIdentity`): a pid recorded on a compute node means
nothing here.
"""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING

import click

from hpcflow.store.states import RunStatus

if TYPE_CHECKING:
    from hpcflow.store.paths import RunPaths

#: Seconds to wait for a driver on this machine to act on the request before SIGTERM.
DRIVER_GRACE = 10.0


@click.command("cancel")
@click.argument("run")
def command(run: str) -> None:
    """Cancel RUN (run id, prefix or directory): its allocations, and its driver."""
    from hpcflow.backends.base import AllocationState
    from hpcflow.backends.registry import get_backend
    from hpcflow.cli._common import driver_alive, find_run, fresh_allocations
    from hpcflow.store.atomic import write_json_atomic
    from hpcflow.store.process import ProcessIdentity
    from hpcflow.store.statedb import DRIVER_DONE, StateDB

    paths = find_run(run)
    with StateDB(paths.state_db, readonly=True) as db:
        meta = db.meta()
        known = db.allocations()
    # What the batch system says now (a detached run has no follower to record it).
    allocations = [
        a
        for a in fresh_allocations(known)
        if not AllocationState(a.state).final and a.backend != "allocation"
    ]
    active = meta.get("status") not in DRIVER_DONE
    if not active and not allocations:
        click.echo(f"run {meta.get('run_id')} is not active ({meta.get('status')})")
        return
    write_json_atomic(
        paths.cancel_request,
        {"requested": time.time(), "by": ProcessIdentity.current().to_meta()},
    )
    # Only the driver is ever signalled (the process that created a pilot run merely
    # follows it, and stops by itself when it sees the request).
    ident = ProcessIdentity.from_meta(meta.get("driver"))
    here = ident is not None and ident.on_this_machine()
    if active and meta.get("status") == RunStatus.RUNNING:
        # The driver, wherever it runs, stops the run itself and records it: give it a
        # moment before the batch system ends its allocation under it.
        deadline = time.monotonic() + DRIVER_GRACE
        while time.monotonic() < deadline and not _finished(paths):
            if here and not driver_alive(meta):
                break
            time.sleep(0.2)
        if _finished(paths):
            click.echo("the run's driver stopped the run")
    by_backend: dict[str, list[str]] = {}
    for row in allocations:
        by_backend.setdefault(row.backend, []).append(row.native_id)
    for backend, ids in by_backend.items():
        get_backend(backend).cancel(ids)
    if allocations:
        click.echo(f"cancelled allocation(s) {', '.join(a.native_id for a in allocations)}")
    if ident is not None and here and ident.alive_here() and not _finished(paths):
        os.kill(ident.pid, signal.SIGTERM)
        click.echo(f"asked the driver (pid {ident.pid}) to stop with SIGTERM")
    elif active and not allocations and not here:
        click.echo("asked the run's driver to stop")


def _finished(paths: RunPaths) -> bool:
    """Whether the run's driver has recorded an end (a reader; never writes)."""
    import sqlite3

    from hpcflow.store.statedb import DRIVER_DONE, StateDB

    try:
        with StateDB(paths.state_db, readonly=True) as db:
            return db.meta().get("status") in DRIVER_DONE
    except (OSError, sqlite3.Error):  # busy or briefly unreadable: ask again
        return False
