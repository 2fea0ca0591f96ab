"""A pytest plugin for Snakemake's own test suite: runs its tests with ``--executor hpcflow``.

Loaded by :mod:`tests.snakemake.conformance` (``pytest -p conformance_swap``, this folder on
``PYTHONPATH``, in the root of Snakemake's unpacked sdist). With
``HPCFLOW_CONFORMANCE_EXECUTOR=hpcflow`` it replaces the suite's ``run()`` helper
(``tests/common.py``) before ``tests/tests.py`` imports it: a call through Snakemake's API
gets ``executor="hpcflow"`` (default settings: local mode) and ``nodes`` (Snakemake's
``--jobs``) equal to its ``cores``; a ``shellcmd`` gets ``--executor hpcflow --jobs N``
after ``snakemake``, N its ``--cores``. So hpcflow runs as many jobs at once as the local
executor would (``test_priority`` with ``cores=1``: one at a time).
With ``local`` it changes nothing, so both sides run the same way.

``HPCFLOW_CONFORMANCE_MODE=pilot`` (and ``HPCFLOW_CONFORMANCE_PROFILE``, a batch profile)
sends each swapped run to one pilot allocation of that profile instead of the local
cluster: ``--hpcflow-mode pilot --hpcflow-profile P`` on a ``shellcmd``, the same
settings through the API.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from typing import Any

SWAPPED = "--executor hpcflow"


def mode_args() -> tuple[str, str]:
    """The plugin's mode and profile for the swapped runs (``local`` and "" by default)."""
    mode = os.environ.get("HPCFLOW_CONFORMANCE_MODE", "local")
    return mode, os.environ.get("HPCFLOW_CONFORMANCE_PROFILE", "") if mode != "local" else ""


def swap_shellcmd(shellcmd: str, jobs: int) -> str:
    """``snakemake ARGS`` → ``snakemake --executor hpcflow ARGS`` in local mode (a local
    executor to Snakemake: the test's ``--cores`` hold as they are); in a batch mode
    ``snakemake --executor hpcflow --hpcflow-mode M --hpcflow-profile P --jobs N ARGS``: N
    is the test's ``--cores``/``-c`` (as many jobs at once as the local executor runs),
    else ``jobs``; the test's own ``-j``/``--jobs``, later on the line, wins."""
    head, _, rest = shellcmd.partition(" ")
    if head != "snakemake" or "--executor" in rest:
        return shellcmd
    mode, profile = mode_args()
    if not profile:
        return f"snakemake {SWAPPED} {rest}".rstrip()
    found = re.search(r"(?:--cores[ =]|-c ?)(\d+)\b", rest)
    if found:
        jobs = int(found.group(1))
    flags = f" --hpcflow-mode {mode} --hpcflow-profile {profile}"
    return f"snakemake {SWAPPED}{flags} --jobs {jobs} {rest}".rstrip()


def swapped(run: Any, jobs: int) -> Any:
    """``run`` with its executor swapped to hpcflow."""

    @functools.wraps(run)
    def run_with_hpcflow(path: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("shellcmd"):
            kwargs["shellcmd"] = swap_shellcmd(kwargs["shellcmd"], jobs)
        elif kwargs.get("executor", "local") == "local" and kwargs.get("cluster") is None:
            from snakemake_executor_plugin_hpcflow import ExecutorSettings

            kwargs["executor"] = "hpcflow"
            mode, profile = mode_args()
            kwargs["executor_settings"] = (
                ExecutorSettings(mode=mode, profile=profile) if profile else ExecutorSettings()
            )
            if profile and kwargs.get("nodes") is None:  # a batch mode: Snakemake's --jobs
                cores = kwargs.get("cores", 3)  # run()'s default
                kwargs["nodes"] = cores if isinstance(cores, int) and cores > 0 else jobs
        return run(path, *args, **kwargs)

    return run_with_hpcflow


def pytest_configure(config: Any) -> None:
    if os.environ.get("HPCFLOW_CONFORMANCE_EXECUTOR", "local") != "hpcflow":
        return
    jobs = int(os.environ.get("HPCFLOW_CONFORMANCE_JOBS", "3"))
    root = str(config.rootpath)
    if root not in sys.path:
        sys.path.insert(0, root)
    import tests.common as common  # Snakemake's, from the sdist's root

    if not getattr(common.run, "__wrapped__", None):
        common.run = swapped(common.run, jobs)
