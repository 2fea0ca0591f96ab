"""Modes by name: the one place that maps a profile to the mode that runs it, and to the
batch scripts that mode would submit (so `hpcflow render` shows what `hpcflow run` does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from hpcflow.backends.base import Backend
from hpcflow.dag.graph import TaskGraph
from hpcflow.engine.lifecycle import RunSummary
from hpcflow.settings.profile import Profile
from hpcflow.store.paths import RunPaths

#: What runs a mode: ``(prepared, options, profile, backend, **how) -> RunSummary``.
ModeRunner = Callable[..., RunSummary]


def mode_of(profile: Profile) -> str:
    """The mode a run with ``profile`` takes: ``local`` for the local backend, else the
    profile's ``mode`` (pilot, jobs or elastic)."""
    return "local" if profile.backend == "local" else profile.mode


def runner_for(mode: str) -> ModeRunner:
    """The function that runs a workflow in ``mode`` (a batch mode; local runs take
    :func:`hpcflow.modes.local.run_local`)."""
    if mode == "jobs":
        from hpcflow.modes.jobs import run_jobs

        return run_jobs
    if mode == "elastic":
        from hpcflow.modes.elastic import run_elastic

        return run_elastic
    from hpcflow.modes.pilot import run_pilot

    return run_pilot


def render_scripts(
    graph: TaskGraph, profile: Profile, backend: Backend, paths: RunPaths, run_id: str
) -> Iterator[tuple[str | None, str]]:
    """The batch scripts a fresh run of ``graph`` with ``profile`` submits, each with a
    heading (None for a single script): the pilot allocation's, every job of jobs mode,
    or elastic mode's worker job (the scheduler's address is known only at run time)."""
    mode = mode_of(profile)
    if mode == "pilot":
        from hpcflow.modes.pilot_pools import plan_pools, pools_needed

        several = pools_needed(graph, profile, [True] * len(graph.instances))
        if several is not None:
            pools = plan_pools(profile, paths, run_id, graph.loaded.base_dir, *several)
            for pool, pool_plan in pools.plans.items():
                role = "scheduler, driver and workers" if pool == pools.head else "workers"
                yield f"pool {pool} ({role})", backend.render(pool_plan.request)
            return
    if mode == "elastic":
        yield from _elastic_scripts(graph, profile, paths, run_id)
        return
    if mode != "jobs":
        from hpcflow.engine.pools import one_pool

        profile = one_pool(graph, profile)
    if mode == "jobs":
        from hpcflow.modes.jobs import render_all

        for unit, script in render_all(graph, profile, backend, paths, run_id):
            noun = "instance" if unit.size == 1 else "instances"
            yield f"job {unit.number} ({unit.size} {noun})", script
        return
    from hpcflow.modes.pilot_plan import plan_pilot

    yield None, backend.render(plan_pilot(profile, paths, run_id, graph.loaded.base_dir).request)


def _elastic_scripts(
    graph: TaskGraph, profile: Profile, paths: RunPaths, run_id: str
) -> Iterator[tuple[str | None, str]]:
    """Elastic mode's worker job: one per pool when the tasks need several."""
    from hpcflow.engine.pools import assign_pools, pools_in_use
    from hpcflow.modes.elastic_plan import plan_elastic

    chosen = assign_pools(graph, profile)
    pools = pools_in_use(profile, chosen)
    if len(pools) <= 1:
        shaped = profile.for_pool(pools[0] if pools else None)
        plan = plan_elastic(
            shaped, paths.run_dir, run_id, graph.loaded.base_dir, log_directory=paths.workers_dir
        )
        yield "elastic worker job (up to max_workers of them)", _worker_job_script(plan)
        return
    for pool in pools:
        shaped = profile.for_pool(pool)
        plan = plan_elastic(
            shaped,
            paths.run_dir,
            run_id,
            graph.loaded.base_dir,
            log_directory=paths.workers_dir,
            pool=pool,
        )
        heading = f"pool {pool}: elastic worker job (up to {shaped.max_workers} of them)"
        yield heading, _worker_job_script(plan)


def _worker_job_script(plan: Any) -> str:
    """dask-jobqueue's script for one worker job of ``plan``, as the cluster would write it
    (the scheduler address is a placeholder)."""
    from hpcflow.modes.elastic_cluster import import_jobqueue

    cls = getattr(import_jobqueue(), plan.cluster_class)
    kwargs = {key: value for key, value in plan.kwargs.items() if key != "scheduler_options"}
    scheme = str(kwargs.get("protocol") or "tcp://")
    job = cls.job_cls(scheduler=f"{scheme}SCHEDULER:PORT", name="worker", **kwargs)
    return str(job.job_script())
