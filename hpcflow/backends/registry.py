"""Backend by name: the one place that maps a profile's ``backend:`` to a class."""

from __future__ import annotations

from hpcflow.backends._commands import CommandRunner
from hpcflow.backends.base import Backend
from hpcflow.errors import ProfileError


def get_backend(name: str, runner: CommandRunner | None = None) -> Backend:
    runner = runner or CommandRunner()
    if name == "allocation":
        from hpcflow.backends.allocation.backend import AllocationBackend

        return AllocationBackend(runner)
    if name == "slurm":
        from hpcflow.backends.slurm.backend import SlurmBackend

        return SlurmBackend(runner)
    raise ProfileError(
        f"backend {name!r} cannot submit allocations in this version",
        hint="use a slurm profile, or the local profile",
    )
