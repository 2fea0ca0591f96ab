"""Cancelling a run from any process, in every mode, without writing its state
(:meth:`hpcflow.api.Run.cancel`, ``hpcflow cancel``).

The run's state belongs to its driver, so cancelling asks instead of writing: it leaves
a request file in the run directory, which the driver (local, elastic, jobs mode, or
inside an allocation) sees within a second and acts on as on Ctrl-C; and it asks the
batch system to cancel the run's unfinished allocations. A local driver that does not
stop in time is sent SIGTERM, but only when it is provably this run's driver on this
machine (:class:`~hpcflow.store.process.ProcessIdentity`): a pid recorded on a compute
node means nothing here.
"""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import time
from dataclasses import dataclass, field

from hpcflow.api.locate import driver_alive, fresh_allocations
from hpcflow.backends.base import AllocationState
from hpcflow.backends.registry import get_backend
from hpcflow.store.atomic import write_json_atomic
from hpcflow.store.paths import RunPaths
from hpcflow.store.process import ProcessIdentity
from hpcflow.store.statedb import DRIVER_DONE, StateDB
from hpcflow.store.states import RunStatus

log = logging.getLogger(__name__)

#: Seconds to wait for a driver on this machine to act on the request before SIGTERM.
DRIVER_GRACE = 10.0


@dataclass
class Cancellation:
    """What cancelling a run did, in the order it did it."""

    #: The run's id, and its status when asked.
    run_id: str
    status: str
    #: Whether the run was active (its driver had not recorded an end, or it had
    #: unfinished allocations); an inactive run is left alone.
    active: bool = False
    #: Whether the run's driver stopped the run itself within :data:`DRIVER_GRACE`.
    driver_stopped: bool = False
    #: The allocations the batch system was asked to cancel (native ids).
    allocations: list[str] = field(default_factory=list)
    #: The pid of the driver on this machine sent SIGTERM, if one was.
    signalled: int | None = None
    #: Whether only the request file could ask the driver (it runs elsewhere, and the
    #: run has no allocation to cancel).
    asked_only: bool = False


def cancel_run(paths: RunPaths) -> Cancellation:
    """Cancel the run at ``paths``: its allocations, and its driver (see the module).

    Returns what was done; a run that is not active is left as it is
    (``Cancellation.active`` false).
    """
    with StateDB(paths.state_db, readonly=True) as db:
        meta = db.meta()
        known = db.allocations()
    done = Cancellation(str(meta.get("run_id")), str(meta.get("status")))
    # What the batch system says now (a detached run has no follower to record it).
    allocations = [
        a
        for a in fresh_allocations(known)
        if not AllocationState(a.state).final and a.backend != "allocation"
    ]
    active = meta.get("status") not in DRIVER_DONE
    if not active and not allocations:
        return done
    done.active = True
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
        while time.monotonic() < deadline and not run_finished(paths):
            if here and not driver_alive(meta):
                break
            time.sleep(0.2)
        done.driver_stopped = run_finished(paths)
    by_backend: dict[str, list[str]] = {}
    for row in allocations:
        by_backend.setdefault(row.backend, []).append(row.native_id)
    for backend, ids in by_backend.items():
        get_backend(backend).cancel(ids)
    done.allocations = [a.native_id for a in allocations]
    if ident is not None and here and ident.alive_here() and not run_finished(paths):
        os.kill(ident.pid, signal.SIGTERM)
        log.info("sent SIGTERM to the driver (pid %s) of run %s", ident.pid, done.run_id)
        done.signalled = ident.pid
    elif active and not allocations and not here:
        done.asked_only = True
    return done


def run_finished(paths: RunPaths) -> bool:
    """Whether the run's driver has recorded an end (a reader; never writes)."""
    try:
        with StateDB(paths.state_db, readonly=True) as db:
            return db.meta().get("status") in DRIVER_DONE
    except (OSError, sqlite3.Error):  # busy or briefly unreadable: ask again
        return False
