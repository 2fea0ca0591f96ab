"""Fan-out planned at run time, in the graph: which tasks wait (a sweep over files a task
makes, and what needs, receives from or reads the files of a waiting task), the edges
they get once planned, and a grown graph's numbering."""

from __future__ import annotations

from pathlib import Path

from hpcflow.dag.graph import _overlap, build_graph, renumbered
from hpcflow.dag.render import render_text
from hpcflow.spec.loader import load_workflow
from tests.conftest import write_workflow

WF = """
name: fan
tasks:
  - name: split
    command: split
  - name: count
    foreach:
      from_files: {glob: "chunks/{n}.txt", after: split}
      seed: [1, 2]
    command: count {n} {seed}
    outputs: ["counts/{n}_{seed}.txt"]
  - name: measure
    foreach: {from_files: {glob: "chunks/{n}.txt", after: split}}
    python: m:measure
  - name: sum
    python: m:f
    from: {values: measure}
  - name: gather
    inputs: ["counts/*.txt"]
    command: cat {inputs}
  - name: after_gather
    needs: [gather]
    command: x
  - name: unrelated
    inputs: ["data/*.txt"]
    command: y
"""


def _chunks(folder: Path, *names: str) -> None:
    (folder / "chunks").mkdir(exist_ok=True)
    for name in names:
        (folder / "chunks" / f"{name}.txt").write_text(name)


def test_what_waits_for_a_fan_out_and_why(tmp_path):
    wf = write_workflow(tmp_path, WF)
    _chunks(tmp_path, "a")  # there already: not read until split has made its files
    graph = build_graph(load_workflow(wf), check_files=False)
    assert [i.id for i in graph.instances] == ["split", "unrelated"]
    names = {graph.templates[i].spec.name: why for i, why in graph.waiting.items()}
    assert names == {
        "count": "its instances are known when split ends",
        "measure": "its instances are known when split ends",
        "sum": "waits for measure, not planned yet",
        "gather": "waits for count, not planned yet",
        "after_gather": "waits for gather, not planned yet",
    }
    text = render_text(graph)
    assert "gather (not planned yet: waits for count, not planned yet)  ← count" in text


def test_once_split_has_made_its_files_the_sweep_is_planned_with_its_edges(tmp_path):
    wf = write_workflow(tmp_path, WF)
    _chunks(tmp_path, "b", "a")
    graph = build_graph(load_workflow(wf, frozenset({"split"})), check_files=False)
    assert graph.waiting == {}
    ids = [i.id for i in graph.instances]
    assert ids[:5] == ["split", "count[n=a,seed=1]", "count[n=a,seed=2]",
                       "count[n=b,seed=1]", "count[n=b,seed=2]"]  # fmt: skip
    by_id = {i.id: i for i in graph.instances}
    # The sweep waits for every instance of the task whose files it reads.
    assert by_id["count[n=a,seed=2]"].deps == [0]
    assert sorted(graph.instances[d].id for d in by_id["gather"].deps) == ids[1:5]
    assert [graph.instances[p].id for p in by_id["sum"].values["values"].producers] == [
        "measure[n=a]",
        "measure[n=b]",
    ]

    # A grown run keeps its numbers: the instances planned first come first.
    grown = renumbered(graph, ["split", "unrelated"])
    assert [i.id for i in grown.instances][:3] == ["split", "unrelated", "count[n=a,seed=1]"]
    moved = {i.id: i for i in grown.instances}
    assert moved["gather"].deps == [2, 3, 4, 5]
    producers = moved["sum"].values["values"].producers
    assert [grown.instances[p].id for p in producers] == ["measure[n=a]", "measure[n=b]"]
    assert grown.order.index(0) < grown.order.index(2) < grown.order.index(moved["gather"].index)


def test_file_patterns_that_may_name_a_waiting_task_s_outputs():
    assert _overlap("/w/counts/*.txt", "/w/counts/*_*.txt")
    assert _overlap("/w/counts/a_1.txt", "/w/counts/*_*.txt")
    assert not _overlap("/w/data/*.txt", "/w/counts/*_*.txt")
    assert not _overlap("/w/counts/a.csv", "/w/counts/*_*.txt")
    assert _overlap("/w/c*", "/w/counts/*.txt")  # both globs: their fixed starts decide


def test_an_include_renames_the_task_a_sweep_reads_files_after(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "workflow.yaml").write_text(
        "name: sub\ntasks:\n  - name: split\n    command: s\n"
        "  - name: count\n    foreach: {from_files: {glob: 'c/{n}', after: split}}\n"
        "    command: c {n}\n"
    )
    wf = write_workflow(tmp_path, "name: m\ninclude: {q: sub}\n")
    loaded = load_workflow(wf)
    assert loaded.waiting == {"q.count": ("q.split",)}


def test_a_grown_run_that_lost_a_task_it_numbered_is_refused(tmp_path):
    import shutil

    import pytest

    from hpcflow.engine.fanout import _grown_graph
    from hpcflow.errors import RunError
    from hpcflow.store.paths import RunPaths

    wf = write_workflow(tmp_path, WF)
    _chunks(tmp_path, "a")
    paths = RunPaths(tmp_path / "run")
    paths.run_dir.mkdir()
    shutil.copyfile(wf, paths.workflow_copy)
    graph = build_graph(load_workflow(wf), check_files=False)
    grown = _grown_graph(graph, paths, frozenset({"split"}), ["split", "unrelated"])
    assert [i.id for i in grown.instances][:3] == ["split", "unrelated", "count[n=a,seed=1]"]
    with pytest.raises(RunError, match="lost some of its tasks"):
        _grown_graph(graph, paths, frozenset({"split"}), ["split", "gone", "unrelated"])
