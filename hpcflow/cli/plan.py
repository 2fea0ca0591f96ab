"""The --dry-run plan: tasks per name, order, resources, what will run and why (the data
is :class:`~hpcflow.api.dry_run.DryRun`; this prints it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from hpcflow.api.dry_run import DryRun, PlanRow, dry_run_of
from hpcflow.api.units import format_duration, format_memory

if TYPE_CHECKING:
    from hpcflow.api.launch import RunPlan
    from hpcflow.engine.cost import AllocationCost


def print_plan(console: Console, planned: RunPlan) -> None:
    """Print the dry run of ``planned``: its table, what is not planned yet, the software
    environments, the cost, and how many tasks would run."""
    plan = dry_run_of(planned)
    table = Table(title=f"plan for {plan.workflow}", title_justify="left", box=None)
    for column in (
        "#",
        "task",
        "instances",
        "to run",
        "cpus",
        "memory",
        "gpus",
        "walltime",
        "ranks",
        "after",
        *(["pool"] if plan.pools else []),
    ):
        table.add_column(
            column, justify="right" if column in ("#", "instances", "to run") else "left"
        )
    for n, row in enumerate(plan.rows, start=1):
        table.add_row(str(n), *_cells(row, plan.pools))
    for row in plan.later:
        table.add_row("-", *_cells(row, plan.pools))
    console.print(table)
    if plan.waiting:
        console.print(
            "not planned yet (counts known during the run): "
            + "; ".join(f"{name}: {why}" for name, why in plan.waiting),
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    _print_environments(console, plan)
    print_cost(console, plan)
    again = plan.again
    if again:
        shown = ", ".join(again[:10]) + (f" and {len(again) - 10} more" if len(again) > 10 else "")
        console.print(
            f"{len(again)} up-to-date task(s) run again: a task that runs receives their "
            f"value, which is not kept (persist: false, or its run was deleted): {shown}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    more = " planned so far" if plan.waiting else ""
    console.print(
        f"{plan.to_run} of {plan.total} tasks{more} would run; nothing was run (dry run).",
        highlight=False,
    )


def _cells(row: PlanRow, pools: bool) -> list[str]:
    """A row's cells after its number (``?`` for counts not known yet)."""
    return [
        row.name,
        "?" if row.instances is None else str(row.instances),
        "?" if row.to_run is None else str(row.to_run),
        str(row.cpus),
        format_memory(row.memory) if row.memory else "-",
        str(row.gpus),
        format_duration(row.walltime) if row.walltime else "-",
        str(row.ranks),
        ", ".join(row.after) or "-",
        *([row.pool or "-"] if pools else []),
    ]


def _print_environments(console: Console, plan: DryRun) -> None:
    """Each task's software environment (container, modules, venv), if any has one."""
    if plan.environments:
        console.print("software environments:", highlight=False)
        for name, described in plan.environments:
            console.print(f"  {name}: {described}", highlight=False, markup=False, soft_wrap=True)


def print_cost(console: Console, plan: DryRun) -> None:
    """Core-hours and GPU-hours: of the tasks, and per allocation the profile asks for."""
    cost = plan.cost
    line = (
        f"cost of the tasks: {cost.task_core_hours:.2f} core-hours, "
        f"{cost.task_gpu_hours:.2f} GPU-hours (cpus × ranks × walltime)"
    )
    if cost.tasks_without_walltime:
        line += (
            f"; {cost.tasks_without_walltime} task(s) declare no walltime and are not "
            "counted (set resources.walltime)"
        )
    console.print(line, highlight=False, soft_wrap=True)
    if not cost.allocations:
        return
    if plan.mode == "jobs":
        groups: dict[str, list[AllocationCost]] = {}
        for alloc in cost.allocations:
            groups.setdefault(alloc.label, []).append(alloc)
        for label, allocs in groups.items():
            where = label.removeprefix("job").strip()
            console.print(
                f"{plan.backend} jobs mode{', ' + where if where else ''}: " + _jobs_charge(allocs),
                highlight=False,
                soft_wrap=True,
            )
        return
    for alloc in cost.allocations:
        shape = f"{alloc.nodes} node(s), {alloc.cores} cores, {alloc.gpus} GPUs"
        if alloc.core_hours is None:
            charge = "no walltime set: the site's default limit decides the charge"
        else:
            charge = (
                f"at most {alloc.core_hours:.2f} core-hours and {alloc.gpu_hours:.2f} "
                f"GPU-hours (charged until it ends, up to its walltime "
                f"{format_duration(alloc.walltime or 0)})"
            )
        console.print(f"{alloc.label}: {shape}: {charge}", highlight=False, soft_wrap=True)


def _jobs_charge(allocs: list[AllocationCost]) -> str:
    """How many task jobs, and the most they are charged."""
    known = [a for a in allocs if a.core_hours is not None]
    core = sum(a.core_hours or 0.0 for a in known)
    gpu = sum(a.gpu_hours or 0.0 for a in known)
    unknown = len(allocs) - len(known)
    return (
        f"{len(allocs)} task job(s), at most {core:.2f} core-hours and {gpu:.2f} GPU-hours "
        "charged" + (f" ({unknown} without a walltime)" if unknown else "")
    )
