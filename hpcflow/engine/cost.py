"""What a plan will cost in core-hours and GPU-hours, before anything runs.

Two views: the work itself (each task's CPUs/GPUs × its declared walltime, where it
declares one), and what the batch system charges (each allocation's cores/GPUs × its
walltime, an upper bound: an allocation is charged until it ends).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hpcflow.engine.pools import assign_pools, one_pool, pools_in_use
from hpcflow.engine.prepare import PreparedRun
from hpcflow.settings.profile import Profile


@dataclass(frozen=True)
class AllocationCost:
    """One allocation the plan asks for."""

    label: str
    nodes: int
    cores: int  # in total
    gpus: int  # in total
    walltime: float | None

    @property
    def core_hours(self) -> float | None:
        return None if self.walltime is None else self.cores * self.walltime / 3600

    @property
    def gpu_hours(self) -> float | None:
        return None if self.walltime is None else self.gpus * self.walltime / 3600


@dataclass(frozen=True)
class PlanCost:
    task_core_hours: float  # of the tasks that declare a walltime
    task_gpu_hours: float
    tasks_without_walltime: int
    allocations: list[AllocationCost]


def plan_cost(prepared: PreparedRun, profile: Profile) -> PlanCost:
    """The cost of running ``prepared`` (only the tasks that would run) with ``profile``
    (in jobs mode each job is labelled with its task's pool, when the profile has pools;
    pilot mode costs an allocation per pool its tasks need, elastic mode a worker job
    per pool)."""
    graph = prepared.graph
    pools = (
        assign_pools(graph, profile, prepared.decision.run) if profile.backend != "local" else {}
    )
    several = pools_in_use(profile, pools)
    shapes = [("pilot allocation", profile)]
    if profile.mode == "pilot" and len(several) > 1:
        shapes = [(f"pilot allocation, pool {name}", profile.for_pool(name)) for name in several]
    elif profile.mode == "elastic" and len(several) > 1:
        shapes = [(f"pool {name}", profile.for_pool(name)) for name in several]
    elif profile.mode != "jobs" and profile.backend != "local":
        profile = one_pool(graph, profile, prepared.decision.run)
        shapes = [("pilot allocation", profile)]
    core_h = gpu_h = 0.0
    unknown = 0
    jobs: list[AllocationCost] = []
    for inst in graph.instances:
        if not prepared.decision.run[inst.index]:
            continue
        res = graph.template(inst).resources
        cores = res.cpus * res.ranks
        if res.walltime is None:
            unknown += 1
        else:
            core_h += cores * res.walltime / 3600
            gpu_h += res.gpus * res.walltime / 3600
        if profile.mode == "jobs":
            # A job of its own holds whole GPUs, even for a task that needs a share of one.
            gpus = math.ceil(res.gpus)
            pool = pools.get(inst.spec_index)
            label = f"job in pool {pool}" if pool else "job"
            jobs.append(AllocationCost(label, res.nodes or 1, cores, gpus, res.walltime))
    allocations: list[AllocationCost] = []
    if profile.backend != "local" and prepared.decision.to_run:
        if profile.mode == "jobs":
            allocations = jobs
        elif profile.mode == "elastic":
            if len(shapes) == 1:
                shapes = [("", profile)]
            allocations = [
                AllocationCost(
                    f"{label} worker job (up to {shaped.max_workers} at once)".lstrip(),
                    1,
                    shaped.cpus_per_node or shaped.workers_on_each_node(),
                    shaped.gpus_per_node,
                    shaped.walltime,
                )
                for label, shaped in shapes
            ]
        else:
            allocations = [
                AllocationCost(
                    label,
                    shaped.nodes,
                    shaped.nodes * (shaped.cpus_per_node or shaped.workers_on_each_node()),
                    shaped.nodes * shaped.gpus_per_node,
                    shaped.walltime,
                )
                for label, shaped in shapes
            ]
    return PlanCost(core_h, gpu_h, unknown, allocations)
