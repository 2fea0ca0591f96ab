"""What ``hpcflow run --dry-run`` shows, as data: per task definition its instances,
those that would run, its resources, what it comes after and its pool; the tasks not
planned yet, the software environments, the cost, and the up-to-date tasks that run
again (:class:`~hpcflow.api.plan.Plan` is the per-instance view of the same decision)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hpcflow.dag.render import task_edges
from hpcflow.engine.cost import PlanCost, plan_cost
from hpcflow.engine.pools import assign_pools
from hpcflow.engine.resume import VALUE_NOT_KEPT

if TYPE_CHECKING:
    from hpcflow.api.launch import RunPlan
    from hpcflow.engine.prepare import PreparedRun


@dataclass(frozen=True)
class PlanRow:
    """One task definition of the plan (one row of its table)."""

    name: str
    #: Its instances, and how many of them would run; None for a task not planned yet
    #: (its count is known during the run: a fan-out).
    instances: int | None
    to_run: int | None
    cpus: int
    #: Bytes per task (0 or None: not set).
    memory: int | None
    gpus: int | float
    #: Seconds (0 or None: not set).
    walltime: float | None
    ranks: int
    #: The task names it comes after.
    after: list[str]
    #: The pool its tasks run in (None: the profile's own allocation shape).
    pool: str | None = None


@dataclass(frozen=True)
class DryRun:
    """The whole dry run of a workflow with a profile."""

    workflow: str
    #: The planned task definitions, in the workflow's order, then those not planned yet.
    rows: list[PlanRow]
    later: list[PlanRow]
    #: Whether the profile's pools apply (the table has a pool column).
    pools: bool
    #: Per task not planned yet, why (its name, the reason).
    waiting: list[tuple[str, str]]
    #: Per task with a software environment, its name and the environment described.
    environments: list[tuple[str, str]]
    #: Task instances planned so far, and how many of them would run.
    total: int
    to_run: int
    #: Up-to-date tasks that run again: their value, which a task that runs receives,
    #: was not kept.
    again: list[str]
    cost: PlanCost
    #: The profile's backend and mode (the cost's lines name them).
    backend: str
    mode: str


def dry_run_of(planned: RunPlan) -> DryRun:
    """The :class:`DryRun` of a run decided by :func:`~hpcflow.api.launch.plan_run`."""
    prepared, profile = planned.prepared, planned.profile
    graph = prepared.graph
    run = prepared.decision.run
    pools: dict[int, str | None] = {}
    if profile.pools and profile.backend != "local":
        pools = assign_pools(graph, profile, run)
    counts = graph.counts_by_task()
    to_run: dict[str, int] = {}
    for inst in graph.instances:
        if run[inst.index]:
            name = graph.template(inst).spec.name
            to_run[name] = to_run.get(name, 0) + 1
    parents: dict[str, list[str]] = {}
    for a, b in task_edges(graph):
        parents.setdefault(b, []).append(a)
    rows = []
    for template in _in_order(prepared):
        res, name = template.resources, template.spec.name
        rows.append(
            PlanRow(
                name=name,
                instances=counts[name],
                to_run=to_run.get(name, 0),
                cpus=res.cpus,
                memory=res.memory,
                gpus=res.gpus,
                walltime=res.walltime,
                ranks=res.ranks,
                after=parents.get(name, []),
                pool=pools.get(graph.templates.index(template)),
            )
        )
    later = []
    for spec_index, on in sorted(graph.waiting_on.items()):
        template = graph.templates[spec_index]
        res = template.resources
        later.append(
            PlanRow(
                name=template.spec.name,
                instances=None,
                to_run=None,
                cpus=res.cpus,
                memory=res.memory,
                gpus=res.gpus,
                walltime=res.walltime,
                ranks=res.ranks,
                after=list(on),
            )
        )
    decision = prepared.decision
    return DryRun(
        workflow=graph.loaded.workflow.name,
        rows=rows,
        later=later,
        pools=bool(pools),
        waiting=[(graph.templates[i].spec.name, why) for i, why in sorted(graph.waiting.items())],
        environments=_environments(prepared),
        total=len(graph.instances),
        to_run=decision.to_run,
        again=[
            graph.instances[i].id for i, why in enumerate(decision.reasons) if why == VALUE_NOT_KEPT
        ],
        cost=plan_cost(prepared, profile),
        backend=profile.backend,
        mode=profile.mode,
    )


def _environments(prepared: PreparedRun) -> list[tuple[str, str]]:
    """Each task's software environment (container, modules, venv), if any has one."""
    factory = prepared.factory
    found = []
    for key, template in enumerate(factory.graph.templates):
        if template.software is None:
            continue
        env = factory.environments.of(
            key, template.software, template.base_dir, template.resources.gpus > 0
        )
        if env is not None:
            found.append((template.spec.name, env.describe()))
    return found


def _in_order(prepared: PreparedRun) -> list:  # type: ignore[type-arg]
    """The task definitions in the order their first instances run."""
    graph = prepared.graph
    seen: dict[int, None] = {}
    for i in graph.order:
        seen.setdefault(graph.instances[i].spec_index, None)
    return [graph.templates[s] for s in seen]
