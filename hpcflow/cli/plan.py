"""The --dry-run plan: tasks per name, order, resources, what will run and why."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from hpcflow.engine.cost import AllocationCost, PlanCost, plan_cost
from hpcflow.engine.pools import assign_pools
from hpcflow.engine.prepare import PreparedRun
from hpcflow.engine.resume import VALUE_NOT_KEPT
from hpcflow.settings.profile import Profile
from hpcflow.spec.units import format_duration, format_memory


def print_plan(console: Console, prepared: PreparedRun, profile: Profile | None = None) -> None:
    graph = prepared.graph
    run = prepared.decision.run
    pools: dict[int, str | None] = {}
    if profile is not None and profile.pools and profile.backend != "local":
        pools = assign_pools(graph, profile, run)
    table = Table(title=f"plan for {graph.loaded.workflow.name}", title_justify="left", box=None)
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
        *(["pool"] if pools else []),
    ):
        table.add_column(
            column, justify="right" if column in ("#", "instances", "to run") else "left"
        )
    counts = graph.counts_by_task()
    to_run: dict[str, int] = {}
    for inst in graph.instances:
        if run[inst.index]:
            name = graph.template(inst).spec.name
            to_run[name] = to_run.get(name, 0) + 1
    from hpcflow.dag.render import task_edges

    parents: dict[str, list[str]] = {}
    for a, b in task_edges(graph):
        parents.setdefault(b, []).append(a)
    for n, template in enumerate(_in_order(prepared), start=1):
        res = template.resources
        name = template.spec.name
        table.add_row(
            str(n),
            name,
            str(counts[name]),
            str(to_run.get(name, 0)),
            str(res.cpus),
            format_memory(res.memory) if res.memory else "-",
            str(res.gpus),
            format_duration(res.walltime) if res.walltime else "-",
            str(res.ranks),
            ", ".join(parents.get(name, [])) or "-",
            *([pools.get(graph.templates.index(template)) or "-"] if pools else []),
        )
    for spec_index, on in sorted(graph.waiting_on.items()):
        template = graph.templates[spec_index]
        res = template.resources
        table.add_row(
            "-", template.spec.name, "?", "?", str(res.cpus),
            format_memory(res.memory) if res.memory else "-", str(res.gpus),
            format_duration(res.walltime) if res.walltime else "-", str(res.ranks),
            ", ".join(on), *(["-"] if pools else []),
        )  # fmt: skip
    console.print(table)
    if graph.waiting:
        console.print(
            "not planned yet (counts known during the run): "
            + "; ".join(
                f"{graph.templates[i].spec.name}: {why}" for i, why in sorted(graph.waiting.items())
            ),
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    _print_environments(console, prepared)
    total = len(graph.instances)
    if profile is not None:
        print_cost(console, plan_cost(prepared, profile), profile)
    decision = prepared.decision
    again = [
        graph.instances[i].id for i, why in enumerate(decision.reasons) if why == VALUE_NOT_KEPT
    ]
    if again:
        shown = ", ".join(again[:10]) + (f" and {len(again) - 10} more" if len(again) > 10 else "")
        console.print(
            f"{len(again)} up-to-date task(s) run again: a task that runs receives their "
            f"value, which is not kept (persist: false, or its run was deleted): {shown}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    more = " planned so far" if graph.waiting else ""
    console.print(
        f"{decision.to_run} of {total} tasks{more} would run; nothing was run (dry run).",
        highlight=False,
    )


def _print_environments(console: Console, prepared: PreparedRun) -> None:
    """Each task's software environment (container, modules, venv), if any has one."""
    factory = prepared.factory
    lines = []
    for key, template in enumerate(factory.graph.templates):
        if template.software is None:
            continue
        env = factory.environments.of(
            key, template.software, template.base_dir, template.resources.gpus > 0
        )
        if env is not None:
            lines.append(f"  {template.spec.name}: {env.describe()}")
    if lines:
        console.print("software environments:", highlight=False)
        for line in lines:
            console.print(line, highlight=False, markup=False, soft_wrap=True)


def print_cost(console: Console, cost: PlanCost, profile: Profile) -> None:
    """Core-hours and GPU-hours: of the tasks, and per allocation the profile asks for."""
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
    if profile.mode == "jobs":
        groups: dict[str, list[AllocationCost]] = {}
        for alloc in cost.allocations:
            groups.setdefault(alloc.label, []).append(alloc)
        for label, allocs in groups.items():
            where = label.removeprefix("job").strip()
            console.print(
                f"{profile.backend} jobs mode{', ' + where if where else ''}: "
                + _jobs_charge(allocs),
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


def _in_order(prepared: PreparedRun) -> list:  # type: ignore[type-arg]
    graph = prepared.graph
    seen: dict[int, None] = {}
    for i in graph.order:
        seen.setdefault(graph.instances[i].spec_index, None)
    return [graph.templates[s] for s in seen]
