"""The runs this user started, each read back for a listing (``hpcflow runs``): what it
is now, or why its state cannot be read."""

from __future__ import annotations

from dataclasses import dataclass

from hpcflow.api.locate import RunView, read_run
from hpcflow.errors import RunError
from hpcflow.store.damage import StateDamaged
from hpcflow.store.paths import RunPaths
from hpcflow.store.registry import RegisteredRun, list_runs


@dataclass(frozen=True)
class ListedRun:
    """One run of the listing: as the run index has it, and as its state says now."""

    entry: RegisteredRun
    #: What it is now; None for a damaged run.
    view: RunView | None = None
    #: Why its state file cannot be read (SQLite cannot read it), with what to do.
    damaged: StateDamaged | None = None


def listed_runs(last: int) -> list[ListedRun]:
    """The ``last`` runs of the run index, oldest first (all of them for 0). A run
    whose folder has gone (or cannot be read) is left out; a damaged run is listed, with
    what is wrong, and the others still read."""
    listed = []
    for entry in list_runs()[-last:]:
        try:
            view = read_run(RunPaths(entry.run_dir))
        except StateDamaged as exc:
            listed.append(ListedRun(entry, damaged=exc))
            continue
        except RunError:
            continue
        listed.append(ListedRun(entry, view=view))
    return listed
