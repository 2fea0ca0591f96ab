"""What a run would do, as data: the dry run of ``hpcflow run --dry-run``."""

from __future__ import annotations

from dataclasses import dataclass

from hpcflow.api.launch import RunPlan
from hpcflow.engine.cost import PlanCost, plan_cost


@dataclass(frozen=True)
class PlannedTask:
    """One task instance of the plan: whether it would run, and why (or why not)."""

    id: str
    name: str
    runs: bool
    reason: str


@dataclass(frozen=True)
class Plan:
    """Every task instance in the workflow's order, with what a run would do with it,
    and the cost in core-hours and GPU-hours of the tasks that would run."""

    workflow: str
    tasks: list[PlannedTask]
    cost: PlanCost

    @property
    def to_run(self) -> list[str]:
        """The ids of the tasks a run would run."""
        return [task.id for task in self.tasks if task.runs]

    @property
    def up_to_date(self) -> list[str]:
        """The ids of the tasks a run would take from earlier runs."""
        return [task.id for task in self.tasks if not task.runs]


def plan_of(planned: RunPlan) -> Plan:
    """The :class:`Plan` of a run decided by :func:`~hpcflow.api.launch.plan_run`."""
    prepared = planned.prepared
    graph = prepared.graph
    decision = prepared.decision
    tasks = [
        PlannedTask(
            inst.id,
            graph.template(inst).spec.name,
            decision.run[inst.index],
            decision.reasons[inst.index],
        )
        for inst in graph.instances
    ]
    return Plan(graph.loaded.workflow.name, tasks, plan_cost(prepared, planned.profile))
