"""Pure geometry for the report: DAG layers and timeline lanes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def dag_layers(nodes: Sequence[str], edges: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Each node's layer: the length of the longest path reaching it (sources are 0).

    ``nodes`` is the order to keep where the edges leave it free (as the run stores task
    names: by their first instance). An edge against it still counts (a Snakemake run
    numbers its jobs as they start: a rule's first job may start before another rule's
    that some of its later jobs depend on); an edge that closes a cycle is ignored
    rather than looped on.
    """
    order = _topological(nodes, edges)
    rank = {name: i for i, name in enumerate(order)}
    incoming: dict[str, list[str]] = {name: [] for name in nodes}
    for a, b in edges:
        if a in rank and b in rank and rank[a] < rank[b]:
            incoming[b].append(a)
    layer: dict[str, int] = {}
    for name in order:
        layer[name] = 1 + max((layer[p] for p in incoming[name]), default=-1)
    return layer


def _topological(nodes: Sequence[str], edges: Iterable[tuple[str, str]]) -> list[str]:
    """``nodes`` in an order every edge points forward in, the given one where the edges
    allow; in a cycle, the earliest node left goes next."""
    import heapq

    position = {name: i for i, name in enumerate(nodes)}
    after: dict[str, set[str]] = {name: set() for name in nodes}
    for a, b in edges:
        if a in position and b in position and a != b:
            after[a].add(b)
    waiting = dict.fromkeys(nodes, 0)
    for targets in after.values():
        for b in targets:
            waiting[b] += 1
    ready = [position[name] for name in nodes if not waiting[name]]
    heapq.heapify(ready)
    placed: list[str] = []
    done: set[str] = set()
    while len(placed) < len(position):
        if ready:
            name = nodes[heapq.heappop(ready)]
            if name in done:
                continue
        else:  # a cycle: break it at its earliest node
            name = min((n for n in position if n not in done), key=position.__getitem__)
        done.add(name)
        placed.append(name)
        for b in after[name]:
            waiting[b] -= 1
            if not waiting[b] and b not in done:
                heapq.heappush(ready, position[b])
    return placed


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
