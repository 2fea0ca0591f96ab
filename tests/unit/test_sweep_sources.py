"""Sweeps over files and sample sheets (``from_files``, ``from_table``): the instances they
make, how they combine with other swept parameters, and their errors, each naming the
file and line at fault."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcflow.dag.graph import build_graph
from hpcflow.errors import SpecError
from hpcflow.spec.loader import load_workflow, parse_workflow
from tests.conftest import write_workflow


def _ids(wf: Path) -> list[str]:
    return [inst.id for inst in build_graph(load_workflow(wf), check_files=False).instances]


def _errors(wf: Path) -> list[str]:
    with pytest.raises(SpecError) as caught:
        load_workflow(wf)
    return [p.render() for p in caught.value.problems]


def _files(folder: Path, *names: str) -> None:
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("x")


def test_files_make_an_instance_each_with_their_captures_and_path(tmp_path):
    _files(tmp_path, "data/b_R1.fq", "data/a_R2.fq", "data/a_R1.fq", "data/notes.txt",
           "data/sub/c_R1.fq", "data/x_R1_R1.fq")  # fmt: skip
    wf = write_workflow(
        tmp_path,
        """
name: files
tasks:
  - name: reads
    foreach:
      from_files: {glob: "data/{sample}_R{read}.fq", path: file}
    command: "true"
""",
    )
    # Sorted by path; a capture never spans a '/'; other files are not matched.
    assert _ids(wf) == [
        "reads[sample=a,read=1,file=data/a_R1.fq]",
        "reads[sample=a,read=2,file=data/a_R2.fq]",
        "reads[sample=b,read=1,file=data/b_R1.fq]",
        "reads[sample=x_R1,read=1,file=data/x_R1_R1.fq]",
    ]


def test_the_same_capture_twice_must_match_the_same_text(tmp_path):
    _files(tmp_path, "a/a.txt", "a/b.txt", "b/b.txt")
    wf = write_workflow(
        tmp_path, 'name: twice\ntasks:\n  - name: t\n    foreach: {from_files: "{s}/{s}.txt"}\n'
        '    command: "true"\n',
    )  # fmt: skip
    assert _ids(wf) == ["t[s=a]", "t[s=b]"]


@pytest.mark.parametrize(
    "name, text",
    [
        ("samples.csv", "sample,condition\na,treated\nb,control\n\nc,treated\n"),
        ("samples.tsv", "sample\tcondition\na\ttreated\nb\tcontrol\nc\ttreated\n"),
        ("samples.json", json.dumps([{"sample": s, "condition": c} for s, c in
                                     [("a", "treated"), ("b", "control"), ("c", "treated")]])),
        ("samples.yaml", "- {sample: a, condition: treated}\n- {sample: b, condition: control}\n"
                         "- {sample: c, condition: treated}\n"),
    ],
)  # fmt: skip
def test_a_sample_sheet_makes_an_instance_per_row_filtered_and_combined(tmp_path, name, text):
    (tmp_path / name).write_text(text)
    wf = write_workflow(
        tmp_path,
        f"""
name: sheet
tasks:
  - name: all
    foreach: {{from_table: {name}}}
    command: "true"
  - name: treated
    foreach:
      product: {{seed: [1, 2]}}
      from_table: {{path: {name}, where: {{condition: [treated]}}, columns: [sample]}}
    command: "true"
""",
    )
    ids = _ids(wf)
    assert ids[:3] == [
        "all[sample=a,condition=treated]",
        "all[sample=b,condition=control]",
        "all[sample=c,condition=treated]",
    ]
    # The rows' columns advance together, as a product with the other swept parameters.
    assert sorted(ids[3:]) == [
        "treated[sample=a,seed=1]", "treated[sample=a,seed=2]",
        "treated[sample=c,seed=1]", "treated[sample=c,seed=2]",
    ]  # fmt: skip


def test_sheet_errors_name_the_file_line_and_row_and_the_task_that_reads_it(tmp_path):
    (tmp_path / "ragged.csv").write_text("sample,condition\na,treated\nb\n")
    (tmp_path / "header.tsv").write_text("sample\tbad name\na\tx\n")
    (tmp_path / "rows.yaml").write_text("- {sample: a, depth: 1}\n- {sample: b}\n")
    (tmp_path / "good.csv").write_text("sample,condition\na,treated\n")
    wf = write_workflow(
        tmp_path,
        """
