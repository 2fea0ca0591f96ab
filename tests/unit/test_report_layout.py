"""The report's pure geometry: DAG layers and timeline lanes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as s

from hpcflow.report.layout import dag_layers, pack_lanes


def test_layers_follow_the_longest_path():
    layers = dag_layers(["a", "b", "c", "d"], [("a", "b"), ("b", "d"), ("a", "d"), ("c", "d")])
    assert layers == {"a": 0, "b": 1, "c": 0, "d": 2}
    # An edge against the given order is ignored, never looped on.
    assert dag_layers(["a", "b"], [("b", "a")]) == {"a": 0, "b": 0}


def test_lanes_example():
    assert pack_lanes([(0, 2), (1, 3), (2, 4), (5, 6)]) == [0, 1, 0, 1]


@given(s.lists(s.tuples(s.floats(0, 100), s.floats(0.01, 10)), max_size=60))
def test_lanes_never_overlap_and_are_fewest(pairs):
    intervals = [(start, start + length) for start, length in pairs]
    lanes = pack_lanes(intervals)
    for lane in set(lanes):
        mine = sorted(iv for iv, ln in zip(intervals, lanes, strict=True) if ln == lane)
        assert all(a[1] <= b[0] for a, b in zip(mine, mine[1:]))
    # As many lanes as the most intervals open at one instant (half-open intervals).
    points = sorted({x for iv in intervals for x in iv})
    most = max((sum(1 for a, b in intervals if a <= p < b) for p in points), default=0)
    assert len(set(lanes)) <= max(most, 1 if intervals else 0)
