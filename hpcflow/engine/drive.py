"""Drive the pending tasks of a run on a connected Dask (or pool) client, to the end."""

from __future__ import annotations

import errno
import logging
import os
import socket
import sqlite3
import time
from collections.abc import Callable

from hpcflow.engine.driver import Driver, Observer, PoolPlan
from hpcflow.engine.lifecycle import RunSummary, conclude
from hpcflow.engine.prepare import PreparedRun
from hpcflow.errors import RunError
from hpcflow.store import statedb as st
from hpcflow.store.memo import remove_journals
from hpcflow.store.process import ProcessIdentity
from hpcflow.store.states import RunStatus
from hpcflow.worker.journal import close_journals
from hpcflow.worker.pool import PoolClient

log = logging.getLogger(__name__)


def drive(
    prepared: PreparedRun,
    db: st.StateDB,
    run_id: str,
    client: object,
    slots: int,
    observer: Observer | None = None,
    deadline: float | None = None,
    drain_margin: float = 30.0,
    on_driver: Callable[[Driver], None] | None = None,
    pools: PoolPlan | None = None,
) -> RunSummary:
    """Run the pending tasks of an existing run on a connected Dask ``client``.

    ``on_driver`` is given the driver before it starts (elastic mode reads its backlog).
    """
    started = time.time()
    paths = prepared.factory.paths
    if paths is None:
        raise RunError("drive() needs a run directory")
    db.set_meta(
        status=RunStatus.RUNNING,
        driver_pid=os.getpid(),
        driver_host=socket.gethostname(),
        driver=ProcessIdentity.current().to_meta(),
    )
    driver = Driver(
        prepared.graph,
        prepared.factory,
        db,
        prepared.memo,
        client,
        slots,
        run_id,
        observer,
        deadline=deadline,
        drain_margin=drain_margin,
        cancel_request=paths.cancel_request,
        values_in_memory=not isinstance(client, PoolClient),
        pools=pools,
    )
    if on_driver is not None:
        on_driver(driver)
    attempts = [row.attempts for row in db.tasks()]
    try:
        result = driver.run(prepared.decision.run, attempts)
        # Every success the driver saw is in the memo now: the journal is no longer needed.
        prepared.memo.flush()
        close_journals()
        remove_journals(prepared.state_root.journal_dir(prepared.key), run_id)
    except KeyboardInterrupt:
        return conclude(db, RunSummary(run_id, paths, {}, cancelled=True), started)
    except (OSError, sqlite3.Error) as exc:
        problem = storage_problem(exc)
        if problem is None:
            raise
        # SQLite commits are atomic: what was recorded before the failure stands, and the
        # memo holds only finished successes. The cluster is closed by our callers.
        raise RunError(
            f"the run stopped: {problem} ({exc}) under {paths.run_dir.parent}",
            hint="free space (or make the folder writable again), then run the same "
            "command: the run resumes, and tasks that succeeded are not run again",
        ) from None
    summary = RunSummary(
        run_id, paths, result.counts, result.failed, result.cancelled, drained=result.drained
    )
    return conclude(db, summary, started)


def storage_problem(exc: BaseException) -> str | None:
    """A plain name for a full or unwritable file system behind ``exc`` (else None)."""
    if isinstance(exc, OSError):
        names = {
            errno.ENOSPC: "the disk is full",
            errno.EDQUOT: "the disk quota is exceeded",
            errno.EROFS: "the file system is read-only",
            errno.EACCES: "the run directory is not writable",
        }
        return names.get(exc.errno or 0)
    text = str(exc).lower()
    if "disk is full" in text or "disk i/o error" in text:
        return "the disk is full (or failing)"
    if "readonly" in text or "read-only" in text:
        return "the run directory is not writable"
    return None
