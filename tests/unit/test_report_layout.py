"""The report's pure geometry: DAG layers and timeline lanes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as s

from hpcflow.report.layout import dag_layers, pack_lanes


def test_layers_follow_the_longest_path():
    layers = dag_layers(["a", "b", "c", "d"], [("a", "b"), ("b", "d"), ("a", "d"), ("c", "d")])
    assert layers == {"a": 0, "b": 1, "c": 0, "d": 2}
    # An edge against the given order counts; one that closes a cycle is ignored.
    assert dag_layers(["a", "b"], [("b", "a")]) == {"a": 1, "b": 0}
    assert dag_layers(["a", "b", "c"], [("a", "b"), ("b", "c"), ("c", "a")]) == {
        "a": 0, "b": 1, "c": 2,
    }  # fmt: skip
    assert dag_layers(["a", "a"], [("a", "a")]) == {"a": 0}


@given(s.integers(1, 12).flatmap(lambda n: s.tuples(
    s.permutations(range(n)), s.lists(s.tuples(s.integers(0, n - 1), s.integers(0, n - 1)))
)))  # fmt: skip
def test_every_edge_of_a_dag_points_to_a_later_layer(case):
    # Edges i -> j with i < j form a DAG; the nodes are given in any order.
    order, pairs = case
    edges = [(f"n{min(a, b)}", f"n{max(a, b)}") for a, b in pairs if a != b]
    layers = dag_layers([f"n{i}" for i in order], edges)
    assert all(layers[a] < layers[b] for a, b in edges)


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
