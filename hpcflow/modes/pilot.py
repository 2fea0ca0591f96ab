"""Pilot mode: one allocation per run that boots Dask on its ranks and runs every task.

On the submit host this module creates the run, renders and submits the batch script,
then follows the run: progress from the run directory, the allocation's state from ONE
batched, backing-off poller. Ctrl-C cancels the allocation.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from hpcflow.backends.base import AllocationRequest, AllocationState, AllocationStatus, Backend
from hpcflow.backends.poller import Poller
from hpcflow.bootstrap.config import PilotConfig
from hpcflow.bootstrap.preflight import check_transport
from hpcflow.bootstrap.roles import NON_WORKER_RANKS, spread
from hpcflow.engine.capacity import check_capacity
from hpcflow.engine.driver import Observer
from hpcflow.engine.lifecycle import RunLife, RunSummary, summarize
from hpcflow.engine.pools import one_pool
from hpcflow.engine.prepare import PreparedRun, RunOptions
from hpcflow.envs.site import SiteEnvironment
from hpcflow.errors import AllocationFailed, ProfileError, SubmitError
from hpcflow.launchers import bootstrap_argv, head_argv, worker_launch_argv
from hpcflow.modes.follow import QUIETLY, Follow
from hpcflow.settings.profile import Profile
from hpcflow.store import statedb as st
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


@dataclass(frozen=True)
class PilotPlan:
    """The allocation to ask for and the layout every rank will read."""

    request: AllocationRequest
    config: PilotConfig


def plan_pilot(
    profile: Profile,
    paths: RunPaths,
    run_id: str,
    base_dir: Path,
    number: int = 1,
    python: str | None = None,
) -> PilotPlan:
    """Turn a profile into an allocation request and the ranks' configuration."""
    gpus = profile.gpus_per_node
    if profile.workers_per_node == "per-gpu":
        if gpus < 1:
            raise ProfileError(
                "workers_per_node: per-gpu needs gpus_per_node ≥ 1",
                hint="set gpus_per_node in the profile",
            )
        per_node = gpus
    else:
        per_node = int(profile.workers_per_node)
    cpus_per_node = profile.cpus_per_node or per_node
    threads = profile.threads_per_worker or max(1, cpus_per_node // per_node)
    workers = profile.nodes * per_node
    # With overcommit the ranks of a node share its cores: SLURM's --overcommit then
    # allocates one rank's --cpus-per-task per node (and PBS is asked the same), so that
    # must be the cores the node's workers share, not one worker's threads.
    rank_cpus = threads
    if profile.overcommit and profile.cpus_per_node:
        rank_cpus = max(threads, profile.cpus_per_node)
    interpreter = profile.python or sys.executable
    command, ntasks = pilot_command(
        profile.launcher,
        interpreter,
        str(paths.run_dir),
        [per_node] * profile.nodes,
        mpi=profile.mpi,
    )
    setup = profile.module_lines() + list(profile.setup)
    request = AllocationRequest(
        run_id=run_id,
        job_name=f"hpcflow-{run_id}",
        run_dir=paths.run_dir,
        stdout=paths.allocation_stdout(number),
        stderr=paths.allocation_stderr(number),
        command=command,
        nodes=profile.nodes,
        ntasks=ntasks,
        # Every node gets its workers' cores. With --overcommit SLURM refuses a per-node
        # count whose tasks' CPUs exceed a node's; it then allocates per node (above)
        # and the workers' launch places them itself.
        ntasks_per_node=None if profile.overcommit else per_node,
        cpus_per_task=rank_cpus,
        gpus_per_node=gpus,
        memory_per_node=profile.memory_per_node,
        walltime=profile.walltime,
        partition=profile.partition,
        account=profile.account,
        qos=profile.qos,
        constraint=profile.constraint,
        overcommit=profile.overcommit,
        extra_directives=tuple(profile.extra_directives),
        setup_lines=tuple(setup),
        env={**profile.env, "HPCFLOW_RUN_ID": run_id, "HPCFLOW_ALLOCATION_NUMBER": str(number)},
        workdir=base_dir,
    )
    config = PilotConfig(
        workers_expected=workers,
        threads_per_worker=threads,
        gpus_per_worker=(gpus // per_node) if gpus else 0,
        base_dir=str(base_dir),
        local_directory=profile.local_directory,
        interface=profile.interface,
        transport=profile.transport,
        memory_limit=profile.worker_memory_limit,
        launcher=profile.launcher,
        mpi=profile.mpi,
        env=dict(profile.env),
        dashboard_address=profile.dashboard_address,
        memory_fractions=worker_memory_fractions(profile),
        worker_resources=dict(profile.worker_resources),
        lifetime=profile.worker_lifetime,
        lifetime_stagger=profile.worker_lifetime_stagger,
        nanny=profile.worker_nanny,
        software=SiteEnvironment.from_profile(profile, commands_here=False).to_dict(),
    )
    return PilotPlan(request, config)


def pilot_command(
    launcher: str, python: str, run_dir: str, counts: list[int], *, mpi: str = "pmix"
) -> tuple[list[str], int]:
    """The batch script's command for ``counts[i]`` workers on node i, and the tasks to
    ask the batch system for.

    Where the ranks run: the scheduler and the driver on the batch script's own node (the
    first node, which hpcflow watches), started by ``--role head``; the workers by one
    launch with an explicit count per node (srun ``--ntasks-per-node``, mpirun ``--map-by
    ppr:N:node``), so no node gets more workers than the profile asks for (and than it has
    GPUs), whatever the batch system's distribution. One launch of ``workers + 2`` ranks
    cannot ask for that: SLURM's block distribution put 3 of 6 ranks on each of 2 nodes
    (3 GPU workers next to 2 GPUs). With counts that differ (your own allocation's ranks
    spread unevenly), the launcher spreads them over ``len(counts)`` nodes itself.
    ``launcher: single`` keeps the one-launch layout (ranks 0 and 1 first).
    """
    workers = sum(counts)
    if launcher == "single":
        return bootstrap_argv(launcher, python, run_dir, workers), workers + NON_WORKER_RANKS
    even = len(set(counts)) == 1
    launch = worker_launch_argv(
        launcher,
        python,
        run_dir,
        len(counts),
        counts[0] if even else None,
        workers,
        mpi=mpi,
        extra=_launcher_fault_options(launcher, len(counts)),
    )
    return head_argv(python, run_dir, launch), workers


def _launcher_fault_options(launcher: str, nodes: int) -> list[str]:
    """srun's ``--no-kill`` on several nodes: when a node fails, srun ends the ranks it
    ran and goes on with the others, instead of killing the whole step (the allocation
    itself survives through sbatch's ``--no-kill``)."""
    return ["--no-kill"] if launcher == "srun" and nodes > 1 else []


def worker_memory_fractions(profile: Profile) -> dict[str, float | bool]:
    """The profile's memory thresholds, keyed as in ``distributed.worker.memory``."""
    fractions = {
        "target": profile.worker_memory_target,
        "spill": profile.worker_memory_spill,
        "pause": profile.worker_memory_pause,
    }
    return {key: value for key, value in fractions.items() if value is not None}


def plan_in_allocation(
    profile: Profile,
    paths: RunPaths,
    run_id: str,
    base_dir: Path,
    layout: dict[str, int],
    number: int = 1,
    env: Mapping[str, str] | None = None,
) -> PilotPlan:
    """The plan for the allocation we already run in: its ranks, as they are.

    Its ``ntasks`` ranks make ``ntasks - 2`` workers (the other two are the scheduler's
    and the driver's share; they run on this node, where ``hpcflow run`` is), spread as
    evenly as possible over its nodes: e.g. ``--nodes=2 --ntasks=6`` → 2 workers per node,
    one per GPU with ``--gres=gpu:2``. When ``hpcflow run`` is not on a node of the
    allocation (``salloc``'s shell on a login node), the scheduler and the driver run on
    its first node, in a step of their own that the workers' step may share.
    """
    env = os.environ if env is None else env
    ntasks = layout["ntasks"]
    gpus = layout["gpus_per_node"]
    workers = ntasks - NON_WORKER_RANKS
    base = plan_pilot(
        profile.model_copy(
            update={
                "nodes": layout["nodes"],
                "gpus_per_node": gpus,
                "workers_per_node": 1,
                "cpus_per_node": layout["cpus_per_task"],
                "threads_per_worker": layout["cpus_per_task"],
            }
        ),
        paths,
        run_id,
        base_dir,
        number,
    )
    counts = spread(workers, layout["nodes"])
    if gpus and counts and counts[0] > gpus:
        log.warning(
            "%d workers on a node with %d GPUs: they share devices (ask for %d tasks, "
            "nodes × GPUs + 2, for one worker per GPU)",
            counts[0],
            gpus,
            layout["nodes"] * gpus + NON_WORKER_RANKS,
        )
    command, _ = pilot_command(
        profile.launcher,
        profile.python or sys.executable,
        str(paths.run_dir),
        counts,
        mpi=profile.mpi,
    )
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if profile.launcher == "srun" and nodelist and not env.get("SLURMD_NODENAME"):
        command = [
            "srun", "--overlap", "--mem=0", "--mpi=none", "--nodes=1", "--ntasks=1",
            f"--nodelist={first_node(nodelist)}", "--kill-on-bad-exit=0", *command,
        ]  # fmt: skip
    request = replace(base.request, command=command, ntasks=ntasks, ntasks_per_node=None)
    config = replace(base.config, workers_expected=workers, gpus_per_worker=1 if gpus else 0)
    return PilotPlan(request, config)


def submit_allocation(
    backend: Backend,
    plan: PilotPlan,
    paths: RunPaths,
    submit: st.SubmitDB,
    number: int,
    *,
    retries: int = 3,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Render, write and submit; transient failures are retried with backoff."""
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
    submit.add_allocation(
        st.AllocationRow(
            native_id,
            number,
            backend.name,
            AllocationState.QUEUED.value,
            None,
            None,
            time.time(),
            None,
            str(path),
            str(plan.request.stdout),
            str(plan.request.stderr),
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
    """Create the run, submit its allocation, and follow it (unless ``detach``)."""
    graph = prepared.graph
    # Before anything is created: the tasks' pool (a missing one, or several, is refused).
    profile = one_pool(graph, profile, prepared.decision.run)
    extra = {"profile": profile.name, "mode": "pilot", "walltime": profile.walltime}
    with RunLife(prepared, options, backend=profile.backend, extra=extra) as life:
        # Fail before anything is created or submitted (the ranks check again on the nodes).
        check_choice(
            profile.transport,
            require_encryption=profile.require_encryption,
            shared_machine=backend.name != "local",
        )
        check_transport(profile.transport, profile.python)
        life.create()
        paths, run_id = life.paths, life.run_id
        if layout is not None:
            plan = plan_in_allocation(profile, paths, run_id, graph.loaded.base_dir, layout)
        else:
            plan = plan_pilot(profile, paths, run_id, graph.loaded.base_dir)
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
        plan.config.write(paths.pilot_config)
        # From here on the driver inside the allocation is the only writer of state.sqlite
        # and of the memo; this side writes what it knows in submit.sqlite.
        life.hand_over()
        with st.SubmitDB(paths.submit_db) as submit:
            try:
                native_id = submit_allocation(
                    backend, plan, paths, submit, 1, retries=profile.submit_retries
                )
            except BaseException as exc:
                submit.declare_over(
                    RunStatus.FAILED, "the allocation was never submitted",
                    error=f"submission failed: {exc}"[:2000],
                )  # fmt: skip
                raise
            submit.set_meta(status=RunStatus.SUBMITTED)
            follow.submitted(native_id, paths)
            if follow.detach:
                return RunSummary(
                    run_id, paths, {RunStatus.SUBMITTED: 1}, elapsed=time.time() - life.started
                )
            poller = (follow.poller_factory or default_poller)(backend, profile)
            with st.StateDB(paths.state_db, readonly=True) as view:
                return _follow(
                    view, submit, paths, run_id, backend, poller, profile, plan, native_id,
                    follow.observer, life.started,
                )  # fmt: skip


def first_node(nodes: str) -> str:
    """The first host of a SLURM hostlist (``n[2-4,7]`` → ``n2``, ``a1,b2`` → ``a1``);
    SLURM runs the batch script on an allocation's first node."""
    prefix, bracket, rest = nodes.strip().partition("[")
    if not bracket:
        return prefix.split(",", 1)[0]
    if "," in prefix:
        return prefix.split(",", 1)[0]
    first = re.split(r"[-,\]]", rest, maxsplit=1)[0]
    return prefix + first


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


#: The old name (jobs mode imports it).


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
) -> RunSummary:
    """Wait for the allocation; continue it after a walltime stop (or a node failure)
    when the profile says so. ``db`` reads the run (the driver writes it); what this side
    learns goes to ``submit``."""
    number = 1
    current = native_id
    last: AllocationStatus | None = None
    ended_at: float | None = None  # when the run was first seen finished
    head: str | None = None  # the allocation's first node: batch script, scheduler, driver
    poller.track([current])
    try:
        while True:
            poller.poll_once()
            status = poller.latest.get(current)
            meta = db.meta()
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
                ended_at = ended_at or time.monotonic()
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
                why = continuation_due(status, drained, profile, number)
                if why is not None:
                    number += 1
                    log.warning(
                        "allocation %s %s; %s; submitting continuation %d",
                        current,
                        why,
                        lost_tasks_note(db),
                        number,
                    )
                    plan = plan_pilot(profile, paths, run_id, Path(plan.config.base_dir), number)
                    current = submit_allocation(
                        backend, plan, paths, submit, number, retries=profile.submit_retries
                    )
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
        backend.cancel([current])
        submit.declare_over(RunStatus.CANCELLED, "run cancelled")
        return summarize(db, paths, run_id, started, cancelled=True)
    return summarize(db, paths, run_id, started)
