"""Which of a profile's pools (allocation shapes) each task definition runs in.

A task names its pool (``resources.pool``, or under ``defaults``), or, when the profile
has pools, runs in the smallest one whose nodes fit it: fewest GPUs, then fewest cores,
then least memory, so CPU work never lands on GPU nodes by chance. A task that names a
pool the profile lacks, or that no pool fits, is refused before anything is created,
with the line of the workflow file that asks. With a profile that has no pools (a laptop,
another site) a named pool is only a warning: the task runs in the profile's one shape.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from hpcflow.dag.graph import TaskGraph
from hpcflow.dag.instances import TaskTemplate
from hpcflow.errors import ProfileError, SpecError, SpecProblem
from hpcflow.settings.profile import Profile
from hpcflow.spec.models import Resources

log = logging.getLogger(__name__)

#: Set in the batch script of a pool's own allocation (a pilot run with several pools):
#: its workers read that pool's configuration and join the head allocation's scheduler.
POOL_VARIABLE = "HPCFLOW_POOL"
#: How much of its pool's resource a worker offers: tasks ask for 1, so the other
#: resources (cpus, GPU) are what limits them.
POOL_CAPACITY = 1_000_000.0


def pool_resource(pool: str) -> str:
    """The Dask resource a pool's workers offer and its tasks ask for."""
    return f"pool-{pool}"


@dataclass(frozen=True)
class PoolShape:
    """What one node of a pool offers (None: the profile does not say, so anything fits)."""

    name: str
    cpus: int | None
    gpus: int
    memory: int | None
    nodes: int
    gpu_kind: str | None = None

    @classmethod
    def of(cls, name: str, profile: Profile) -> PoolShape:
        shaped = profile.for_pool(name)
        return cls(
            name,
            shaped.cpus_per_node,
            shaped.gpus_per_node,
            shaped.memory_per_node,
            shaped.nodes,
            shaped.gpu_kind,
        )

    def misfit(self, res: Resources) -> str | None:
        """Why a task with ``res`` cannot run on this pool's nodes; None when it can."""
        if res.gpus > self.gpus:
            return f"{res.gpus:g} GPUs, its nodes have {self.gpus}"
        if res.gpus and res.gpu_kind is not None and res.gpu_kind != self.gpu_kind:
            return f"{res.gpu_kind} GPUs, its GPUs are {self.gpu_kind or 'of no named kind'}"
        if self.cpus is not None and res.cpus > self.cpus and res.ranks == 1:
            return f"{res.cpus} cores, its nodes have {self.cpus}"
        if self.memory is not None and res.memory is not None and res.memory > self.memory:
            return f"{res.memory} bytes of memory, its nodes have {self.memory}"
        if res.nodes is not None and res.nodes > self.nodes:
            return f"{res.nodes} nodes, it has {self.nodes}"
        return None

    def size(self) -> tuple[int, int, int, int]:
        """The order pools are tried in: fewest GPUs, cores, memory, nodes first."""
        return (self.gpus, self.cpus or 0, self.memory or 0, self.nodes)


