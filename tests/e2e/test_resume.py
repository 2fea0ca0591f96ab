"""Resume: only tasks whose command, inputs or outputs changed run again."""

from __future__ import annotations

import re

from tests.conftest import write_workflow

WF = """
name: chain
tasks:
  - name: make
    foreach: {{i: {{range: [0, 4]}}}}
    command: echo {{i}}{suffix} > {{outputs}}
    outputs: ["data/{{i}}.txt"]
  - name: join
    inputs: ["data/*.txt"]
    command: cat {{inputs}} > {{outputs}}
    outputs: [joined.txt]
  - name: tail
    needs: [join]
    command: wc -l < joined.txt > {{outputs}}
    outputs: [count.txt]
"""


def ran(result) -> int:
    match = re.search(r"(\d+) ran, (\d+) up to date", result.stdout)
    assert match, result.output
    return int(match.group(1))


def test_resume_rules(tmp_path, hpcflow):
    wf = write_workflow(tmp_path, WF.format(suffix=""))
    assert ran(hpcflow("run", str(wf), "-q")) == 6
    assert ran(hpcflow("run", str(wf), "-q")) == 0

    # A changed input file re-runs its consumers (join, then tail), nothing upstream.
    (tmp_path / "data" / "2.txt").write_text("changed\n")
    # ...but the producer's own output changed too, so make[i=2] re-runs first.
    assert ran(hpcflow("run", str(wf), "-q")) == 3

    # A changed command re-runs that task definition and everything downstream.
    write_workflow(tmp_path, WF.format(suffix="x"))
    assert ran(hpcflow("run", str(wf), "-q")) == 6
    assert (tmp_path / "data" / "0.txt").read_text() == "0x\n"

    # --rerun by pattern, and --force.
    assert ran(hpcflow("run", str(wf), "-q", "--rerun", "tail")) == 1
    assert ran(hpcflow("run", str(wf), "-q", "--rerun", "make[i=1]")) == 3
    assert ran(hpcflow("run", str(wf), "-q", "--force")) == 6

    # A deleted output re-runs its producer and dependents.
    (tmp_path / "count.txt").unlink()
    assert ran(hpcflow("run", str(wf), "-q")) == 1


def test_dry_run_runs_nothing(tmp_path, hpcflow):
    wf = write_workflow(tmp_path, WF.format(suffix=""))
    result = hpcflow("run", str(wf), "--dry-run")
    assert result.returncode == 0, result.output
    assert "6 of 6 tasks would run" in result.stdout
    assert "make" in result.stdout and "join" in result.stdout
    assert not (tmp_path / "joined.txt").exists()
    assert not (tmp_path / ".hpcflow" / "runs").exists()


def test_sweeps_over_files_and_a_sample_sheet_resume_by_instance(tmp_path, hpcflow):
    """An instance per input file and per sheet row: a new file, or a new row, runs only
    its own instances (and what needs them); the run directory keeps what was read."""
    (tmp_path / "reads").mkdir()
    for name in ("a_R1", "a_R2", "b_R1"):
        (tmp_path / "reads" / f"{name}.fq").write_text(name + "\n")
    (tmp_path / "samples.tsv").write_text("sample\tgroup\na\tx\nb\ty\n")
    wf = write_workflow(
        tmp_path,
        """
name: sheet
tasks:
  - name: trim
    foreach: {from_files: {glob: "reads/{sample}_R{read}.fq", path: fq}}
    command: cat {fq} > {outputs}
    outputs: ["trimmed/{sample}_{read}.fq"]
  - name: label
    foreach: {from_table: samples.tsv}
    command: echo {sample} {group} > {outputs}
    outputs: ["labels/{sample}.txt"]
  - name: report
    inputs: ["trimmed/*.fq", "labels/*.txt"]
    command: cat {inputs} > {outputs}
    outputs: [report.txt]
""",
    )
    assert ran(hpcflow("run", str(wf), "-q")) == 6
    assert (tmp_path / "labels" / "b.txt").read_text() == "b y\n"
    (first,) = (tmp_path / ".hpcflow" / "runs").iterdir()
    assert '"trim/from_files"' in (first / "sources.json").read_text()
    (tmp_path / "reads" / "c_R1.fq").write_text("c_R1\n")
    with (tmp_path / "samples.tsv").open("a") as sheet:
        sheet.write("c\tx\n")
    # trim[c,1], label[c], and the report that reads them.
    assert ran(hpcflow("run", str(wf), "-q")) == 3
    assert "c_R1" in (tmp_path / "report.txt").read_text()
    assert ran(hpcflow("run", str(wf), "-q")) == 0
