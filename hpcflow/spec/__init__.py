"""WHAT to run: the workflow file as typed, validated data. Knows no batch system."""

from hpcflow.spec.loader import load_workflow, parse_workflow
from hpcflow.spec.models import Resources, RetryPolicy, TaskSpec, Workflow

__all__ = ["Resources", "RetryPolicy", "TaskSpec", "Workflow", "load_workflow", "parse_workflow"]
