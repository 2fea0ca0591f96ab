"""The graph as text, Mermaid or Graphviz dot — per task definition, or per instance."""

from __future__ import annotations

import json

from hpcflow.dag.graph import TaskGraph


def task_edges(graph: TaskGraph) -> list[tuple[str, str]]:
    """Edges between task definitions (an edge if any instance depends on any other)."""
    edges: set[tuple[str, str]] = set()
    for inst in graph.instances:
        name = graph.template(inst).spec.name
        for dep in inst.deps:
            edges.add((graph.template(graph.instances[dep]).spec.name, name))
    return sorted(edges)


def value_labels(graph: TaskGraph, instances: bool) -> dict[tuple[str, str], str]:
    """Edges that carry return values (``from:``): the arguments they fill, by edge."""
    names: dict[tuple[str, str], list[str]] = {}
    for inst in graph.instances:
        consumer = inst.id if instances else graph.template(inst).spec.name
        for argument, arg in inst.values.items():
            for p in arg.producers:
                producer = graph.instances[p]
                edge = (producer.id if instances else graph.template(producer).spec.name, consumer)
                found = names.setdefault(edge, [])
                if argument not in found:
                    found.append(argument)
    return {edge: ", ".join(found) for edge, found in names.items()}


def _nodes(
    graph: TaskGraph, instances: bool
) -> tuple[list[str], list[tuple[str, str]], dict[str, str]]:
    if instances:
        nodes = [graph.instances[i].id for i in graph.order]
        edges = [(graph.instances[d].id, inst.id) for inst in graph.instances for d in inst.deps]
        labels = {n: n for n in nodes}
    else:
        counts = graph.counts_by_task()
        seen: dict[str, None] = {}
        for i in graph.order:
            seen.setdefault(graph.template(graph.instances[i]).spec.name, None)
        labels = {n: (f"{n} ×{counts[n]}" if counts[n] > 1 else n) for n in seen}
        nodes, edges = list(seen), task_edges(graph)
    # Tasks not planned yet (a fan-out over files a task makes): a node each, edges from
    # what they wait for (a task, or every planned instance of it).
    by_name: dict[str, list[str]] = {}
    if instances:
        for inst in graph.instances:
            by_name.setdefault(graph.template(inst).spec.name, []).append(inst.id)
    for i, on in sorted(graph.waiting_on.items()):
        name = graph.templates[i].spec.name
        node = f"{name}[…]" if instances else name
        nodes.append(node)
        labels[node] = f"{name} (not planned yet: {graph.waiting[i]})"
        for upstream in on:
            sources = by_name.get(upstream, [upstream]) if instances else [upstream]
            if instances and upstream not in by_name:
                sources = [f"{upstream}[…]"]
            edges += [(source, node) for source in sources]
    return nodes, edges, labels


def render_text(graph: TaskGraph, instances: bool = False) -> str:
    nodes, edges, labels = _nodes(graph, instances)
    carried = value_labels(graph, instances)
    parents: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in edges:
        parents[b].append(f"{a} ({carried[a, b]})" if (a, b) in carried else a)
    lines = []
    for n in nodes:
        after = f"  ← {', '.join(parents[n])}" if parents[n] else ""
        lines.append(f"{labels[n]}{after}")
    return "\n".join(lines)


def render_mermaid(graph: TaskGraph, instances: bool = False) -> str:
    nodes, edges, labels = _nodes(graph, instances)
    ids = {n: f"n{i}" for i, n in enumerate(nodes)}
    lines = ["flowchart TD"]
    for n in nodes:
        label = labels[n].replace('"', "#quot;")
        lines.append(f'    {ids[n]}["{label}"]')
    carried = value_labels(graph, instances)
    for a, b in edges:
        if (a, b) in carried:
            label = carried[a, b].replace('"', "#quot;")
            lines.append(f'    {ids[a]} -->|"{label}"| {ids[b]}')
        else:
            lines.append(f"    {ids[a]} --> {ids[b]}")
    return "\n".join(lines)


def render_dot(graph: TaskGraph, instances: bool = False) -> str:
    nodes, edges, labels = _nodes(graph, instances)
    ids = {n: f"n{i}" for i, n in enumerate(nodes)}
    lines = ["digraph workflow {", "    rankdir=TB;", "    node [shape=box];"]
    for n in nodes:
        lines.append(f"    {ids[n]} [label={json.dumps(labels[n], ensure_ascii=False)}];")
    carried = value_labels(graph, instances)
    for a, b in edges:
        if (a, b) in carried:
            label = json.dumps(carried[a, b], ensure_ascii=False)
            lines.append(f"    {ids[a]} -> {ids[b]} [label={label}];")
        else:
            lines.append(f"    {ids[a]} -> {ids[b]};")
    lines.append("}")
    return "\n".join(lines)
