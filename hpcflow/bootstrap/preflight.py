"""Checks that fail fast, before any Dask process starts, with the fix in the message."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from hpcflow.bootstrap.roles import NON_WORKER_RANKS
from hpcflow.errors import HpcflowError
from hpcflow.store.paths import RunPaths


class PreflightError(HpcflowError):
    """The allocation cannot host a run as it is; the message says what to change."""


def check_world(size: int, launcher_hint: str = "") -> None:
    if size < NON_WORKER_RANKS + 1:
        raise PreflightError(
            f"the allocation has {size} rank(s); hpcflow needs at least {NON_WORKER_RANKS + 1} "
            "(rank 0 scheduler, rank 1 driver, ranks 2.. workers)",
            hint="ask for more tasks (e.g. sbatch --ntasks=3 --overcommit), or check that the "
            "launcher starts every rank" + (f" ({launcher_hint})" if launcher_hint else ""),
        )


def check_run_dir(run_dir: Path) -> None:
    run_info = RunPaths(run_dir).run_info
    if not run_info.is_file():
        raise PreflightError(
            f"{run_dir} is not an hpcflow run directory (no {run_info.name})",
            hint="the run directory must be on a file system shared by the submit host and "
            "the compute nodes",
        )
    try:
        fd, name = tempfile.mkstemp(dir=run_dir, prefix=".write-test-")
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        raise PreflightError(
            f"run directory {run_dir} is not writable from {os.uname().nodename}: {exc}",
            hint="put the workflow (and so .hpcflow/runs) on a shared, writable file system",
        ) from None


def check_transport(transport: str, python: str | None = None) -> None:
    """The chosen Dask transport can be used (UCX needs an optional package).

    ``python`` is the interpreter the ranks will run, when it is not this one (UCX
    usually lives in its own environment); it is asked to import the package, if it
    exists on this host (otherwise the ranks check for themselves).
    """
    if transport != "ucx":
        return
    if python and os.path.abspath(python) != os.path.abspath(sys.executable):
        if not os.path.exists(python):
            return
        from hpcflow.backends._commands import CommandRunner

        result = CommandRunner().run([python, "-c", "import distributed_ucxx"], timeout=120)
        if result.returncode == 0:
            return
        where = f"the ranks' Python ({python})"
    else:
        try:
            import distributed_ucxx  # noqa: F401

            return
        except ImportError:
            where = "this environment"
    raise PreflightError(
        f"transport 'ucx' needs the distributed-ucxx package, which is not installed in {where}",
        hint="pip install 'hpcflow[ucx]' (distributed-ucxx-cu12; it pins its own "
        "dask/distributed versions, so use a separate environment and name its "
        "interpreter as `python:` in the profile), or choose transport: tls",
    )
