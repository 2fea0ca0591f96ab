"""Elastic mode: the driver stays on the submit host; Dask workers come and go as batch jobs.

dask-jobqueue (``SLURMCluster``, ``PBSCluster``) runs the Dask scheduler in this process
and submits worker jobs shaped by :func:`hpcflow.modes.elastic_plan.plan_elastic`;
``adapt(min_workers, max_workers)`` queues more while work waits and retires idle ones.
The driver is the same as everywhere (:func:`hpcflow.engine.drive.drive`), sized for the
largest the cluster may grow to. The worker count is sampled into ``RUN_DIR/elastic.jsonl``.
Ctrl-C (or ``hpcflow cancel``) stops the tasks, closes the cluster and cancels its jobs.

dask-jobqueue runs ``sbatch``/``squeue``/``scancel`` (or ``qsub``/``qdel``) itself: the one
accepted exception to "backends/_commands.py runs every batch command". Whatever it
leaves queued is cancelled through hpcflow's own backend afterwards.
"""

from __future__ import annotations

import _thread
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from hpcflow.backends.base import Backend
from hpcflow.dag.graph import TaskGraph
from hpcflow.engine.capacity import check_capacity
from hpcflow.engine.drive import drive
from hpcflow.engine.driver import Observer
from hpcflow.engine.lifecycle import RunLife, RunSummary
from hpcflow.engine.prepare import PreparedRun, RunOptions
from hpcflow.errors import HpcflowError, ProfileError, ResourceError, SubmitError
from hpcflow.modes.elastic_cluster import (
    ClusterFactory,
    close_cluster,
    cluster_job_ids,
    counted_failures_quiet,
    start_cluster,
)
from hpcflow.modes.elastic_plan import ElasticPlan, plan_elastic
from hpcflow.modes.elastic_watch import SubmitFailures, WorkerWatch
from hpcflow.settings.profile import Profile
from hpcflow.store import statedb as st
from hpcflow.store.paths import RunPaths
from hpcflow.transport.certificates import create_credentials
from hpcflow.transport.security import check_choice, security_for

if TYPE_CHECKING:
    from distributed import Security

log = logging.getLogger(__name__)


def refuse_detach() -> None:
    """``--detach`` needs a driver that outlives the command; elastic mode has none."""
    raise ProfileError(
        "--detach cannot be used in elastic mode: its driver runs in this command on the "
        "submit host, and the worker jobs stop when it does",
        hint="keep the command running (e.g. in tmux, screen or nohup), or use "
        "--mode pilot, whose driver runs inside the allocation",
    )


def check_elastic(profile: Profile) -> None:
    """Refuse, before anything is created, what elastic mode cannot do."""
    if profile.transport == "ucx":
        raise ProfileError(
            "elastic mode supports transport tls or tcp, not ucx",
            hint="use --transport tls (or --mode pilot for UCX inside one allocation)",
        )
    check_choice(
        profile.transport,
        require_encryption=profile.require_encryption,
        shared_machine=True,
    )


def run_elastic(
    prepared: PreparedRun,
    options: RunOptions,
    profile: Profile,
    backend: Backend,
    *,
    observer: Observer | None = None,
    detach: bool = False,
    on_submit: Callable[[str, RunPaths], None] | None = None,
    cluster_factory: ClusterFactory | None = None,
) -> RunSummary:
    """Create the run, start an adaptive jobqueue cluster, and drive the run on it."""
    graph = prepared.graph
    extra = {
        "profile": profile.name,
        "mode": "elastic",
        "min_workers": profile.min_workers,
        "max_workers": profile.max_workers,
    }
    with RunLife(prepared, options, backend=profile.backend, extra=extra) as life:
        if detach:
            refuse_detach()
        check_elastic(profile)
        life.create()
        plan = plan_elastic(
            profile,
            life.paths.run_dir,
            life.run_id,
            graph.loaded.base_dir,
            log_directory=life.paths.workers_dir,
        )
        check_capacity(
            graph,
            prepared.decision.run,
            plan.threads_per_worker,
            plan.gpus_per_worker,
            where=f"an elastic worker of profile {profile.name!r}",
        )
        check_memory(graph, prepared.decision.run, plan.memory_per_worker, profile.name)
        if life.nothing_to_run:
            return life.all_cached()
        return life.follow(
            lambda: _run_on_cluster(
                prepared,
                life,
                plan,
                profile,
                backend,
                observer,
                on_submit,
                cluster_factory or start_cluster,
            ),  # fmt: skip
            failure="elastic cluster failed",
        )


def _run_on_cluster(
    prepared: PreparedRun,
    life: RunLife,
    plan: ElasticPlan,
    profile: Profile,
    backend: Backend,
    observer: Observer | None,
    on_submit: Callable[[str, RunPaths], None] | None,
    factory: ClusterFactory,
) -> RunSummary:
    paths, run_id = life.paths, life.run_id
    if profile.transport == "tls":
        create_credentials(paths.run_dir, run_id)
    security = security_for(paths.run_dir, profile.transport)
    paths.workers_dir.mkdir(mode=0o700, exist_ok=True)
    failures = SubmitFailures(profile.submit_retries + 1)
    with counted_failures_quiet():
        return _drive_on_cluster(
            prepared, life.db, run_id, paths, plan, backend, observer, on_submit,
            factory, life.started, security, failures,
        )  # fmt: skip


