"""The --dry-run plan: tasks per name, order, resources, what will run and why."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from hpcflow.runtime.run import PreparedRun
from hpcflow.spec.units import format_duration, format_memory


def print_plan(console: Console, prepared: PreparedRun) -> None:
    graph = prepared.graph
    run = prepared.decision.run
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
        )
    console.print(table)
    total = len(graph.instances)
    console.print(
        f"{prepared.decision.to_run} of {total} tasks would run; nothing was run (dry run)."
    )


def _in_order(prepared: PreparedRun) -> list:  # type: ignore[type-arg]
    graph = prepared.graph
    seen: dict[int, None] = {}
    for i in graph.order:
        seen.setdefault(graph.instances[i].spec_index, None)
    return [graph.templates[s] for s in seen]
