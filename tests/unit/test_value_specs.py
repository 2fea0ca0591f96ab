"""``from:``: python tasks that receive upstream return values. The syntax and its
errors (file:line), how instances pair and gather, the DAG's labels, the resume rule
for values that are gone, and the value files themselves."""

from __future__ import annotations

import os

import numpy as np
import pytest

from hpcflow.dag.render import render_dot, render_mermaid, render_text
from hpcflow.engine.calls_factory import CallFactory
from hpcflow.engine.resume import decide
from hpcflow.store.memo import MemoEntry
from hpcflow.store.paths import RunPaths
from hpcflow.store.values import ValueUnreadable, load_value, save_value
from hpcflow.worker.values import arguments
from tests.unit.test_dag import graph_of, graph_problem
from tests.unit.test_spec import Case, Has, P, case, one_task

#: A value key (as a run folder's ``value.key`` holds one).
KEY = b"k" * 32

PIPELINE = """
name: w
tasks:
  - name: base
    python: m:base
  - name: make
    foreach: {i: [0, 1, 2]}
    python: m:make
  - name: square
    foreach: {i: [0, 1, 2]}
    python: m:square
    from: {xs: make}
  - name: total
    python: m:total
    from:
      sq: square
      byi: {task: make, as: dict}
      one: base
"""


def test_paired_gathered_keyed_and_single_values():
    graph = graph_of(PIPELINE)
    by_id = {inst.id: inst for inst in graph.instances}
    index = {inst.id: inst.index for inst in graph.instances}
    square = by_id["square[i=1]"]
    assert square.values["xs"].shape == "value"
    assert square.values["xs"].producers == (index["make[i=1]"],)
    assert index["make[i=1]"] in square.deps  # a value is a dependency
    total = by_id["total"]
    assert total.values["sq"].shape == "list"
    assert total.values["sq"].producers == tuple(index[f"square[i={i}]"] for i in range(3))
    assert total.values["byi"].shape == "dict"
    assert total.values["byi"].keys == (0, 1, 2)  # the sweep values, with their types
    assert total.values["one"].shape == "value"
    assert set(total.deps) >= {index["base"], index["make[i=0]"], index["square[i=2]"]}


def test_one_gathered_parameter_keys_by_its_values_and_list_keeps_sweep_order():
    graph = graph_of(
        """
        name: w
        tasks:
          - name: sim
            foreach: {a: [2, 1], b: [x, y]}
            python: m:sim
          - name: per_a
            foreach: {a: [1, 2]}
            python: m:per_a
            from: {runs: {task: sim, as: dict}, all: {task: sim, as: list}}
        """
    )
    by_id = {inst.id: inst for inst in graph.instances}
    arg = by_id["per_a[a=2]"].values["runs"]
    assert arg.keys == ("x", "y")  # one gathered parameter: its values are the keys
    assert [graph.instances[p].id for p in by_id["per_a[a=1]"].values["all"].producers] == [
        "sim[a=1,b=x]",
        "sim[a=1,b=y]",
    ]


def test_dict_keys_are_tuples_for_several_gathered_parameters():
    graph = graph_of(
        """
        name: w
        tasks:
          - name: sim
            foreach: {a: [1, 2], b: [x, y]}
            python: m:sim
          - name: all
            python: m:all
            from: {runs: {task: sim, as: dict}}
        """
    )
    (consumer,) = [i for i in graph.instances if i.id == "all"]
    assert consumer.values["runs"].keys == ((1, "x"), (1, "y"), (2, "x"), (2, "y"))


def test_the_dag_shows_which_arguments_an_edge_fills():
    graph = graph_of(PIPELINE)
    text = render_text(graph)
    assert "square ×3  ← make (xs)" in text
    assert "total  ← base (one), make (byi), square (sq)" in text
    assert 'n1 -->|"xs"| n2' in render_mermaid(graph)
    assert '-> n2 [label="xs"];' in render_dot(graph)
    assert "square[i=0]  ← make[i=0] (xs)" in render_text(graph, instances=True)


def test_a_value_edge_in_a_cycle_is_reported():
    problem = graph_problem(
        """
        name: w
        tasks:
          - name: a
            python: m:a
            from: {x: b}
          - name: b
            python: m:b
            from: {y: a}
        """
    )
    assert problem.line == 3 and "dependency cycle: a → b → a" in problem.message
    assert "'from:'" in (problem.hint or "")


