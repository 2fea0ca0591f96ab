"""A task's fingerprint is the same whether call() rendered it just before or not."""

from __future__ import annotations

import textwrap
from pathlib import Path

from hpcflow.dag import build_graph
from hpcflow.engine.calls_factory import CallFactory
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
    fresh = CallFactory(graph, RunPaths(tmp_path / "run"), mpi_launcher="mpirun")
    expected = [fresh.fingerprint(inst) for inst in graph.instances]
    assert len(set(expected)) == len(expected)

    factory = CallFactory(graph, RunPaths(tmp_path / "run"), mpi_launcher="mpirun")
    calls = [factory.call(inst, 1) for inst in graph.instances]
    assert calls[0].env and calls[0].env["HPCFLOW_RANKS"] == "2"  # the call's own env...
    assert [factory.fingerprint(inst) for inst in graph.instances] == expected  # ...not hashed
    assert not factory._fingerprints  # each kept rendering is used once

    factory.call(graph.instances[2], 2)
    factory.forget(graph.instances[2])  # a failed attempt: nothing kept
    assert not factory._fingerprints
    assert factory.fingerprint(graph.instances[2]) == expected[2]
