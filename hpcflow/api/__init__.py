"""hpcflow's Python API: build a workflow in code, check it, run it, read its runs.

```python
from hpcflow.api import Workflow

wf = Workflow("demo")
make = wf.task("make", foreach={"i": range(3)}, python=steps.make)
wf.task("total", python=steps.total, from_={"values": make})
run = wf.run()
run.result("total")
```

A workflow built here is the document a ``workflow.yaml`` holds (``Workflow.to_yaml``):
it is checked, planned and run by the same code as ``hpcflow run`` (which is written on
this API), and its errors name the Python lines that made the offending parts.
docs/python-api.md has the examples.

Each name is imported when first used: the commands that only read runs (``hpcflow
status``) do not load the engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers see; at run time __getattr__ imports each name
    from hpcflow.api.cancel import Cancellation as Cancellation
    from hpcflow.api.keys import Checkpoint as Checkpoint
    from hpcflow.api.keys import Container as Container
    from hpcflow.api.keys import Defaults as Defaults
    from hpcflow.api.keys import Modules as Modules
    from hpcflow.api.keys import Resources as Resources
    from hpcflow.api.keys import Retries as Retries
    from hpcflow.api.launch import ProfileOverrides as ProfileOverrides
    from hpcflow.api.launch import RunRequest as RunRequest
    from hpcflow.api.plan import Plan as Plan
    from hpcflow.api.plan import PlannedTask as PlannedTask
    from hpcflow.api.run import Counts as Counts
    from hpcflow.api.run import Run as Run
    from hpcflow.api.run import TaskInfo as TaskInfo
    from hpcflow.api.run import open_run as open_run
    from hpcflow.api.run import runs as runs
    from hpcflow.api.workflow import Include as Include
    from hpcflow.api.workflow import Task as Task
    from hpcflow.api.workflow import Workflow as Workflow
    from hpcflow.api.workflow import load as load
    from hpcflow.errors import HpcflowError as HpcflowError
    from hpcflow.errors import RunError as RunError
    from hpcflow.errors import SpecError as SpecError
    from hpcflow.errors import SpecProblem as SpecProblem
    from hpcflow.store.states import RunStatus as RunStatus
    from hpcflow.store.states import TaskState as TaskState

#: Each public name, and the module it is defined in.
_WHERE = {
    "Cancellation": "hpcflow.api.cancel",
    **dict.fromkeys(
        ("Checkpoint", "Container", "Defaults", "Modules", "Resources", "Retries"),
        "hpcflow.api.keys",
    ),
    **dict.fromkeys(("ProfileOverrides", "RunRequest"), "hpcflow.api.launch"),
    **dict.fromkeys(("Plan", "PlannedTask"), "hpcflow.api.plan"),
    **dict.fromkeys(("Counts", "Run", "TaskInfo", "open_run", "runs"), "hpcflow.api.run"),
    **dict.fromkeys(("Include", "Task", "Workflow", "load"), "hpcflow.api.workflow"),
    **dict.fromkeys(("HpcflowError", "RunError", "SpecError", "SpecProblem"), "hpcflow.errors"),
    **dict.fromkeys(("RunStatus", "TaskState"), "hpcflow.store.states"),
}

__all__ = [
    "Cancellation",
    "Checkpoint",
    "Container",
    "Counts",
    "Defaults",
    "HpcflowError",
    "Include",
    "Modules",
    "Plan",
    "PlannedTask",
    "ProfileOverrides",
    "Resources",
    "Retries",
    "Run",
    "RunError",
    "RunRequest",
    "RunStatus",
    "SpecError",
    "SpecProblem",
    "Task",
    "TaskInfo",
    "TaskState",
    "Workflow",
    "load",
    "open_run",
    "runs",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'hpcflow.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
