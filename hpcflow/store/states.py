"""The two vocabularies of a run's state: what a task is in, and what the run is in.

Both are string enums: a member equals, hashes, formats and stores (SQLite, JSON) as its
plain value, so rows read back as text compare equal to the members.
"""

from __future__ import annotations

import enum


class _Vocabulary(str, enum.Enum):
    """A string enum whose members behave as their values everywhere."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    # Enum hashes a member by its name; as a str it must hash as its value, so that a
    # dict keyed by members finds text read back from the database (and vice versa).
    __hash__ = str.__hash__


class TaskState(_Vocabulary):
    """A task's state, in the order a task moves through them (the final ones last).

    ``cached``: up to date from an earlier run; ``skipped``: an upstream task failed.
    """

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    CACHED = "cached"
    #: An attempt's state only: stopped by its checkpoint signal before the walltime
    #: (the task is pending again, for a continuation allocation).
    INTERRUPTED = "interrupted"

    @property
    def final(self) -> bool:
        """Whether a task in this state has ended (in this run)."""
        return self not in (TaskState.PENDING, TaskState.RUNNING)

    @property
    def rank(self) -> int:
        """The state's place in :class:`TaskState`'s order (pending first)."""
        return _TASK_ORDER[self]


_TASK_ORDER = {state: number for number, state in enumerate(TaskState)}


class RunStatus(_Vocabulary):
    """A run's status, as ``state.sqlite``'s meta records it.

    ``submitted``: its allocation is queued (pilot mode's submit side says so);
    ``drained``: it stopped before the walltime with tasks left (a continuation runs them);
    ``interrupted``: the driver was stopped from outside and did not say how it ended.
    """

    CREATED = "created"
    SUBMITTED = "submitted"
    RUNNING = "running"
    DRAINED = "drained"
    INTERRUPTED = "interrupted"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def final(self) -> bool:
        """Whether the run's driver has ended it (succeeded, failed or cancelled)."""
        return self in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)
