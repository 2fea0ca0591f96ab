"""The task graph: sweeps expanded into task instances, dependency edges, cycle reports."""

from hpcflow.dag.graph import TaskGraph, build_graph
from hpcflow.dag.instances import TaskInstance

__all__ = ["TaskGraph", "TaskInstance", "build_graph"]
