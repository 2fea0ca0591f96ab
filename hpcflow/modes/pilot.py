"""Pilot mode: one allocation per run that boots Dask on its ranks and runs every task
(one per pool when the tasks need several of the profile's pools: see
:mod:`hpcflow.modes.pilot_pools`).

On the submit host this module creates the run, renders and submits the batch script,
then follows the run: progress from the run directory, the allocations' states from ONE
batched, backing-off poller. Ctrl-C cancels the allocations. The plans themselves are
:mod:`hpcflow.modes.pilot_plan`'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from hpcflow.backends.base import AllocationState, AllocationStatus, Backend
from hpcflow.backends.poller import Poller
from hpcflow.bootstrap.preflight import check_transport
from hpcflow.dag.graph import TaskGraph
from hpcflow.engine.capacity import check_capacity
from hpcflow.engine.driver import Observer
from hpcflow.engine.lifecycle import RunLife, RunSummary, summarize
from hpcflow.engine.pools import one_pool_name
from hpcflow.engine.prepare import PreparedRun, RunOptions
from hpcflow.errors import AllocationFailed, SubmitError
from hpcflow.modes.follow import QUIETLY, Follow
from hpcflow.modes.pilot_plan import (
    PilotPlan,
    first_node,
    plan_in_allocation,
    plan_pilot,
    renumbered,
)
from hpcflow.modes.pilot_pools import (
    PoolAllocations,
    PoolCompanions,
    check_pools_capacity,
    plan_pools,
    pools_needed,
)
from hpcflow.settings.profile import Profile
from hpcflow.store import statedb as st
from hpcflow.store.lock import RunLock
from hpcflow.store.paths import RunPaths
from hpcflow.store.states import RunStatus
from hpcflow.transport.certificates import create_credentials
from hpcflow.transport.security import check_choice

log = logging.getLogger(__name__)

#: Seconds an allocation may run on after the run inside it has finished (its ranks
#: normally leave together within a second or two) before hpcflow cancels it.
LINGER_SECONDS = 60.0

#: The run statuses with which a driver ends a run it ran to its end.
_DRIVER_ENDED = (RunStatus.SUCCEEDED, RunStatus.FAILED)

#: SLURM's state for an allocation ended by the failure of one of its nodes.
NODE_FAIL = "NODE_FAIL"


def submit_allocation(
    backend: Backend,
    plan: PilotPlan,
    paths: RunPaths,
    submit: st.SubmitDB,
    number: int,
    *,
    retries: int = 3,
    sleep: Callable[[float], None] = time.sleep,
    lock: RunLock | None = None,
) -> str:
    """Render, write and submit; transient failures are retried with backoff. ``lock``
    (the workflow's lease) names the allocation at once: it is live while it is queued."""
    script = backend.render(plan.request)
    path = paths.allocation_script(number)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(script, encoding="utf-8")
    delay = 1.0
    for attempt in range(retries + 1):
        try:
            native_id = backend.submit(path, plan.request)
            break
        except SubmitError as exc:
            if not exc.transient or attempt == retries:
                raise
            log.warning("submission failed (%s); retrying in %.0fs", exc.message, delay)
            sleep(delay)
            delay = min(delay * 2, 30.0)
    if lock is not None and backend.name != "allocation":  # (ours: a child of this process)
        lock.note_allocations(backend.name, [native_id])
    submit.add_allocation(
        st.AllocationRow(
            native_id=native_id,
            number=number,
            backend=backend.name,
            state=AllocationState.QUEUED.value,
            native_state=None,
            reason=None,
            submitted=time.time(),
            updated=None,
            script=str(path),
            stdout=str(plan.request.stdout),
            stderr=str(plan.request.stderr),
            pool=plan.config.pool,
        )
    )
    log.info("allocation %d submitted as %s %s", number, backend.name, native_id)
    return native_id


def run_pilot(
    prepared: PreparedRun,
    options: RunOptions,
    profile: Profile,
    backend: Backend,
    follow: Follow = QUIETLY,
    *,
    layout: dict[str, int] | None = None,
) -> RunSummary:
    """Create the run, submit its allocation (one per pool its tasks need), and follow it
    (unless ``detach``)."""
    graph = prepared.graph
    # Before anything is created: the tasks' pools (a missing one, or none fits, is refused).
    several = None if layout is not None else pools_needed(graph, profile, prepared.decision.run)
    base = profile
    pool = None
    if several is None:
        pool = one_pool_name(graph, profile, prepared.decision.run)
        profile = profile.for_pool(pool)
    else:
        profile = profile.for_pool(several[0])
    extra = {"profile": profile.name, "mode": "pilot", "walltime": profile.walltime}
    with RunLife(prepared, options, backend=profile.backend, extra=extra) as life:
        # Fail before anything is created or submitted (the ranks check again on the nodes).
        check_choice(
            profile.transport,
            require_encryption=profile.require_encryption,
            shared_machine=backend.name != "local",
        )
        check_transport(profile.transport, profile.python)
        prepared = life.create()
        paths, run_id = life.paths, life.run_id
        pools: PoolAllocations | None = None
        if several is not None:
            head, of_template = several
            pools = plan_pools(base, paths, run_id, graph.loaded.base_dir, head, of_template)
            plan = pools.plans[head]
            check_pools_capacity(graph, prepared.decision.run, pools, base)
        elif layout is not None:
            plan = plan_in_allocation(profile, paths, run_id, graph.loaded.base_dir, layout)
        else:
            plan = plan_pilot(profile, paths, run_id, graph.loaded.base_dir, pool=pool)
        if pools is None:
            check_capacity(
                graph,
                prepared.decision.run,
                plan.config.threads_per_worker,
                plan.config.gpus_per_worker,
                where=f"profile {profile.name!r}",
                mpi_wrapped=profile.launcher != "single",
            )
        if life.nothing_to_run:
            return life.all_cached()
        if plan.config.transport == "tls":
            create_credentials(paths.run_dir, run_id)
        if pools is not None:
            pools.write_configs(paths)
        else:
            plan.config.write(paths.pilot_config)
        # From here on the driver inside the allocation is the only writer of state.sqlite
        # and of the memo; this side writes what it knows in submit.sqlite.
        life.hand_over()
        with st.SubmitDB(paths.submit_db) as submit:
            companions: PoolCompanions | None = None
            try:
                native_id = submit_allocation(
                    backend, plan, paths, submit, 1, retries=profile.submit_retries,
                    lock=prepared.lock,
                )  # fmt: skip
                if pools is not None:
                    companions = _other_pools(
                        backend, pools, paths, submit, base, graph, prepared.lock
                    )
                    if follow.detach:
                        # Nobody follows the run to queue them when due: queue them now.
                        companions.submit_all()
            except BaseException as exc:
                submit.declare_over(
                    RunStatus.FAILED, "the allocation was never submitted",
                    error=f"submission failed: {exc}"[:2000],
                )  # fmt: skip
                raise
            submit.set_meta(status=RunStatus.SUBMITTED)
            follow.submitted(native_id, paths)
            if follow.detach:
                # The lease stays, naming the allocations: the driver inside takes it.
                prepared.lock.hand_over()
                return RunSummary(
                    run_id, paths, {RunStatus.SUBMITTED: 1}, elapsed=time.time() - life.started
                )
            poller = (follow.poller_factory or default_poller)(backend, profile)
            with st.StateDB(paths.state_db, readonly=True) as view:
                return _follow(
                    view, submit, paths, run_id, backend, poller, profile, plan, native_id,
                    follow.observer, life.started, companions, prepared.lock,
                )  # fmt: skip


def _other_pools(
    backend: Backend,
    pools: PoolAllocations,
    paths: RunPaths,
    submit: st.SubmitDB,
    profile: Profile,
    graph: TaskGraph,
    lock: RunLock | None = None,
) -> PoolCompanions:
    """The allocations of every pool but the head's (already queued), each queued when
    it is due. A pool whose allocation cannot be queued ends the run: the head allocation
    (and what else was queued) must not wait for workers that will never come."""

    def submit_pool(pool: str) -> str:
        plan, number = companions.allocation_for(pool)
        try:
            return submit_allocation(
                backend, plan, paths, submit, number, retries=profile.submit_retries, lock=lock
            )
        except BaseException:
            backend.cancel(submit_ids(submit))
            raise

    companions = PoolCompanions(pools, graph, paths, submit_pool)
    return companions


def submit_ids(submit: st.SubmitDB) -> list[str]:
    """The native ids of the allocations ``submit`` records."""
    return [row.native_id for row in submit.allocations()]


def lost_tasks_note(db: st.StateDB, limit: int = 20) -> str:
    """Which tasks an allocation that ended early took with it: those in flight (handed
    to its workers, not finished: their attempts are lost) and those it had not started;
    both run on resume, and nothing else."""
    running = [row.id for row in db.tasks(states=(st.RUNNING,))]
    pending = len(db.tasks(states=(st.PENDING,)))
    if not running and not pending:
        return "no task was lost"
    shown = ", ".join(running[:limit]) + (
        f" and {len(running) - limit} more" if len(running) > limit else ""
    )
    lost = f"{len(running)} task(s) in flight lost: {shown}" if running else "none in flight"
    return f"{lost}; {pending} not started; a resume runs exactly these {len(running) + pending}"


def default_poller(backend: Backend, profile: Profile) -> Poller:
    """The ONE poller that follows a run's allocations (pilot mode, jobs mode, the
    Snakemake plugin's pilot allocations)."""
    if backend.name == "allocation":
        # A child process of ours: asking costs nothing.
        return Poller(backend, interval=0.2, initial_delay=0.2, max_interval=1.0)
    # A controller that stops answering (restart, overload) must not end the run: keep
    # backing off and asking; the allocation runs on without us.
    return Poller(
        backend,
        interval=profile.poll_interval,
        initial_delay=min(1.0, profile.poll_interval),
        max_interval=max(profile.max_poll_interval, profile.poll_interval),
        max_failures=1_000_000,
    )


def continuation_due(
    status: AllocationStatus, drained: bool, profile: Profile, number: int
) -> str | None:
    """Why allocation ``number``, ended as ``status``, is followed by a continuation
    ("hit its walltime", "lost a node"), or None when it is not.

    An allocation that stopped early (its walltime, or a lost node; ``drained``: its
    driver stopped before the walltime with tasks left) is continued when the profile
    says ``resubmit: true``, by at most ``max_resubmits`` continuations in all. The rule of
    pilot mode and of the Snakemake plugin's pilot allocations.
    """
    node_failed = status.native_state == NODE_FAIL
    stopped_early = status.state is AllocationState.TIMEOUT or drained or node_failed
    if not stopped_early or not profile.resubmit:
        return None
    if number > profile.max_resubmits:
        log.warning(
            "allocation %s ended (%s) and the profile allows no more than %d "
            "continuation allocations",
            status.native_id,
            status.native_state,
            profile.max_resubmits,
        )
        return None
    return "lost a node" if node_failed else "hit its walltime"


def _follow(
    db: st.StateDB,
    submit: st.SubmitDB,
    paths: RunPaths,
    run_id: str,
    backend: Backend,
    poller: Poller,
    profile: Profile,
    plan: PilotPlan,
    native_id: str,
    observer: Observer | None,
    started: float,
    companions: PoolCompanions | None = None,
    lock: RunLock | None = None,
) -> RunSummary:
    """Wait for the allocation; continue it after a walltime stop (or a node failure)
    when the profile says so. ``db`` reads the run (the driver writes it); what this side
    learns goes to ``submit``. ``companions``: the allocations of the run's other pools,
    followed too, cancelled once the run is over, and the run's end when one ends with
    tasks of its pool still to run."""
    number = 1  # the head allocation's
    continued = 0  # continuation allocations made, of any pool
    current = native_id
    last: AllocationStatus | None = None
    ended_at: float | None = None  # when the run was first seen finished
    head: str | None = None  # the allocation's first node: batch script, scheduler, driver
    poller.track([current, *(companions.ids() if companions else [])])
    try:
        while True:
            poller.poll_once()
            status = poller.latest.get(current)
            db.refresh()  # this round's meta, counts and tasks: all of one commit
            meta = db.meta()
            if companions is not None:
                if meta.get("status") not in _DRIVER_ENDED:
                    companions.submit_due(db, poller)
                companions.update(poller, submit)
                early = None
                # (A drained head ends soon: its continuation queues the pools again.)
                if meta.get("status") not in (*_DRIVER_ENDED, RunStatus.DRAINED):
                    early = companions.ended_early(poller, db)
                if early is not None:
                    pool, pool_id, reason = early
                    why = continuation_due(poller.latest[pool_id], False, profile, continued + 1)
                    if why is not None:
                        continued += 1
                        new_id = companions.resubmit(pool)
                        log.warning(
                            "allocation %s of pool %s %s; %s; submitting continuation %s",
                            pool_id, pool, why, lost_tasks_note(db), new_id,
                        )  # fmt: skip
                        poller.track([new_id])
                        early = None
                if early is not None:
                    pool, pool_id, reason = early
                    log.error("%s: cancelling the run", reason)
                    backend.cancel([current, *companions.live(poller)])
                    submit.declare_over(RunStatus.FAILED, reason)
                    raise AllocationFailed(
                        pool_id,
                        poller.latest[pool_id].native_state or "ended",
                        f"{reason}; {lost_tasks_note(db)} (run the same `hpcflow run` again "
                        "to resume)",
                        companions.logs(pool),
                    )
            head_lost = False
            if (
                backend.name == "slurm"
                and status is not None
                and status.state is AllocationState.RUNNING
                and status.nodes
            ):
                first = first_node(status.nodes)
                head = head or first
                if first != head and meta.get("status") not in (
                    RunStatus.SUCCEEDED,
                    RunStatus.FAILED,
                ):
                    # With --no-kill SLURM drops a failed node from the allocation and lets
                    # it run on; without its first node it has no driver and would idle
                    # until the walltime.
                    reason = (
                        f"its first node {head} (batch script, scheduler and driver) failed; "
                        "hpcflow cancelled the rest"
                    )
                    log.warning("allocation %s: %s", current, reason)
                    backend.cancel([current])
                    status = replace(
                        status, state=AllocationState.FAILED, native_state=NODE_FAIL, reason=reason
                    )
                    head_lost = True
            if status is not None and status != last:
                submit.update_allocation(
                    current, status.state.value, status.native_state, status.reason
                )
                last = status
            submit.flush_due()
            if observer is not None:
                observer.update(db.counts())
            if meta.get("status") in (RunStatus.SUCCEEDED, RunStatus.FAILED) and not poller.settled(
                [current]
            ):
                if ended_at is None:
                    ended_at = time.monotonic()
                    poller.hurry()  # the allocation ends within seconds: see it soon
                if time.monotonic() - ended_at > LINGER_SECONDS:
                    # E.g. srun still waits for ranks on a node that died and that
                    # SLURM has not declared down yet: the run is over, free the nodes.
                    log.warning(
                        "the run ended %.0fs ago but allocation %s still runs; cancelling it",
                        LINGER_SECONDS,
                        current,
                    )
                    backend.cancel([current])
                    break
            if status is not None and (head_lost or poller.settled([current])):
                finished = meta.get("status") in _DRIVER_ENDED
                if companions is not None:
                    companions.cancel_live(backend, poller)
                    if finished:
                        companions.settle(poller, submit)
                if finished:
                    if meta.get("status") == RunStatus.FAILED and meta.get("error"):
                        log.error(
                            "the run's driver failed: %s (its log: %s)",
                            meta["error"],
                            paths.driver_log,
                        )
                    break
                if paths.cancel_request.exists():
                    # `hpcflow cancel` ended the allocation: the run was cancelled, as asked.
                    submit.declare_over(RunStatus.CANCELLED, "run cancelled (hpcflow cancel)")
                    return summarize(db, paths, run_id, started, cancelled=True)
                drained = meta.get("status") == RunStatus.DRAINED
                why = continuation_due(status, drained, profile, continued + 1)
                if why is not None:
                    continued += 1
                    if companions is not None:
                        # The head's allocation again: its scheduler and driver are new,
                        # and the other pools' allocations are queued again when due.
                        number = companions.new_number()
                        plan = renumbered(companions.pools.plans[companions.pools.head],
                                          paths, number)  # fmt: skip
                        companions.restart()
                        # The old scheduler's address: no pool's workers may take it for
                        # the new one's (the new head publishes its own).
                        paths.scheduler_address.unlink(missing_ok=True)
                    else:
                        number += 1
                        plan = plan_pilot(
                            profile,
                            paths,
                            run_id,
                            Path(plan.config.base_dir),
                            number,
                            pool=plan.config.pool,
                        )
                    log.warning(
                        "allocation %s %s; %s; submitting continuation %d",
                        current,
                        why,
                        lost_tasks_note(db),
                        number,
                    )
                    current = submit_allocation(
                        backend, plan, paths, submit, number, retries=profile.submit_retries,
                        lock=lock,
                    )  # fmt: skip
                    poller.track([current])
                    last = None
                    head = None
                    continue
                note = lost_tasks_note(db)
                submit.declare_over(
                    RunStatus.FAILED, f"allocation {current} ended before the run finished"
                )
                raise AllocationFailed(
                    current,
                    status.native_state,
                    f"{status.reason or 'it ended before the run finished'}; {note} "
                    "(run the same `hpcflow run` again to resume)",
                    [
                        str(paths.allocation_stdout(number)),
                        str(paths.allocation_stderr(number)),
                        str(paths.driver_log),
                    ],
                )
            time.sleep(0.2)
    except KeyboardInterrupt:
        log.warning("cancelling allocation %s", current)
        backend.cancel([current, *(companions.live(poller) if companions else [])])
        submit.declare_over(RunStatus.CANCELLED, "run cancelled")
        db.refresh()
        return summarize(db, paths, run_id, started, cancelled=True)
    db.refresh()  # the driver's last snapshot (sealed: the file itself) once it ended
    return summarize(db, paths, run_id, started)