name: bad
tasks:
  - name: t1
    foreach: {from_table: ragged.csv}
    command: "true"
  - name: t2
    foreach: {from_table: header.tsv}
    command: "true"
  - name: t3
    foreach: {from_table: rows.yaml}
    command: "true"
  - name: t4
    foreach: {from_table: {path: good.csv, where: {cond: x}}}
    command: "true"
  - name: t5
    foreach: {from_table: missing.tsv}
    command: "true"
  - name: t6
    foreach: {from_table: notes.txt}
    command: "true"
""",
    )
    (tmp_path / "notes.txt").write_text("x")
    errors = "\n".join(_errors(wf))
    assert "ragged.csv:3: row 2: has 1 fields, the header has 2" in errors
    assert "read by tasks[0].foreach.from_table (" in errors and "workflow.yaml:5)" in errors
    assert "header.tsv:1: header: column 'bad name' cannot be a parameter name" in errors
    assert "rows.yaml:2:3: [1]: row 2 does not have the columns of the first row" in errors
    assert "workflow.yaml:14:" in errors  # t4's where
    assert "good.csv has no column 'cond'" in errors
    assert "cannot read" in errors and "missing.tsv: no such file" in errors
    assert "cannot tell what kind of table notes.txt is" in errors


def test_pattern_errors_and_a_source_with_nothing_in_it(tmp_path):
    (tmp_path / "empty.csv").write_text("sample,condition\na,control\n")
    wf = write_workflow(
        tmp_path,
        """
name: bad
tasks:
  - name: none
    foreach: {from_files: "data/{sample}.fq"}
    command: "true"
  - name: badname
    foreach: {from_files: "data/{a b}.fq"}
    command: "true"
  - name: nothing
    foreach: {from_files: "data/plain.fq"}
    command: "true"
  - name: filtered
    foreach: {from_table: {path: empty.csv, where: {condition: treated}}}
    command: "true"
  - name: clash
    foreach: {from_files: {glob: "{sample}.csv", path: sample}}
    command: "true"
""",
    )
    errors = "\n".join(_errors(wf))
    assert "workflow.yaml:5:" in errors and "no file matches 'data/{sample}.fq'" in errors
    assert "{a b} in the pattern is not a parameter name" in errors
    assert "the pattern 'data/plain.fq' captures nothing" in errors
    assert "no row is left in 'empty.csv'" in errors
    assert "'sample' is also a capture of the pattern" in errors


def test_what_was_read_is_kept_and_used_instead_of_the_files(tmp_path):
    """A run's allocations rebuild its instances from what was read when it was planned,
    whatever the folder holds by then."""
    _files(tmp_path, "in/a.txt", "in/b.txt")
    wf = write_workflow(
        tmp_path, 'name: k\ntasks:\n  - name: t\n    foreach: {from_files: "in/{s}.txt"}\n'
        '    command: "true"\n',
    )  # fmt: skip
    loaded = load_workflow(wf)
    assert loaded.sources == {"t/from_files": {"names": ["s"], "rows": [["a"], ["b"]]}}
    _files(tmp_path, "in/c.txt")
    again = parse_workflow(wf.read_text(), str(wf), source=wf, frozen_sources=loaded.sources)
    assert [i.id for i in build_graph(again, check_files=False).instances] == ["t[s=a]", "t[s=b]"]
    assert _ids(wf) == ["t[s=a]", "t[s=b]", "t[s=c]"]  # read afresh: the new file too
