"""Where values may take a task's paths (:mod:`hpcflow.dag.confine`): the cases the
security test (tests/security/test_path_escape.py) does not run through the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcflow.dag.confine import MAX_REPORTED
from hpcflow.dag.graph import build_graph
from hpcflow.errors import SpecError
from hpcflow.spec.loader import load_workflow
from tests.conftest import write_workflow


def _refusals(wf: Path) -> list[str]:
    with pytest.raises(SpecError) as caught:
        build_graph(load_workflow(wf), check_files=False)
    return [p.render() for p in caught.value.problems]


def test_a_workdir_and_an_input_that_values_lead_out_are_refused_at_their_lines(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "wf"
    wf = write_workflow(
        folder,
        f"""\
name: w
tasks:
  - name: t
    foreach: {{sample: [ok, ../out, "{tmp_path}/abs"]}}
    workdir: "{{sample}}"
    command: "true"
  - name: u
    foreach: {{sample: [ok, "{tmp_path}/abs"]}}
    inputs: ["{{sample}}.txt"]
    command: "true"
""",
    )
    lines = "\n".join(_refusals(wf))
    assert f"{wf}:5:14: tasks[0].workdir: a value leads workdir of t[sample=../out]" in lines
    # (A workdir's value is joined below the workflow's folder, even an absolute one.)
    assert "t[sample=" + str(tmp_path) not in lines
    assert f"{wf}:9:14: tasks[1].inputs[0]: a value leads input of u[sample={tmp_path}/abs]" in (
        lines
    )
    assert "u[sample=ok]" not in lines and "t[sample=ok]" not in lines


def test_paths_found_by_an_absolute_from_files_pattern_stay_allowed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for name in ("a.fq", "b.fq"):
        (data / name).write_text("x")
    wf = write_workflow(
        tmp_path / "wf",
        f"""\
name: w
tasks:
  - name: t
    foreach: {{from_files: {{glob: "{data}/{{s}}.fq", path: fq}}}}
    inputs: ["{{fq}}"]
    outputs: ["out/{{s}}.txt"]
    command: "true"
""",
    )
    graph = build_graph(load_workflow(wf))
    assert sorted(i.inputs[0] for i in graph.instances) == [str(data / "a.fq"), str(data / "b.fq")]


def test_numbers_need_no_check_and_many_refusals_are_summed_up(tmp_path: Path) -> None:
    cells = "".join(f"../x{i}\n" for i in range(MAX_REPORTED + 5))
    (tmp_path / "s.csv").write_text("name\n" + cells)
    wf = write_workflow(
        tmp_path,
        """\
name: w
tasks:
  - name: numbers
    foreach: {i: {range: [-3, 1000]}, f: [0.5, 1e300, true]}
    outputs: ["out/{i}/{f}.txt"]
    command: "true"
  - name: texts
    foreach: {from_table: s.csv}
    outputs: ["{name}.txt"]
    command: "true"
""",
    )
    lines = _refusals(wf)
    assert len(lines) == MAX_REPORTED + 1
    assert all("texts[name=../x" in line for line in lines[:-1])
    assert lines[-1].endswith("... and 5 more paths that values lead outside")
