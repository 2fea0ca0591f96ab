"""Backend by name: the one place that maps a profile's ``backend:`` to a class."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hpcflow.backends._commands import CommandRunner
from hpcflow.backends.base import Backend
from hpcflow.errors import ProfileError

if TYPE_CHECKING:
    from hpcflow.settings.profile import Profile

log = logging.getLogger(__name__)


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


#: Native states of an allocation whose script has ended while the batch system still
#: cleans up its processes (SLURM's COMPLETING, PBS's exiting).
ENDING_STATES = frozenset({"COMPLETING", "CG", "E", "EXITING"})

#: How long :func:`allocations_live` waits for allocations that are only ending.
ENDING_WAIT = 180.0


def allocations_live(
    backend: str, ids: Sequence[str], *, wait_ending: float = ENDING_WAIT
) -> list[str]:
    """The allocations among ``ids`` that ``backend``'s batch system says are queued or
    running, in one query (ids it no longer knows have ended): what keeps a workflow's
    lease live after its submitting command ended (:mod:`hpcflow.store.lock`).

    When every one still listed is only ending (its script is over and the batch system
    is cleaning up its processes, as after a node failure), this waits, up to
    ``wait_ending`` seconds and saying so once, until they are gone: then the answer is
    sure, and no process of theirs can outlive it."""
    deadline = time.monotonic() + wait_ending
    said = False
    while True:
        states = get_backend(backend).poll(list(ids))
        live = [i for i in ids if i in states and not states[i].state.final]
        ending = [i for i in live if states[i].native_state.upper() in ENDING_STATES]
        if not live or len(ending) < len(live) or time.monotonic() >= deadline:
            return live
        if not said:
            log.warning(
                "%s allocation(s) %s are ending (%s): waiting up to %.0f s for the batch "
                "system to finish before deciding whether their run still lives",
                backend, ", ".join(ending), states[ending[0]].native_state, wait_ending,
            )  # fmt: skip
            said = True
        time.sleep(1.0)