@pytest.mark.parametrize(
    ("source", "line", "message"),
    [
        ("{task: make, as: value}", 8, "'as: value' takes one instance"),
        ("{task: base, as: dict}", 8, "there are none"),
    ],
)
def test_shapes_that_do_not_fit_the_sweeps(source, line, message):
    problem = graph_problem(
        f"""
        name: w
        tasks:
          - name: make
            foreach: {{i: [0, 1]}}
            python: m:make
          - name: base
            python: m:base
          - name: use
            python: m:use
            from: {{x: {source}}}
        """
    )
    assert problem.line == line + 2 and message in problem.message, problem.render()


def test_paired_instances_must_exist():
    problem = graph_problem(
        """
        name: w
        tasks:
          - name: make
            foreach: {i: [0, 1]}
            python: m:make
          - name: use
            foreach: {i: [0, 1, 2]}
            python: m:use
            from: {x: make}
        """
    )
    assert problem.line == 9
    assert "'use[i=2]' receives 'x' from 'make', but no instance of 'make' has i=2" in (
        problem.message
    )


FROM_CASES = [
    case(
        "from-unknown-task",
        """
        name: w
        tasks:
          - name: make
            python: m:f
          - name: use
            python: m:g
            from: {x: mkae}
        """,
        P((7, 15), "tasks[1].from.x", "receives a value from unknown task 'mkae'", Has("'make'")),
    ),
    case(
        "from-a-shell-task",
        """
        name: w
        tasks:
          - name: make
            command: echo
          - name: use
            python: m:g
            from: {x: make}
        """,
        P(line=7, msg="'make' is not a 'python' task: it returns no value"),
    ),
    case(
        "from-on-a-command",
        """
        name: w
        tasks:
          - name: make
            python: m:f
          - name: use
            command: echo
            from: {x: make}
        """,
        P((7, 5), msg="only a 'python' task receives values with 'from'"),
    ),
    case(
        "from-itself",
        one_task("python: m:f", "from: {x: a}"),
        P(line=5, msg="a task cannot receive its own value"),
    ),
    case(
        "from-argument-is-a-parameter",
        """
        name: w
        tasks:
          - name: make
            python: m:f
          - name: use
            python: m:g
            params: {x: 1}
            from: {x: make}
        """,
        P((8, 12), msg="argument 'x' is also a parameter of 'use'"),
    ),
    case(
        "from-argument-not-an-identifier",
        """
        name: w
        tasks:
          - name: make
            python: m:f
          - name: use
            python: m:g
            from: {"x-y": make}
        """,
        P(line=7, msg="'x-y' is not a Python argument name"),
    ),
    case(
        "from-unknown-shape",
        """
        name: w
        tasks:
          - name: make
            python: m:f
          - name: use
            python: m:g
            from: {x: {task: make, as: set}}
        """,
        P(line=7, where="tasks[1].from.x.as", msg=Has("'value', 'list' or 'dict'")),
    ),
]


@pytest.mark.parametrize("case", FROM_CASES)
def test_from_problems(case: Case) -> None:
    case.check()


def _memo(graph, run_id: str, factory: CallFactory) -> dict[str, MemoEntry]:
    return {
        inst.id: MemoEntry(inst.id, factory.fingerprint(inst), {}, {}, run_id)
        for inst in graph.instances
    }


def test_a_consumer_that_runs_makes_producers_whose_value_is_gone_run_again():
    graph = graph_of(PIPELINE)
    factory = CallFactory(graph)
    memo = _memo(graph, "r1", factory)
    index = {inst.id: inst.index for inst in graph.instances}
    gone = {index["make[i=1]"]}
    decision = decide(
        graph, memo, factory, rerun=("total",), value_kept=lambda p, entry: p not in gone
    )
    running = {graph.instances[i].id for i, r in enumerate(decision.run) if r}
    # make[i=1] runs again, so does what receives it (square[i=1]); total was asked for.
    assert running == {"make[i=1]", "square[i=1]", "total"}
    assert "not kept" in decision.reasons[index["make[i=1]"]]
    # With every value kept, only the task asked for runs.
    kept = decide(graph, memo, factory, rerun=("total",), value_kept=lambda p, entry: True)
    assert [graph.instances[i].id for i, r in enumerate(kept.run) if r] == ["total"]


