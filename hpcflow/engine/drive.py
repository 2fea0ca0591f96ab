"""Drive the pending tasks of a run on a connected Dask (or pool) client, to the end."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable

from hpcflow.engine.driver import Driver, DriverResult, Observer, PoolPlan
from hpcflow.engine.fanout import plan_made, waiting_message
from hpcflow.engine.leftovers import end_leftovers
from hpcflow.engine.lifecycle import RunSummary, conclude, mark_unfinished
from hpcflow.engine.prepare import PreparedRun
from hpcflow.errors import RunError, WorkersGone
from hpcflow.store import statedb as st
from hpcflow.store.memo import remove_journals
from hpcflow.store.process import ProcessIdentity
from hpcflow.store.states import RunStatus
from hpcflow.store.storage_errors import storage_errors
from hpcflow.worker.journal import close_journals
from hpcflow.worker.leaders import close_leaders
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
    workers_gone: Callable[[], str | None] | None = None,
) -> RunSummary:
    """Run the pending tasks of an existing run on a connected Dask ``client``.

    ``on_driver`` is given the driver before it starts (elastic mode reads its backlog).
    ``workers_gone`` says why no worker is left nor will come (else None): the run then
    ends with :class:`~hpcflow.errors.WorkersGone`, its unfinished tasks marked as such.
    """
    started = time.time()
    paths = prepared.factory.paths
    if paths is None:
        raise RunError("drive() needs a run directory")
    # Every write, to the end (the run's last status too), may meet a full disk.
    with storage_errors(paths.run_dir.parent):
        db.set_meta(
            status=RunStatus.RUNNING,
            driver_pid=os.getpid(),
            driver_host=socket.gethostname(),
            driver=ProcessIdentity.current().to_meta(),
        )
        # Tasks an earlier run whose driver died left running: ended before any starts.
        end_leftovers(prepared.state_root.journal_dir(prepared.key), run_id)
        states: list[st.TaskState] | None = None
        grown: PreparedRun | None = prepared
        result: DriverResult | None = None
        try:
            while grown is not None:
                prepared = grown
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
                    workers_gone=workers_gone,
                )
                if on_driver is not None:
                    on_driver(driver)
                rows = db.tasks()
                attempts = [row.attempts for row in rows]
                if states is not None or prepared.graph.waiting:
                    states = [row.state for row in rows]
                ran = driver.run(prepared.decision.run, attempts, states)
                result = ran if result is None else _merged(result, ran)
                # Every success the driver saw is in the memo now.
                prepared.memo.flush()
                grown = None
                if not (ran.cancelled or ran.drained):
                    grown = plan_made(prepared, db)
            # The journal is no longer needed.
            close_journals()
            close_leaders()
            remove_journals(prepared.state_root.journal_dir(prepared.key), run_id)
        except KeyboardInterrupt:
            return conclude(db, RunSummary(run_id, paths, {}, cancelled=True), started)
        except WorkersGone as exc:
            mark_unfinished(db, str(exc)[:500])
            db.flush()
            raise
        if result is None:  # (the loop runs at least once)
            raise RunError("the run's driver did not run")
        never = waiting_message(prepared.graph)
        if never is not None and not (result.cancelled or result.drained):
            log.warning("%s", never)
        summary = RunSummary(
            run_id, paths, result.counts, result.failed, result.cancelled, drained=result.drained
        )
        return conclude(db, summary, started)


def _merged(before: DriverResult, after: DriverResult) -> DriverResult:
    """A grown run's result: the last driver's counts (it started from every state the
    run had), failures of both."""
    return DriverResult(
        after.counts,
        sorted({*before.failed, *after.failed}),
        cancelled=after.cancelled,
        drained=after.drained,
    )
