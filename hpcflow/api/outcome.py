"""How a run ended, as the summary of ``hpcflow run`` tells it: its tasks counted per
name and state, and its failed tasks, read from one commit of its state database."""

from __future__ import annotations

from dataclasses import dataclass

from hpcflow.store.paths import RunPaths
from hpcflow.store.statedb import StateDB, TaskRow
from hpcflow.store.states import TaskState


@dataclass(frozen=True)
class RunOutcome:
    """A run's tasks at its end: how many in each state per task name, and the failed."""

    counts: dict[str, dict[str, int]]
    failed: list[TaskRow]

    @property
    def total(self) -> int:
        """How many task instances the run has."""
        return sum(sum(c.values()) for c in self.counts.values())

    def count(self, state: TaskState) -> int:
        """How many task instances are in ``state``."""
        return sum(c.get(state, 0) for c in self.counts.values())


def read_outcome(paths: RunPaths) -> RunOutcome:
    """The :class:`RunOutcome` of the run at ``paths`` (a reader; never writes)."""
    with StateDB(paths.state_db, readonly=True) as db:
        return RunOutcome(db.counts(), db.tasks(states=(TaskState.FAILED,)))