def test_a_consumer_reads_values_from_the_run_that_made_them(tmp_path):
    graph = graph_of(PIPELINE)
    index = {inst.id: inst.index for inst in graph.instances}
    factory = CallFactory(
        graph, RunPaths(tmp_path / "r2"), value_runs={index["base"]: RunPaths(tmp_path / "r1")}
    )
    total = graph.instances[index["total"]]
    call = factory.call(total, 1)
    assert call.values_in is not None
    assert call.values_in["one"] == ("value", [(None, f"{tmp_path}/r1/tasks/base/value.pickle")])
    shape, sources = call.values_in["byi"]
    assert shape == "dict" and [k for k, _ in sources] == [0, 1, 2]
    slug = factory.slug(graph.instances[index["make[i=0]"]])
    assert sources[0][1] == f"{tmp_path}/r2/tasks/{slug}/value.pickle"
    assert call.value_out == ""  # nothing receives total's value
    assert factory.call(graph.instances[index["make[i=0]"]], 1).value_out.endswith("value.pickle")


def test_value_files_round_trip_arrays_bit_for_bit(tmp_path):
    array = np.random.default_rng(1).standard_normal((256, 1024))
    path = str(tmp_path / "t" / "value.pickle")
    size = save_value(path, array, KEY)
    assert size >= array.nbytes and os.path.getsize(path) == size
    assert np.array_equal(load_value(path, KEY), array)
    assert [p.name for p in (tmp_path / "t").iterdir()] == ["value.pickle"]  # no temp left
    other = str(tmp_path / "o.pickle")
    save_value(other, {"k": 1}, KEY)
    values_in = {
        "one": ("value", [(None, path)]),
        "many": ("list", [(None, other), (None, path)]),
        "keyed": ("dict", [((1, "x"), other)]),
    }
    key_file = tmp_path / "value.key"
    key_file.write_text(KEY.hex())
    key_file.chmod(0o600)
    got = arguments(values_in, str(key_file))
    assert np.array_equal(got["one"], array) and got["many"][0] == {"k": 1}
    assert got["keyed"] == {(1, "x"): {"k": 1}}
    assert got["many"][1] is got["one"]  # each file is read once


def test_a_value_file_cut_short_says_which_and_how_to_fix(tmp_path):
    path = tmp_path / "tasks" / "make" / "value.pickle"
    save_value(str(path), np.arange(100_000), KEY)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # a crash mid-write
    with pytest.raises(ValueUnreadable, match=f"{path} is cut short"):
        load_value(str(path), KEY)


def test_background_value_files_are_all_written_when_waited_for(tmp_path):
    from hpcflow.worker.value_writes import save_later, wait_for_saves

    arrays = {tmp_path / f"t{k}" / "value.pickle": np.full(200_000, float(k)) for k in range(5)}
    for path, array in arrays.items():
        save_later(str(path), array, KEY)
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    save_later(str(blocked / "value.pickle"), 1, KEY)  # its folder is a file: cannot be written
    problems = wait_for_saves(60)
    assert len(problems) == 1 and problems[0].startswith(f"{blocked}/value.pickle: ")
    for path, array in arrays.items():
        assert np.array_equal(load_value(str(path), KEY), array)
    assert wait_for_saves(1) == []  # nothing left pending


def test_an_outcome_with_value_stats_survives_a_jobs_outcome_file():
    import dataclasses
    import json

    from hpcflow.worker.calls import Outcome, ValueStats

    out = Outcome(
        index=3,
        attempt=1,
        state="succeeded",
        exit_code=0,
        started=1.0,
        ended=2.0,
        values=ValueStats(type="numpy.ndarray", nbytes=80, received=8, moved=0),
    )
    back = Outcome.from_dict(json.loads(json.dumps(dataclasses.asdict(out))))
    assert back == out
    assert back.record().values.nbytes == 80 and back.record().values.task_idx == 3
    plain = Outcome(index=4, attempt=1, state="failed", exit_code=1, started=1.0, ended=2.0)
    assert Outcome.from_dict(dataclasses.asdict(plain)) == plain