def assign_pools(
    graph: TaskGraph, profile: Profile, run: list[bool] | None = None
) -> dict[int, str | None]:
    """The pool of every task definition (by its index) that has instances to run;
    ``None`` for all of them when the profile has no pools.

    Raises
    ------
    SpecError
        A task names a pool the profile does not have, or no pool fits it.
    """
    wanted = _definitions_to_run(graph, run)
    if not profile.pools:
        # A workflow written for a site with pools still runs where there are none.
        for template in wanted.values():
            if template.resources.pool is not None:
                log.warning(
                    "task %r asks for pool %r, but profile %r has no pools: it runs in the "
                    "profile's one allocation shape",
                    template.spec.name, template.resources.pool, profile.name,
                )  # fmt: skip
        return dict.fromkeys(wanted)
    shapes = sorted((PoolShape.of(name, profile) for name in profile.pools), key=lambda s: s.size())
    chosen: dict[int, str | None] = {}
    problems: list[SpecProblem] = []
    for index, template in wanted.items():
        asked = template.resources.pool
        if asked is not None and asked not in profile.pools:
            problems.append(
                _problem(
                    graph,
                    index,
                    f"asks for pool {asked!r}, which profile {profile.name!r} does not have",
                    f"use one of: {', '.join(sorted(profile.pools))}",
                )  # fmt: skip
            )
            continue
        if asked is not None:
            res = template.resources
            kind = next(s.gpu_kind for s in shapes if s.name == asked)
            if res.gpus and res.gpu_kind is not None and res.gpu_kind != kind:
                problems.append(
                    _problem(
                        graph,
                        index,
                        f"needs {res.gpu_kind} GPUs, but pool {asked!r} has "
                        f"{kind or 'GPUs of no named kind'}",
                        "name a pool of that kind, or leave out resources.pool",
                    )  # fmt: skip
                )
                continue
            chosen[index] = asked
            continue
        fits = [shape.name for shape in shapes if shape.misfit(template.resources) is None]
        if fits:
            chosen[index] = fits[0]
            continue
        why = "; ".join(f"{s.name}: {s.misfit(template.resources)}" for s in shapes)
        problems.append(
            _problem(
                graph,
                index,
                f"fits no pool of profile {profile.name!r} (it needs {why})",
                "lower its resources, or add a pool with larger nodes to the profile",
            )  # fmt: skip
        )
    if problems:
        raise SpecError(problems)
    return chosen


def pools_in_use(profile: Profile, chosen: dict[int, str | None]) -> list[str]:
    """The pools that ``chosen`` (from :func:`assign_pools`) uses, in the profile's order."""
    used = set(chosen.values())
    return [name for name in profile.pools if name in used]


def _definitions_to_run(graph: TaskGraph, run: list[bool] | None) -> dict[int, TaskTemplate]:
    """Task definitions with at least one instance to run (all of them without ``run``),
    and those not planned yet (a fan-out): they run once planned."""
    indices = {inst.spec_index for inst in graph.instances if run is None or run[inst.index]}
    indices |= set(graph.waiting)
    return {i: graph.templates[i] for i in sorted(indices)}


def _problem(graph: TaskGraph, index: int, message: str, hint: str) -> SpecProblem:
    """A problem at the ``resources.pool`` that applies (the task's, else the defaults'),
    else at the task's ``resources``, else at the task."""
    spec = graph.templates[index].spec
    defaults = graph.loaded.workflow.defaults.resources
    path: tuple[str | int, ...] = ("tasks", index)
    if spec.resources is not None and "pool" in spec.resources.model_fields_set:
        path = ("tasks", index, "resources", "pool")
    elif "pool" in defaults.model_fields_set:
        path = ("defaults", "resources", "pool")
    elif spec.resources is not None:
        path = ("tasks", index, "resources")
    return graph.loaded.positions.problem(path, f"task {spec.name!r} {message}", hint=hint)


def one_pool(graph: TaskGraph, profile: Profile, run: list[bool] | None = None) -> Profile:
    """The profile shaped by the one pool every task to run needs (a run in one
    allocation has one shape); the profile itself when it has no pools.

    Raises
    ------
    SpecError
        As :func:`assign_pools`.
    ProfileError
        The tasks need more than one pool.
    """
    return profile.for_pool(one_pool_name(graph, profile, run))


def one_pool_name(graph: TaskGraph, profile: Profile, run: list[bool] | None = None) -> str | None:
    """The one pool every task to run needs (None when the profile has no pools); raises
    as :func:`one_pool`."""
    chosen = assign_pools(graph, profile, run)
    names = sorted({name for name in chosen.values() if name is not None})
    if len(names) <= 1:
        return names[0] if names else None
    uses = "; ".join(
        f"{name}: {', '.join(graph.templates[i].spec.name for i, n in chosen.items() if n == name)}"
        for name in names
    )
    raise ProfileError(
        f"the tasks to run need {len(names)} pools of profile {profile.name!r} ({uses}), and "
        "a run in an allocation you already hold runs every task in one allocation shape",
        hint="submit the run instead (pilot mode makes an allocation per pool, elastic mode "
        "worker jobs per pool, jobs mode a batch job per task in its pool), or give the "
        "tasks one pool with resources.pool",
    )
