"""Jobs mode, the pure part: which task instances share a batch job (array), when a job
may be submitted, what a failure skips, and how fast submissions go.

Nothing here talks to a batch system or a file; :mod:`hpcflow.modes.jobs` does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from hpcflow.dag.graph import TaskGraph
from hpcflow.store import statedb as st

#: Task states after which a dependent may start.
DONE_OK = frozenset({st.SUCCEEDED, st.CACHED})


@dataclass
class JobUnit:
    """One batch job of jobs mode: element ``k`` runs task instance ``indices[k]``.

    All instances are of one task definition (one resource shape) and none depends on
    another of the same unit, so an array can run them in any order.
    """

    number: int
    spec_index: int
    indices: list[int]

    @property
    def size(self) -> int:
        return len(self.indices)


def chunk(items: Sequence[int], size: int) -> list[list[int]]:
    """``items`` in consecutive pieces of at most ``size`` (the array size limit)."""
    if size < 1:
        raise ValueError(f"chunk size must be at least 1, not {size}")
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def plan_units(
    graph: TaskGraph, include: Sequence[int], max_size: int, first_number: int = 1
) -> list[JobUnit]:
    """Group the instances ``include`` into units, in an order where every unit comes
    after the units its instances depend on.

    Instances are grouped by task definition and by depth among the included instances
    (so a unit never waits for itself), then split into arrays of at most ``max_size``.
    """
    wanted = set(include)
    depth: dict[int, int] = {}
    groups: dict[tuple[int, int], list[int]] = {}
    for i in graph.order:
        if i not in wanted:
            continue
        inst = graph.instances[i]
        level = 1 + max((depth[d] for d in inst.deps if d in depth), default=-1)
        depth[i] = level
        groups.setdefault((level, inst.spec_index), []).append(i)
    units: list[JobUnit] = []
    number = first_number
    for (_level, spec_index), members in sorted(groups.items(), key=lambda kv: kv[0]):
        for piece in chunk(members, max_size):
            units.append(JobUnit(number, spec_index, piece))
            number += 1
    return units


def blocking_deps(graph: TaskGraph, unit: JobUnit, state: Sequence[str]) -> set[int]:
    """The instances that ``unit``'s instances wait for and that have not succeeded."""
    return {d for i in unit.indices for d in graph.instances[i].deps if state[d] not in DONE_OK}


def blocking_deps_of(graph: TaskGraph, index: int, state: Sequence[str]) -> set[int]:
    """The instances that instance ``index`` waits for and that have not succeeded."""
    return {d for d in graph.instances[index].deps if state[d] not in DONE_OK}


def scheduler_dependencies(
    blocking: Iterable[int], unit_of: dict[int, int], native_ids: dict[int, str]
) -> list[str] | None:
    """The native ids a unit must wait for (``afterok``), or None when some blocking
    instance is in a unit not submitted yet (the unit must wait to be submitted)."""
    ids: dict[str, None] = {}
    for d in blocking:
        number = unit_of.get(d)
        native = native_ids.get(number) if number is not None else None
        if native is None:
            return None
        ids[native] = None
    return list(ids)


class SubmitThrottle:
    """At most ``rate`` submissions per second: each must wait ``1/rate`` after the last.

    Parameters
    ----------
    rate
        Submissions per second (the profile's ``submit_rate``).
    clock
        Monotonic time source (tests pass a fake).
    """

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, not {rate!r}")
        self.interval = 1.0 / rate
        self.clock = clock
        self._last: float | None = None

    def wait_time(self) -> float:
        """Seconds until the next submission is allowed (0 when it is now)."""
        if self._last is None:
            return 0.0
        return max(0.0, self._last + self.interval - self.clock())

    def note(self) -> None:
        """Record a submission made now."""
        self._last = self.clock()


class LimitBackoff:
    """How long to wait after the batch system refused a job because a queue limit was
    reached: doubling from ``first`` up to ``cap`` while refusals go on, reset on success."""

    def __init__(self, first: float = 1.0, cap: float = 30.0) -> None:
        self.first = first
        self.cap = cap
        self._next = first

    def refused(self) -> float:
        """The wait after one more refusal."""
        wait = self._next
        self._next = min(self._next * 2, self.cap)
        return wait

    def accepted(self) -> None:
        self._next = self.first
