"""Includes end to end: one QC sub-workflow included twice with different parameters
runs, resumes per include, and a changed included file re-runs only what it changed."""

from __future__ import annotations

from tests.conftest import write_workflow
from tests.e2e.test_resume import ran

QC = """\
name: qc
workdir: qc/{sample}
defaults:
  env: {LEVEL: strict}
tasks:
  - name: trim
    params: {sample: none, length: 5}
    command: printf '%s' "$(cat {inputs})" | cut -c1-{length} > {outputs}
    inputs: ["../../reads/{sample}.txt"]
    outputs: [trimmed.txt]
  - name: report
    command: bash "$HPCFLOW_INCLUDE_DIR/report.sh" {sample} > {outputs}
    inputs: [trimmed.txt]
    outputs: [report.txt]
"""

REPORT = 'echo "$1 $LEVEL $(cat trimmed.txt)"\n'

MAIN = """\
name: project
include:
  qc_a: {file: modules/qc, params: {sample: a}}
  qc_b: {file: modules/qc, params: {sample: b, length: 3}}
tasks:
  - name: summary
    inputs: ["qc/*/report.txt"]
    command: cat {inputs} > {outputs}
    outputs: [summary.txt]
"""


def test_a_sub_workflow_included_twice_runs_and_resumes(tmp_path, hpcflow):
    modules = tmp_path / "modules" / "qc"
    modules.mkdir(parents=True)
    (modules / "workflow.yaml").write_text(QC)
    (modules / "report.sh").write_text(REPORT)
    (tmp_path / "reads").mkdir()
    (tmp_path / "reads" / "a.txt").write_text("AAAAAAAAAA")
    (tmp_path / "reads" / "b.txt").write_text("BBBBBBBBBB")
    wf = write_workflow(tmp_path, MAIN)

    dag = hpcflow("dag", str(wf)).stdout
    assert "summary  ← qc_a.report, qc_b.report" in dag
    assert ran(hpcflow("run", str(wf), "-q")) == 5
    assert (tmp_path / "summary.txt").read_text() == "a strict AAAAA\nb strict BBB\n"
    assert ran(hpcflow("run", str(wf), "-q")) == 0
    status = hpcflow("status", cwd=tmp_path).stdout
    assert "qc_a.trim" in status and "qc_b.report" in status

    # A parameter of one include changes: its tasks and what reads them run again.
    write_workflow(tmp_path, MAIN.replace("length: 3", "length: 4"))
    assert ran(hpcflow("run", str(wf), "-q")) == 3
    assert (tmp_path / "summary.txt").read_text() == "a strict AAAAA\nb strict BBBB\n"

    # The included file changes: its changed task runs again in both includes.
    (modules / "workflow.yaml").write_text(
        QC.replace("{sample} > {outputs}", "{sample}-x > {outputs}")
    )
    assert ran(hpcflow("run", str(wf), "-q")) == 3
    assert (tmp_path / "summary.txt").read_text() == "a-x strict AAAAA\nb-x strict BBBB\n"
    # ...and its defaults are part of each of its tasks.
    (modules / "workflow.yaml").write_text(QC.replace("LEVEL: strict", "LEVEL: lax"))
    assert ran(hpcflow("run", str(wf), "-q")) == 5

    # A mistake in the included file: the error names it, with its line; nothing runs.
    broken = QC.replace("name: report", "name: report\n    bogus: 1")
    (modules / "workflow.yaml").write_text(broken)
    failed = hpcflow("run", str(wf), "-q")
    assert failed.returncode == 2
    assert "modules/qc/workflow.yaml:12:5: tasks[1].bogus: unknown key 'bogus'" in failed.output
    assert "Traceback" not in failed.output
