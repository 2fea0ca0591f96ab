"""Pure geometry for the report: DAG layers and timeline lanes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def dag_layers(nodes: Sequence[str], edges: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Each node's layer: the length of the longest path reaching it (sources are 0).

    ``nodes`` is in a topological order (as the run stores task names); an edge that
    points backwards in it is ignored rather than looping.
    """
    position = {name: i for i, name in enumerate(nodes)}
    incoming: dict[str, list[str]] = {name: [] for name in nodes}
    for a, b in edges:
        if a in position and b in position and position[a] < position[b]:
            incoming[b].append(a)
    layer: dict[str, int] = {}
    for name in nodes:
        layer[name] = 1 + max((layer[p] for p in incoming[name]), default=-1)
    return layer


def pack_lanes(intervals: Sequence[tuple[float, float]]) -> list[int]:
    """A lane for each (start, end) so that intervals in one lane never overlap.

    Greedy by start time, reusing the lane that freed up first: the fewest lanes, so a
    host's lanes show how many tasks ran on it at once.
    """
    import heapq

    order = sorted(range(len(intervals)), key=lambda i: intervals[i])
    lanes = [0] * len(intervals)
    free: list[tuple[float, int]] = []  # (end time, lane)
    count = 0
    for i in order:
        start, end = intervals[i]
        if free and free[0][0] <= start:
            _, lane = heapq.heappop(free)
        else:
            lane = count
            count += 1
        lanes[i] = lane
        heapq.heappush(free, (max(end, start), lane))
    return lanes
