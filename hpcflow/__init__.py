"""hpcflow: one workflow.yaml, run on a laptop's Dask cluster or inside HPC allocations.

The package's own namespace is its public Python API (it sits above every layer of
docs/architecture.md): :mod:`hpcflow.api`'s workflows and runs (``hpcflow.Workflow``,
``hpcflow.open_run``...), each imported when first used, so that ``import hpcflow``
(and the command line's start) stays cheap; the version is in :mod:`hpcflow._version`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hpcflow._version import __version__

if TYPE_CHECKING:  # what type checkers see; at run time __getattr__ imports each name
    from hpcflow.api import Run as Run
    from hpcflow.api import Task as Task
    from hpcflow.api import Workflow as Workflow
    from hpcflow.api import open_run as open_run
    from hpcflow.api import runs as runs

#: The API's names the package re-exports.
_API = ("Run", "Task", "Workflow", "open_run", "runs")

__all__ = ["Run", "Task", "Workflow", "__version__", "load_result", "open_run", "runs"]


def load_result(run_dir: Any, task_id: str) -> Any:
    """The return value of python task ``task_id`` (an id such as ``make[i=3]``) in the run
    whose directory is ``run_dir`` (``hpcflow status`` prints it)."""
    from hpcflow.store.results import load_result as load

    return load(run_dir, task_id)


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'hpcflow' has no attribute {name!r}")
    import hpcflow.api

    value = getattr(hpcflow.api, name)
    globals()[name] = value
    return value
