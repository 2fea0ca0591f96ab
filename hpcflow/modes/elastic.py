"""Elastic mode: the driver stays on the submit host; Dask workers come and go as batch jobs.

dask-jobqueue (``SLURMCluster``, ``PBSCluster``) runs the Dask scheduler in this process
and submits worker jobs shaped by :func:`hpcflow.modes.elastic_plan.plan_elastic`;
``adapt(min_workers, max_workers)`` queues more while work waits and retires idle ones.
The driver is the same as everywhere (:func:`hpcflow.engine.drive.drive`), sized for the
largest the cluster may grow to. The worker count is sampled into ``RUN_DIR/elastic.jsonl``.
Ctrl-C (or ``hpcflow cancel``) stops the tasks, closes the cluster and cancels its jobs.
The worker jobs are :class:`hpcflow.modes.elastic_workers.ElasticWorkers`, as in the
Snakemake plugin's elastic mode. When the tasks need several of the profile's pools, each
pool has worker jobs of its own shape, scaled on its own tasks' backlog, under the one
scheduler (:mod:`hpcflow.modes.elastic_pools`).

dask-jobqueue runs ``sbatch``/``squeue``/``scancel`` (or ``qsub``/``qdel``) itself: the one
accepted exception to "backends/_commands.py runs every batch command". Whatever it
leaves queued is cancelled through hpcflow's own backend afterwards.
"""

from __future__ import annotations

import _thread
import logging
import time
from typing import TYPE_CHECKING

from hpcflow.backends.base import Backend
from hpcflow.dag.graph import TaskGraph
from hpcflow.engine.capacity import check_capacity
from hpcflow.engine.drive import drive
from hpcflow.engine.driver import PoolPlan
from hpcflow.engine.lifecycle import RunLife, RunSummary
from hpcflow.engine.pools import assign_pools, pools_in_use
from hpcflow.engine.prepare import PreparedRun, RunOptions
from hpcflow.errors import ProfileError, ResourceError
from hpcflow.modes.elastic_cluster import ClusterFactory
from hpcflow.modes.elastic_plan import ElasticPlan
from hpcflow.modes.elastic_workers import ElasticWorkers, cancel_leftovers
from hpcflow.modes.follow import QUIETLY, Follow
from hpcflow.settings.profile import Profile
from hpcflow.store.states import RunStatus
from hpcflow.transport.security import check_choice

if TYPE_CHECKING:
    from hpcflow.modes.elastic_adapt import Backlog

__all__ = ["cancel_leftovers", "check_elastic", "check_memory", "run_elastic"]

log = logging.getLogger(__name__)


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
    follow: Follow = QUIETLY,
    *,
    cluster_factory: ClusterFactory | None = None,
) -> RunSummary:
    """Create the run, start an adaptive jobqueue cluster, and drive the run on it."""
    from hpcflow.modes.elastic_adapt import Backlog  # (it imports distributed)

    graph = prepared.graph
    extra = {
        "profile": profile.name,
        "mode": "elastic",
        "min_workers": profile.min_workers,
        "max_workers": profile.max_workers,
    }
    with RunLife(prepared, options, backend=profile.backend, extra=extra) as life:
        follow.refuse_detach(
            "elastic",
            "its driver runs in this command on the submit host, and the worker jobs stop "
            "when it does",
        )
        run = prepared.decision.run
        chosen = assign_pools(graph, profile, run)
        pools = pools_in_use(profile, chosen)
        if len(pools) <= 1:
            profile = profile.for_pool(pools[0] if pools else None)
        check_elastic(profile)
        prepared = life.create()
        backlog = Backlog()
        workers = ElasticWorkers(
            profile,
            backend,
            life.paths,
            life.run_id,
            graph.loaded.base_dir,
            backlog=backlog,
            on_fatal=_thread.interrupt_main,
            factory=cluster_factory,
            pools=pools,
            pool_backlog=backlog.for_pool,
        )
        pool_plan = None
        if workers.pool_plans:
            of_template = {i: pool for i, pool in chosen.items() if pool is not None}
            for pool, plan in workers.pool_plans.items():
                in_pool = [r and of_template.get(inst.spec_index) == pool
                           for r, inst in zip(run, graph.instances, strict=True)]  # fmt: skip
                _check_fits(graph, in_pool, plan, f"{profile.name!r}, pool {pool}")
            slots = {pool: plan.max_slots for pool, plan in workers.pool_plans.items()}
            pool_plan = PoolPlan(of_template, slots)
        else:
            _check_fits(graph, run, workers.plan, repr(profile.name))
        if life.nothing_to_run:
            return life.all_cached()
        return life.follow(
            lambda: _drive_on_workers(prepared, life, workers, backlog, follow, pool_plan),
            failure="elastic cluster failed",
        )


def _check_fits(graph: TaskGraph, run: list[bool], plan: ElasticPlan, which: str) -> None:
    """Refuse tasks (those ``run`` marks) that one of ``plan``'s workers can never hold."""
    check_capacity(
        graph,
        run,
        plan.threads_per_worker,
        plan.gpus_per_worker,
        where=f"an elastic worker of profile {which}",
    )
    check_memory(graph, run, plan.memory_per_worker, which)


def _drive_on_workers(
    prepared: PreparedRun,
    life: RunLife,
    workers: ElasticWorkers,
    backlog: Backlog,
    follow: Follow,
    pools: PoolPlan | None = None,
) -> RunSummary:
    """Start the worker jobs' cluster and drive the run on it; close it whatever happens."""
    try:
        client = workers.start()
        life.db.set_meta(status=RunStatus.RUNNING, **workers.meta())
        follow.submitted(workers.plan.job_name, life.paths)
        summary = drive(
            prepared,
            life.db,
            life.run_id,
            client,
            workers.max_slots,
            follow.observer,
            on_driver=backlog.attach,
            pools=pools,
        )
        if summary.cancelled and workers.gave_up:  # interrupted: no job could be submitted
            raise workers.submission_error()
        summary.elapsed = time.time() - life.started
        return summary
    except KeyboardInterrupt:
        if workers.gave_up:
            raise workers.submission_error() from None
        raise
    finally:
        workers.close()


def check_memory(
    graph: TaskGraph, run: list[bool], memory_per_worker: int | None, which: str
) -> None:
    """Refuse tasks that need more memory than one elastic worker ever has (``which``:
    the profile, and its pool, as the message names them)."""
    if memory_per_worker is None:
        return
    for inst in graph.instances:
        need = graph.template(inst).resources.memory
        if run[inst.index] and need is not None and need > memory_per_worker:
            raise ResourceError(
                f"task {inst.id!r} asks for {need / 2**30:.3g} GiB of memory but an elastic "
                f"worker of profile {which} has {memory_per_worker / 2**30:.3g} GiB",
                hint="raise memory_per_node (or lower workers_per_node) in the profile",
            )
