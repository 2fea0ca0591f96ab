"""hpcflow: one workflow.yaml, run on a laptop's Dask cluster or inside HPC allocations.

The package's own namespace is its public Python API (it sits above every layer of
docs/architecture.md); the version is in :mod:`hpcflow._version`.
"""

from __future__ import annotations

from typing import Any

from hpcflow._version import __version__

__all__ = ["__version__", "load_result"]


def load_result(run_dir: Any, task_id: str) -> Any:
    """The return value of python task ``task_id`` (an id such as ``make[i=3]``) in the run
    whose directory is ``run_dir`` (``hpcflow status`` prints it)."""
    from hpcflow.store.results import load_result as load

    return load(run_dir, task_id)
