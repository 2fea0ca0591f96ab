"""A workflow file's task graph, for the commands that check and show a workflow
without running it (``hpcflow validate``, ``dag``, ``render``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from hpcflow.dag import render
from hpcflow.dag.graph import TaskGraph, build_graph
from hpcflow.spec.loader import load_workflow

#: How :func:`draw_graph` draws: plain text, Mermaid or Graphviz dot.
GraphFormat = Literal["text", "mermaid", "dot"]


def workflow_graph(workflow: Path, check_files: bool = True) -> TaskGraph:
    """The task graph of the workflow file ``workflow``: its syntax, keys, types,
    placeholders, dependencies and cycles checked (and with ``check_files``, that the
    files its tasks read exist). Raises :class:`~hpcflow.errors.SpecError` with
    ``file:line`` for a mistake."""
    return build_graph(load_workflow(workflow), check_files=check_files)


def draw_graph(workflow: Path, fmt: GraphFormat = "text", instances: bool = False) -> str:
    """The dependency graph of the workflow file ``workflow``, drawn in ``fmt``: one node
    per task, or with ``instances`` per task instance."""
    graph = workflow_graph(workflow, check_files=False)
    renderer = {
        "text": render.render_text,
        "mermaid": render.render_mermaid,
        "dot": render.render_dot,
    }[fmt]
    return renderer(graph, instances)