def _drive_on_cluster(
    prepared: PreparedRun,
    db: st.StateDB,
    run_id: str,
    paths: RunPaths,
    plan: ElasticPlan,
    backend: Backend,
    observer: Observer | None,
    on_submit: Callable[[str, RunPaths], None] | None,
    factory: ClusterFactory,
    started: float,
    security: Security | None,
    failures: SubmitFailures,
) -> RunSummary:
    from distributed import Client

    from hpcflow.modes.elastic_adapt import Backlog, BacklogAdaptive

    cluster = factory(plan, security, failures)
    watch: WorkerWatch | None = None
    client = None
    try:
        # What every worker job runs, for `cat` when a worker misbehaves.
        (paths.workers_dir / "job.sh").write_text(cluster.job_script(), encoding="utf-8")
        db.set_meta(
            status="running",
            scheduler_address=cluster.scheduler_address,
            dashboard=cluster.dashboard_link if plan.dashboard else None,
            worker_job_name=plan.job_name,
        )
        log.info(
            "run %s: elastic cluster at %s (dashboard %s); %d to %d worker jobs of %d "
            "worker(s) x %d thread(s)",
            run_id,
            cluster.scheduler_address,
            cluster.dashboard_link if plan.dashboard else "off",
            plan.minimum,
            plan.maximum,
            plan.workers_per_job,
            plan.threads_per_worker,
        )
        watch = WorkerWatch(
            cluster,
            paths.elastic_log,
            interval=min(1.0, plan.interval),
            failures=failures,
            on_fatal=_thread.interrupt_main,
        )
        watch.start()
        backlog = Backlog()
        cluster.adapt(
            Adaptive=BacklogAdaptive,
            backlog=backlog,
            slots_per_worker=plan.threads_per_worker,
            minimum_jobs=plan.minimum,
            maximum_jobs=plan.maximum,
            interval=f"{plan.interval:g}s",
            wait_count=plan.wait_count,
        )
        if on_submit:
            on_submit(plan.job_name, paths)
        client = Client(cluster, security=security, set_as_default=False)
        # No worker may exist yet: tasks wait in the scheduler until jobs start.
        summary = drive(
            prepared, db, run_id, client, plan.max_slots, observer, on_driver=backlog.attach
        )
        if summary.cancelled and watch.gave_up:  # interrupted: no job could be submitted
            raise _submission_error(failures, paths)
        summary.elapsed = time.time() - started
        return summary
    except KeyboardInterrupt:
        if watch is not None and watch.gave_up:
            raise _submission_error(failures, paths) from None
        raise
    finally:
        job_ids = set()
        if watch is not None:
            watch.disarm()  # no interrupt while the cluster closes
            job_ids = watch.job_ids()
        close_cluster(cluster, client)
        if watch is not None:
            watch.stop()
        cancel_leftovers(backend, job_ids | cluster_job_ids(cluster))


def _submission_error(failures: SubmitFailures, paths: RunPaths) -> SubmitError:
    """Why no worker job could be submitted: the batch system's own words."""
    return SubmitError(
        f"elastic worker jobs could not be submitted ({failures.in_a_row} tries): "
        f"{failures.last or 'unknown error'}",
        transient=False,
        hint=f"check the profile's partition, account and sizes; the job script is "
        f"{paths.workers_dir / 'job.sh'}",
    )


def cancel_leftovers(
    backend: Backend,
    job_ids: set[str],
    *,
    grace: float = 10.0,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Cancel worker jobs still queued or running ``grace`` seconds after the cluster closed.

    dask-jobqueue has already sent ``scancel``/``qdel``; the batch system takes a moment
    (COMPLETING) to finish them, so wait for that before cancelling again.
    """
    if not job_ids:
        return
    deadline = time.monotonic() + grace
    delay = 0.25
    try:
        while True:
            statuses = backend.poll(sorted(job_ids))
            alive = sorted(i for i, s in statuses.items() if not s.state.final)
            if not alive:
                return
            if time.monotonic() >= deadline:
                break
            sleep(delay)
            delay = min(2 * delay, 2.0)
        log.warning("cancelling worker jobs left behind: %s", ", ".join(alive))
        backend.cancel(alive)
    except HpcflowError as exc:
        log.warning("could not check for leftover worker jobs %s: %s", sorted(job_ids), exc)


def check_memory(
    graph: TaskGraph, run: list[bool], memory_per_worker: int | None, profile_name: str
) -> None:
    """Refuse tasks that need more memory than one elastic worker ever has."""
    if memory_per_worker is None:
        return
    for inst in graph.instances:
        need = graph.template(inst).resources.memory
        if run[inst.index] and need is not None and need > memory_per_worker:
            raise ResourceError(
                f"task {inst.id!r} asks for {need / 2**30:.3g} GiB of memory but an elastic "
                f"worker of profile {profile_name!r} has {memory_per_worker / 2**30:.3g} GiB",
                hint="raise memory_per_node (or lower workers_per_node) in the profile",
            )
