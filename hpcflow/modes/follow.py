"""How the submitting side of a batch run follows it, the same for every batch mode."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hpcflow.backends.base import Backend
from hpcflow.backends.poller import Poller
from hpcflow.errors import RunError
from hpcflow.settings.profile import Profile
from hpcflow.store.paths import RunPaths

if TYPE_CHECKING:
    from hpcflow.engine.driver import Observer


@dataclass(frozen=True)
class Follow:
    """What the caller of a batch mode wants to see of the run.

    ``observer`` gets the task counts as they change; ``on_submit`` is told each
    submission (its batch id, or the worker jobs' name, and the run's paths); ``detach``
    returns once the allocation is submitted (pilot mode only: its driver runs inside the
    allocation); ``poller_factory`` makes the batch-system poller (tests pass a quick one).
    """

    observer: Observer | None = None
    detach: bool = False
    on_submit: Callable[[str, RunPaths], None] | None = None
    poller_factory: Callable[[Backend, Profile], Poller] | None = None

    def submitted(self, native_id: str, paths: RunPaths) -> None:
        """Tell ``on_submit`` (if any) about a submission."""
        if self.on_submit is not None:
            self.on_submit(native_id, paths)

    def refuse_detach(self, mode: str, why: str) -> None:
        """A mode whose driver runs in this command cannot ``--detach``: say why."""
        if self.detach:
            raise RunError(
                f"{mode} mode cannot --detach: {why}",
                hint="keep the command running (e.g. in tmux, screen or nohup), or use "
                "--mode pilot, whose driver runs inside the allocation",
            )


#: Follow without a display, a callback or a detach: what a script calling a mode gets.
QUIETLY = Follow()
