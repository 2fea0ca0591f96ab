"""Backend by name: the one place that maps a profile's ``backend:`` to a class."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hpcflow.backends._commands import CommandRunner
from hpcflow.backends.base import Backend
from hpcflow.errors import ProfileError

if TYPE_CHECKING:
    from hpcflow.settings.profile import Profile


def get_backend(
    name: str, runner: CommandRunner | None = None, *, profile: Profile | None = None
) -> Backend:
    """The backend called ``name``, configured from ``profile`` where it has settings
    (``pbs_flavor``); without a profile each backend uses its defaults (PBS Pro)."""
    runner = runner or CommandRunner()
    if name == "allocation":
        from hpcflow.backends.allocation.backend import AllocationBackend

        return AllocationBackend(runner)
    if name == "slurm":
        from hpcflow.backends.slurm.backend import SlurmBackend

        return SlurmBackend(runner)
    if name == "pbs":
        from hpcflow.backends.pbs.backend import PbsBackend

        return PbsBackend(runner, flavor=profile.pbs_flavor if profile is not None else "pro")
    raise ProfileError(
        f"backend {name!r} cannot submit allocations in this version",
        hint="use a slurm or pbs profile, or the local profile",
    )


def allocations_live(backend: str, ids: Sequence[str]) -> list[str]:
    """The allocations among ``ids`` that ``backend``'s batch system says are queued or
    running, in one query (ids it no longer knows have ended): what keeps a workflow's
    lease live after its submitting command ended (:mod:`hpcflow.store.lock`)."""
    states = get_backend(backend).poll(list(ids))
    return [i for i in ids if i in states and not states[i].state.final]
