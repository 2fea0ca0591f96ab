"""Unit tests of the DAG builder (hpcflow.dag): sweep expansion, needs and file-inferred
edges, duplicate outputs, missing inputs, cycles, order and rendering."""

from __future__ import annotations

import os
import random
import textwrap
from pathlib import Path

import pytest

from hpcflow.dag import TaskGraph, build_graph
from hpcflow.dag.instances import instance_id
from hpcflow.dag.render import render_dot, render_mermaid, render_text, task_edges
from hpcflow.errors import SpecError, SpecProblem
from hpcflow.spec import load_workflow, parse_workflow

FILE = "wf.yaml"


def wf(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def graph_of(text: str, *, check_files: bool = False) -> TaskGraph:
    return build_graph(parse_workflow(wf(text), FILE), check_files=check_files)


def graph_in(tmp_path: Path, text: str, *, check_files: bool = True) -> TaskGraph:
    path = tmp_path / "workflow.yaml"
    path.write_text(wf(text), encoding="utf-8")
    return build_graph(load_workflow(path), check_files=check_files)


def graph_problem(
    text: str, *, check_files: bool = False, tmp_path: Path | None = None
) -> SpecProblem:
    with pytest.raises(SpecError) as info:
        if tmp_path is None:
            graph_of(text, check_files=check_files)
        else:
            graph_in(tmp_path, text, check_files=check_files)
    assert len(info.value.problems) == 1, str(info.value)
    return info.value.problems[0]


def ids(graph: TaskGraph, task: str | None = None) -> list[str]:
    return [i.id for i in graph.instances if task is None or graph.template(i).spec.name == task]


def deps_of(graph: TaskGraph, instance: str) -> list[str]:
    by_id = {i.id: i for i in graph.instances}
    return sorted(graph.instances[d].id for d in by_id[instance].deps)


def assert_topological(graph: TaskGraph) -> None:
    assert sorted(graph.order) == list(range(len(graph.instances)))
    position = {node: k for k, node in enumerate(graph.order)}
    for inst in graph.instances:
        for dep in inst.deps:
            assert position[dep] < position[inst.index], (graph.instances[dep].id, inst.id)


# -- sweep expansion --------------------------------------------------------------------------


def test_task_without_sweep_is_one_instance_with_its_bare_name() -> None:
    graph = graph_of("""
        name: w
        tasks:
          - name: only
            params: {n: 3}
            command: x
        """)
    (inst,) = graph.instances
    assert inst.id == "only"
    assert inst.params == {"n": 3}
    assert not inst.is_sweep_instance
    assert inst.deps == []
    assert graph.order == [0]


def test_product_sweep_counts_ids_and_order() -> None:
    graph = graph_of("""
        name: w
        tasks:
          - name: simulate
            foreach:
              seed: {range: [0, 3]}
              sample: [a, b]
            params: {n: 10}
            command: x
        """)
    assert ids(graph) == [
        "simulate[seed=0,sample=a]",
        "simulate[seed=0,sample=b]",
        "simulate[seed=1,sample=a]",
        "simulate[seed=1,sample=b]",
        "simulate[seed=2,sample=a]",
        "simulate[seed=2,sample=b]",
    ]
    assert [i.index for i in graph.instances] == list(range(6))
    assert all(i.is_sweep_instance and i.spec_index == 0 for i in graph.instances)
    assert graph.instances[3].params == {"n": 10, "seed": 1, "sample": "b"}
    assert graph.counts_by_task() == {"simulate": 6}


def test_zip_sweep_advances_together() -> None:
    graph = graph_of("""
        name: w
        tasks:
          - name: t
            foreach:
              zip: {x: [1, 2, 3], y: [a, b, c]}
            command: x
        """)
    assert ids(graph) == ["t[x=1,y=a]", "t[x=2,y=b]", "t[x=3,y=c]"]


def test_product_and_zip_combined() -> None:
    graph = graph_of("""
        name: w
        tasks:
          - name: t
            foreach:
              product: {p: [1, 2], q: [true, false]}
              zip: {x: [1, 2, 3], y: [a, b, c]}
            command: x
        """)
    assert len(graph.instances) == 2 * 2 * 3
    assert ids(graph)[:4] == [
        "t[p=1,q=true,x=1,y=a]",
        "t[p=1,q=true,x=2,y=b]",
        "t[p=1,q=true,x=3,y=c]",
        "t[p=1,q=false,x=1,y=a]",
    ]
    assert ids(graph)[-1] == "t[p=2,q=false,x=3,y=c]"
    assert len(set(ids(graph))) == 12


@pytest.mark.parametrize(
    ("spec", "values"),
    [
        ("[4]", [0, 1, 2, 3]),
        ("[2, 5]", [2, 3, 4]),
        ("[0, 10, 4]", [0, 4, 8]),
        ("[10, 0, -3]", [10, 7, 4, 1]),
        ("[-2, 1]", [-2, -1, 0]),
    ],
)
def test_range_sweeps(spec: str, values: list[int]) -> None:
    graph = graph_of(f"""
        name: w
        tasks:
          - name: t
            foreach: {{i: {{range: {spec}}}}}
            command: x
        """)
    assert [inst.params["i"] for inst in graph.instances] == values
    assert ids(graph) == [f"t[i={v}]" for v in values]


def test_order_is_stable_and_follows_the_file() -> None:
    text = """
        name: w
        tasks:
          - name: b
            foreach: {k: [z, y, x]}
            command: x
          - name: a
            foreach: {k: [3, 1, 2]}
            command: x
          - name: c
            command: x
        """
    first = graph_of(text)
    second = graph_of(text)
    assert ids(first) == ["b[k=z]", "b[k=y]", "b[k=x]", "a[k=3]", "a[k=1]", "a[k=2]", "c"]
    assert ids(first) == ids(second)
    assert first.order == second.order == list(range(7))


def test_instance_id_formats_values_as_text() -> None:
    assert instance_id("t", (), ()) == "t"
    assert instance_id("t", ("a", "b", "c"), (True, 2.5, "x y")) == "t[a=true,b=2.5,c=x y]"


def test_sweep_values_equal_as_text_give_a_duplicate_id() -> None:
    p = graph_problem("""
        name: w
        tasks:
          - name: t
            foreach: {v: [1, "1"]}
            command: x
        """)
    assert (p.line, p.column) == (4, 14)
    assert "same id 't[v=1]'" in p.message


def test_placeholders_render_into_paths(tmp_path: Path) -> None:
    graph = graph_in(
        tmp_path,
        """
        name: w
        workdir: runs
        tasks:
          - name: t
            foreach: {seed: [1, 2]}
            workdir: "s{seed}"
            outputs: ["out-{seed}.txt", "/abs/{seed}.log"]
            command: x
        """,
    )
    first = graph.instances[0]
    assert first.workdir == str(tmp_path / "runs" / "s1")
    assert first.outputs == (str(tmp_path / "runs" / "s1" / "out-1.txt"), "/abs/1.log")


def test_braces_in_the_folder_of_the_file_are_not_placeholders(tmp_path: Path) -> None:
    folder = tmp_path / "{proj}" / "${X}"
    folder.mkdir(parents=True)
    graph = graph_in(
        folder,
        """
        name: w
        defaults: {workdir: "d-{seed}"}
        tasks:
          - name: t
            foreach: {seed: [7]}
            outputs: [out.txt]
            command: x
        """,
    )
    (inst,) = graph.instances
    assert inst.workdir == str(folder / "d-7")
    assert inst.outputs == (str(folder / "d-7" / "out.txt"),)


# -- needs ------------------------------------------------------------------------------------


def test_needs_on_a_sweep_waits_for_every_instance() -> None:
    graph = graph_of("""
        name: w
        tasks:
          - name: simulate
            foreach: {seed: {range: [0, 5]}}
            command: x
          - name: reduce
            needs: [simulate]
            command: y
          - name: report
            needs: [reduce]
            command: z
        """)
    assert deps_of(graph, "reduce") == sorted(ids(graph, "simulate"))
    assert deps_of(graph, "report") == ["reduce"]
    assert all(deps_of(graph, i) == [] for i in ids(graph, "simulate"))
    assert graph.dependents()[0] == [5]
    assert_topological(graph)


def test_needs_from_a_sweep_to_a_plain_task() -> None:
    graph = graph_of("""
        name: w
        tasks:
          - name: prepare
            command: x
          - name: simulate
            foreach: {seed: [1, 2, 3]}
            needs: [prepare]
            command: y
        """)
    for inst in ids(graph, "simulate"):
        assert deps_of(graph, inst) == ["prepare"]
    assert sorted(graph.dependents()[0]) == [1, 2, 3]


def test_needs_between_sweeps_pairs_instances_on_shared_parameters() -> None:
    graph = graph_of("""
        name: w
        tasks:
          - name: simulate
            foreach:
              seed: [1, 2, 3]
              size: [small, big]
            command: x
          - name: analyse
            foreach:
              seed: ["1", "2", "3"]
            needs: [simulate]
            command: y
          - name: plot
            foreach:
              seed: [1, 2, 3]
              size: [small, big]
            needs: [simulate, analyse]
            command: z
        """)
    # Equal as text pairs ("1" with 1); a parameter only one side sweeps is not paired.
    assert deps_of(graph, "analyse[seed=2]") == [
        "simulate[seed=2,size=big]",
        "simulate[seed=2,size=small]",
    ]
    assert deps_of(graph, "plot[seed=3,size=big]") == [
        "analyse[seed=3]",
        "simulate[seed=3,size=big]",
    ]
    assert_topological(graph)


def test_needs_pairing_with_a_constant_parameter() -> None:
    graph = graph_of("""
        name: w
        tasks:
          - name: simulate
            foreach: {seed: [1, 2, 3]}
            command: x
          - name: inspect
            params: {seed: 2}
            needs: [simulate]
            command: y
        """)
    assert deps_of(graph, "inspect") == ["simulate[seed=2]"]


def test_needs_pairing_without_a_partner_is_an_error() -> None:
    p = graph_problem("""
        name: w
        tasks:
          - name: simulate
            foreach: {seed: [1, 2]}
            command: x
          - name: analyse
            foreach: {seed: [1, 2, 3]}
            needs: [simulate]
            command: y
        """)
    assert (p.line, p.column) == (8, 13)
    assert (
        p.message == "'analyse[seed=3]' needs 'simulate', but no instance of 'simulate' has seed=3"
    )


# -- edges inferred from files ----------------------------------------------------------------


def test_exact_input_path_depends_on_its_producer(tmp_path: Path) -> None:
    graph = graph_in(
        tmp_path,
        """
        name: w
        tasks:
          - name: consume
            inputs: [data/x.txt]
            command: y
          - name: produce
            outputs: [data/x.txt]
            command: x
        """,
    )
    assert deps_of(graph, "consume") == ["produce"]
    consume = graph.instances[0]
    assert consume.inputs == (str(tmp_path / "data" / "x.txt"),)
    # The consumer comes first in the file but runs second.
    assert graph.order == [1, 0]
    assert_topological(graph)


def test_paths_are_normalised_before_matching(tmp_path: Path) -> None:
    graph = graph_in(
        tmp_path,
        """
        name: w
        tasks:
          - name: produce
            workdir: sub
            outputs: [./x.txt]
            command: x
          - name: consume
            inputs: [sub/../sub/x.txt]
            command: y
        """,
    )
    assert deps_of(graph, "consume") == ["produce"]


def test_sweep_outputs_feed_paired_inputs(tmp_path: Path) -> None:
    graph = graph_in(
        tmp_path,
        """
        name: w
        tasks:
          - name: simulate
            foreach: {seed: [1, 2]}
            outputs: ["res/sim-{seed}.txt"]
            command: x
          - name: analyse
            foreach: {seed: [2, 1]}
            inputs: ["res/sim-{seed}.txt"]
            command: y
        """,
    )
    assert deps_of(graph, "analyse[seed=2]") == ["simulate[seed=2]"]
    assert deps_of(graph, "analyse[seed=1]") == ["simulate[seed=1]"]


def test_glob_input_depends_on_every_matching_output(tmp_path: Path) -> None:
    (tmp_path / "res").mkdir()
    (tmp_path / "res" / "r-extra.txt").write_text("on disk")
    (tmp_path / "res" / "other.dat").write_text("not matched")
    graph = graph_in(
        tmp_path,
        """
        name: w
        tasks:
          - name: simulate
            foreach: {i: {range: [3]}}
            outputs: ["res/r-{i}.txt", "res/r-{i}.log"]
            command: x
          - name: collect
            inputs: ["res/r-*.txt"]
            outputs: [res/all.txt]
            command: cat {inputs} > {outputs}
          - name: unrelated
            outputs: [res/r-x.csv]
            command: z
        """,
    )
    assert deps_of(graph, "collect") == ids(graph, "simulate")
    collect = graph.instances[3]
    # Outputs of tasks and files already on disk, sorted; never the .log or .csv.
    assert collect.inputs == tuple(
        str(tmp_path / "res" / name) for name in ("r-0.txt", "r-1.txt", "r-2.txt", "r-extra.txt")
    )
    assert_topological(graph)


def test_glob_in_a_directory_part(tmp_path: Path) -> None:
    graph = graph_in(
        tmp_path,
        """
        name: w
        tasks:
          - name: simulate
            foreach: {case: [a, b]}
            workdir: "cases/{case}"
            outputs: [result.txt]
            command: x
          - name: gather
            inputs: ["cases/*/result.txt", "cases/[ab]/result.txt"]
            command: y
        """,
    )
    assert deps_of(graph, "gather") == ["simulate[case=a]", "simulate[case=b]"]
    gather = graph.instances[2]
    assert len(gather.inputs) == 4


def test_glob_matching_nothing_is_not_an_error(tmp_path: Path) -> None:
    graph = graph_in(
        tmp_path,
        """
        name: w
        tasks:
          - name: t
            inputs: ["nothing/*.txt"]
            command: y
        """,
    )
    assert graph.instances[0].inputs == ()


def test_a_task_reading_its_own_output_glob_does_not_depend_on_itself(tmp_path: Path) -> None:
    graph = graph_in(
        tmp_path,
        """
        name: w
        tasks:
          - name: t
            inputs: ["*.txt"]
            outputs: [t.txt]
            command: y
        """,
    )
    assert graph.instances[0].deps == []
    # Nor is its own output one of its inputs (it would have to exist before it ran).
    assert graph.instances[0].inputs == ()


def test_inferred_and_explicit_edges_are_merged_without_duplicates(tmp_path: Path) -> None:
    graph = graph_in(
        tmp_path,
        """
        name: w
        tasks:
          - name: a
            outputs: [a.txt]
            command: x
          - name: b
            needs: [a, a]
            inputs: [a.txt, "*.txt"]
            command: y
        """,
    )
    assert graph.instances[1].deps == [0]


# -- outputs and inputs -----------------------------------------------------------------------


def test_two_tasks_writing_the_same_output() -> None:
    p = graph_problem("""
        name: w
        tasks:
          - name: first
            outputs: [out.txt]
            command: x
          - name: second
            outputs: [other.txt, ./out.txt]
            command: y
        """)
    assert (p.line, p.column) == (7, 14)
    assert p.where == "tasks[1].outputs"
    assert "'second' and 'first' both write" in p.message
    assert p.message.endswith("out.txt")


def test_sweep_instances_writing_the_same_output() -> None:
    p = graph_problem("""
        name: w
        tasks:
          - name: sim
            foreach: {seed: [1, 2]}
            outputs: [result.txt]
            command: x
        """)
    assert (p.line, p.column) == (5, 14)
    assert "'sim[seed=2]' and 'sim[seed=1]' both write" in p.message
    assert p.hint is not None and "exactly one task instance" in p.hint


def test_missing_input_is_an_error_unless_files_are_not_checked(tmp_path: Path) -> None:
    text = """
        name: w
        tasks:
          - name: a
            command: x
          - name: b
            inputs: [present.txt, absent.txt]
            command: y
        """
    (tmp_path / "present.txt").write_text("x")
    p = graph_problem(text, check_files=True, tmp_path=tmp_path)
    assert (p.line, p.column) == (6, 13)
    assert p.where == "tasks[1].inputs"
    assert p.message == (
        f"input {tmp_path / 'absent.txt'} of 'b' is not produced by any task and does not exist"
    )
    graph = graph_in(tmp_path, text, check_files=False)
    assert graph.instances[1].inputs == (
        str(tmp_path / "present.txt"),
        str(tmp_path / "absent.txt"),
    )
    assert graph.instances[1].deps == []
    (tmp_path / "absent.txt").write_text("now here")
    graph_in(tmp_path, text, check_files=True)


def test_missing_inputs_of_every_instance_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "workflow.yaml"
    path.write_text(
        wf("""
        name: w
        tasks:
          - name: t
            foreach: {i: [1, 2, 3]}
            inputs: ["in-{i}.txt"]
            command: y
        """)
    )
    with pytest.raises(SpecError) as info:
        build_graph(load_workflow(path))
    assert [p.message.split(" of ")[1].split(" is ")[0] for p in info.value.problems] == [
        "'t[i=1]'",
        "'t[i=2]'",
        "'t[i=3]'",
    ]


# -- cycles -----------------------------------------------------------------------------------


def test_explicit_cycle_is_reported_with_its_path_and_position() -> None:
    p = graph_problem("""
        name: w
        tasks:
          - name: start
            command: x
          - name: a
            needs: [c, start]
            command: x
          - name: b
            needs: [a]
            command: x
          - name: c
            needs: [b]
            command: x
        """)
    assert p.message == "dependency cycle: a → c → b → a"
    assert (p.line, p.column) == (5, 5)
    assert p.where == "tasks[1]"
    assert p.hint is not None and "needs" in p.hint


def test_two_cycle() -> None:
    p = graph_problem("""
        name: w
        tasks:
          - name: a
            needs: [b]
            command: x
          - name: b
            needs: [a]
            command: x
        """)
    assert p.message == "dependency cycle: a → b → a"
    assert (p.line, p.column) == (3, 5)


def test_cycle_inferred_from_files(tmp_path: Path) -> None:
    p = graph_problem(
        """
        name: w
        tasks:
          - name: ok
            command: x
          - name: a
            inputs: [y.txt]
            outputs: [x.txt]
            command: x
          - name: b
            inputs: ["x.*"]
            outputs: [y.txt]
            command: x
        """,
        check_files=True,
        tmp_path=tmp_path,
    )
    assert p.message == "dependency cycle: a → b → a"
    assert (p.line, p.column) == (5, 5)


def test_cycle_through_sweep_instances() -> None:
    p = graph_problem("""
        name: w
        tasks:
          - name: a
            foreach: {k: [1, 2]}
            needs: [b]
            outputs: ["a-{k}"]
            command: x
          - name: b
            inputs: [a-2]
            command: x
        """)
    # a[k=1] waits on the cycle but is not part of it.
    assert p.message == "dependency cycle: b → a[k=2] → b"
    assert (p.line, p.column) == (8, 5)


def test_cycle_mixing_needs_and_files(tmp_path: Path) -> None:
    p = graph_problem(
        """
        name: w
        tasks:
          - name: a
            outputs: [a.txt]
            needs: [b]
            command: x
          - name: b
            inputs: [a.txt]
            command: x
        """,
        check_files=True,
        tmp_path=tmp_path,
    )
    assert p.message == "dependency cycle: a → b → a"


# -- order ------------------------------------------------------------------------------------


def _layered_workflow(seed: int) -> str:
    rng = random.Random(seed)
    layers: list[list[str]] = []
    lines = ["name: layered", "tasks:"]
    entries: list[str] = []
    count = 0
    for depth in range(rng.randint(3, 6)):
        layer = []
        for _ in range(rng.randint(1, 5)):
            name = f"t{count}"
            count += 1
            layer.append(name)
            earlier = [n for lay in layers for n in lay]
            needs = rng.sample(earlier, k=min(len(earlier), rng.randint(0, 3)))
            body = [f"  - name: {name}", "    command: x"]
            if needs:
                body.append(f"    needs: [{', '.join(needs)}]")
            if rng.random() < 0.4:
                axis = f"s_{name}"  # not shared, so needs wait for every instance
                body.append(f"    foreach: {{{axis}: {{range: [{rng.randint(1, 4)}]}}}}")
                body.append(f'    outputs: ["{name}.s{{{axis}}}.out"]')
            else:
                body.append(f"    outputs: [{name}.out]")
            if earlier and rng.random() < 0.5:
                source = rng.choice(earlier)
                body.append(f'    inputs: ["{source}.*out"]')
            body.append(f"    params: {{depth: {depth}}}")
            entries.append("\n".join(body))
        layers.append(layer)
    rng.shuffle(entries)  # file order is not dependency order
    return "\n".join(lines + entries) + "\n"


@pytest.mark.parametrize("seed", range(25))
def test_topological_order_respects_every_edge(seed: int) -> None:
    graph = build_graph(parse_workflow(_layered_workflow(seed), FILE), check_files=False)
    assert_topological(graph)
    # Every edge goes from a shallower layer to a deeper one, and every need is there.
    for inst in graph.instances:
        spec = graph.template(inst).spec
        dep_names = {graph.template(graph.instances[d]).spec.name for d in inst.deps}
        assert set(spec.needs) <= dep_names
        for d in inst.deps:
            assert graph.instances[d].params["depth"] < inst.params["depth"]  # type: ignore[operator]


def test_order_is_a_valid_schedule_for_a_diamond() -> None:
    graph = graph_of("""
        name: w
        tasks:
          - name: join
            needs: [left, right]
            command: x
          - name: left
            needs: [root]
            command: x
          - name: right
            needs: [root]
            command: x
          - name: root
            command: x
        """)
    order = [graph.instances[i].id for i in graph.order]
    assert order[0] == "root" and order[-1] == "join"
    assert_topological(graph)


# -- rendering --------------------------------------------------------------------------------

RENDER_WF = """
    name: w
    tasks:
      - name: simulate
        foreach: {seed: [1, 2]}
        command: x
      - name: reduce
        needs: [simulate]
        command: y
      - name: "say \\"hi\\""
        needs: [reduce]
        command: z
    """


def test_render_text() -> None:
    graph = graph_of(RENDER_WF)
    assert task_edges(graph) == [("reduce", 'say "hi"'), ("simulate", "reduce")]
    assert render_text(graph).splitlines() == [
        "simulate ×2",
        "reduce  ← simulate",
        'say "hi"  ← reduce',
    ]
    assert render_text(graph, instances=True).splitlines() == [
        "simulate[seed=1]",
        "simulate[seed=2]",
        "reduce  ← simulate[seed=1], simulate[seed=2]",
        'say "hi"  ← reduce',
    ]


def test_render_mermaid() -> None:
    graph = graph_of(RENDER_WF)
    text = render_mermaid(graph)
    assert text.splitlines() == [
        "flowchart TD",
        '    n0["simulate ×2"]',
        '    n1["reduce"]',
        '    n2["say #quot;hi#quot;"]',
        "    n1 --> n2",
        "    n0 --> n1",
    ]
    lines = render_mermaid(graph, instances=True).splitlines()
    assert '    n1["simulate[seed=2]"]' in lines
    assert "    n0 --> n2" in lines and "    n1 --> n2" in lines and "    n2 --> n3" in lines
    assert sum("-->" in line for line in lines) == 3


def test_render_dot() -> None:
    graph = graph_of(RENDER_WF)
    lines = render_dot(graph).splitlines()
    assert lines[0] == "digraph workflow {" and lines[-1] == "}"
    assert '    n0 [label="simulate ×2"];' in lines
    assert '    n2 [label="say \\"hi\\""];' in lines
    assert "    n0 -> n1;" in lines and "    n1 -> n2;" in lines
    assert sum("->" in line for line in lines) == 2
    lines = render_dot(graph, instances=True).splitlines()
    assert '    n0 [label="simulate[seed=1]"];' in lines
    assert {"    n0 -> n2;", "    n1 -> n2;", "    n2 -> n3;"} <= set(lines)


def test_rendering_follows_the_execution_order(tmp_path: Path) -> None:
    graph = graph_in(
        tmp_path,
        """
        name: w
        tasks:
          - name: last
            inputs: [mid.txt]
            command: x
          - name: mid
            outputs: [mid.txt]
            needs: [first]
            command: x
          - name: first
            command: x
        """,
    )
    assert [line.split()[0] for line in render_text(graph).splitlines()] == ["first", "mid", "last"]
    assert os.path.basename(graph.instances[0].inputs[0]) == "mid.txt"
