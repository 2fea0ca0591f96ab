"""WHAT to run: the workflow file as typed, validated data. Knows no batch system.

The names below are imported when first used: ``hpcflow.spec.units`` and the other
light modules of the package load without pydantic and the models (a resume with every
task up to date never needs them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcflow._lazy import lazy_names

if TYPE_CHECKING:
    from hpcflow.spec.loader import load_workflow as load_workflow
    from hpcflow.spec.loader import parse_workflow as parse_workflow
    from hpcflow.spec.models import Resources as Resources
    from hpcflow.spec.models import RetryPolicy as RetryPolicy
    from hpcflow.spec.models import TaskSpec as TaskSpec
    from hpcflow.spec.models import Workflow as Workflow

#: The package's names, by the module that defines each.
_NAMES = {
    "load_workflow": "loader",
    "parse_workflow": "loader",
    "Resources": "models",
    "RetryPolicy": "models",
    "TaskSpec": "models",
    "Workflow": "models",
}

__all__ = ["Resources", "RetryPolicy", "TaskSpec", "Workflow", "load_workflow", "parse_workflow"]


__getattr__ = lazy_names(__name__, _NAMES)
