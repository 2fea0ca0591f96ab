"""A task's fingerprint is the same whether call() rendered it just before or not."""

from __future__ import annotations

import textwrap
from pathlib import Path

from hpcflow.dag import build_graph
from hpcflow.engine.calls_factory import CallFactory, TaskLaunch
from hpcflow.spec import parse_workflow
from hpcflow.store.paths import RunPaths

WF = """
name: fp
tasks:
  - name: mpi
    foreach: {n: [1, 2]}
    command: ./solver --n {n}
    env: {MODE: "m{n}"}
    resources: {ranks: 2}
  - name: plain
    command: echo hi > out.txt
    outputs: [out.txt]
"""


def test_fingerprints_do_not_depend_on_a_call_having_been_made(tmp_path: Path) -> None:
    graph = build_graph(
        parse_workflow(textwrap.dedent(WF).lstrip(), str(tmp_path / "workflow.yaml")),
        check_files=False,
    )
    fresh = CallFactory(graph, RunPaths(tmp_path / "run"), launch=TaskLaunch(mpi_launcher="mpirun"))
    expected = [fresh.fingerprint(inst) for inst in graph.instances]
    assert len(set(expected)) == len(expected)

    factory = CallFactory(
        graph, RunPaths(tmp_path / "run"), launch=TaskLaunch(mpi_launcher="mpirun")
    )
    calls = [factory.call(inst, 1) for inst in graph.instances]
    assert calls[0].env and calls[0].env["HPCFLOW_RANKS"] == "2"  # the call's own env...
    assert [factory.fingerprint(inst) for inst in graph.instances] == expected  # ...not hashed
    assert not factory._fingerprints  # each kept rendering is used once

    factory.call(graph.instances[2], 2)
    factory.forget(graph.instances[2])  # a failed attempt: nothing kept
    assert not factory._fingerprints
    assert factory.fingerprint(graph.instances[2]) == expected[2]


LOCAL_MPI = """
name: mpi
tasks:
  - name: small
    resources: {ranks: 2}
    argv: [./solver]
  - name: wide
    resources: {ranks: 4}
    argv: [./solver]
  - name: spread
    resources: {ranks: 2, nodes: 2}
    argv: [./solver]
"""


def test_an_mpi_task_that_fits_one_worker_starts_on_its_node_and_holds_its_ranks(
    tmp_path: Path,
) -> None:
    """With the profile's local_mpi_launch, an MPI task of one node and at most one
    worker's slots starts in the worker's own process tree (no batch-system step) and
    holds a slot per rank; a wider one, or one over several nodes, is still a step that
    holds only its cpus on the worker."""
    graph = build_graph(
        parse_workflow(LOCAL_MPI.lstrip(), str(tmp_path / "workflow.yaml")), check_files=False
    )
    factory = CallFactory(
        graph,
        RunPaths(tmp_path / "run"),
        launch=TaskLaunch(
            mpi_launcher="srun",
            local_mpi_launch=["mpirun", "--mca", "plm", "isolated"],
            local_mpi_ranks=2,
        ),
    )
    small, wide, spread = graph.instances
    assert factory.call(small, 1).argv == ["mpirun", "--mca", "plm", "isolated", "-n", "2",
                                           "./solver"]  # fmt: skip
    for inst in (wide, spread):
        assert factory.call(inst, 1).argv[:2] == ["srun", "--overlap"], inst.id
    held = [factory.held_cpus(graph.template(inst).resources) for inst in graph.instances]
    assert held == [2, 1, 1]
    # Without the setting: every MPI task is a step.
    plain = CallFactory(graph, RunPaths(tmp_path / "run"), launch=TaskLaunch(mpi_launcher="srun"))
    assert plain.call(small, 1).argv[0] == "srun"
    assert plain.held_cpus(graph.template(small).resources) == 1


def test_fingerprint_text_is_json_dumps_of_the_payload():
    """Fingerprints hash what json.dumps(payload, sort_keys=True) writes; _json_text
    writes it without an encoder per task, and must write the same text (else every task
    of every earlier run would run again once)."""
    import json

    from hpcflow.engine.calls_factory import _json_text

    class Text(str):
        pass

    payloads: list[list[object]] = [
        ["shell", "echo 1 > out_1.txt", None, None, None, {}, "/a/b", ("/a/b/out_1.txt",)],
        ["argv", None, ["a", "b é", "\u2603", "\x00\n\"\\"], None, None, {"B": "1", "A": "2"},
         "/x", []],
        ["python", None, None, "m:f", {"x": 1, "y": [1, 2.5, True, None], "z": "é"}, {}, "/w",
         ["o", "p"], ["software", "a", 1]],
        ["shell", "", [], None, None, {}, "", ["\udc80"],
         {"b": ["value", ["t[i=1]"]], "a": ["list", []]}],
        [Text("x"), [Text("y"), 1], (1, "a"), ["a", None], [["a"]], True, 1.5],
    ]  # fmt: skip
    for payload in payloads:
        assert _json_text(payload) == json.dumps(payload, sort_keys=True)
