"""Includes: an included workflow's tasks join the including one under a name, with the
include's parameters and the included file's own defaults; every error points into the
file the text came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcflow.dag.graph import build_graph
from hpcflow.dag.instances import templates_for
from hpcflow.errors import SpecError
from hpcflow.spec.loader import load_workflow, parse_workflow

QC = """\
name: qc
workdir: qc_out
defaults:
  resources: {cpus: 2, memory: 1GB}
  env: {LEVEL: strict}
  retries: 2
tasks:
  - name: trim
    params: {sample: none, quality: 20}
    command: trim {sample} {quality}
    outputs: ["trim_{sample}.txt"]
  - name: count
    python: qcstats:count
    params: {sample: none}
  - name: stats
    python: qcstats:stats
    from: {counted: count}
  - name: report
    command: report {sample} {title}
    needs: [trim]
    resources: {cpus: 1}
    env: {LEVEL: lax}
"""


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    # Error messages name files as the user gave them: relative to here.
    monkeypatch.chdir(tmp_path)


def _errors(path: Path) -> list[str]:
    with pytest.raises(SpecError) as caught:
        load_workflow(path.relative_to(Path.cwd()))
    return [p.render() for p in caught.value.problems]


def test_an_include_twice_with_different_parameters(tmp_path):
    _write(tmp_path, "qc/workflow.yaml", QC)
    main = _write(
        tmp_path,
        "main.yaml",
        """\
name: main
defaults:
  timeout: 1h
  env: {LEVEL: outer, EXTRA: "1"}
include:
  qc_a: {file: qc, params: {sample: a, title: A}}
  qc_b: {file: qc/workflow.yaml, params: {sample: b, title: B, quality: 30}}
tasks:
  - name: summary
    command: cat
    needs: [qc_a.report, qc_b.report]
""",
    )
    loaded = load_workflow(main)
    tasks = {t.name: t for t in loaded.workflow.tasks}
    assert list(tasks) == ["summary", "qc_a.trim", "qc_a.count", "qc_a.stats", "qc_a.report",
                           "qc_b.trim", "qc_b.count", "qc_b.stats", "qc_b.report"]  # fmt: skip
    # Names inside the included file are renamed with it.
    assert tasks["qc_a.report"].needs == ["qc_a.trim"]
    assert tasks["qc_b.stats"].from_["counted"].task == "qc_b.count"
    # The include's parameters replace the tasks' own values and fill open placeholders;
    # a python task gets only those it declares.
    assert tasks["qc_a.trim"].params == {"sample": "a", "quality": 20}
    assert tasks["qc_b.trim"].params == {"sample": "b", "quality": 30}
    assert tasks["qc_a.report"].params == {"sample": "a", "title": "A"}
    assert tasks["qc_b.count"].params == {"sample": "b"}
    assert tasks["qc_b.stats"].params == {}
    templates = {t.spec.name: t for t in templates_for(loaded)}
    # The included file's defaults apply to its tasks; the task's own values win; the
    # including workflow's defaults fill in only what neither sets.
    trim, report, summary = templates["qc_a.trim"], templates["qc_a.report"], templates["summary"]
    assert (trim.resources.cpus, trim.resources.memory) == (2, 1024**3)
    assert (report.resources.cpus, report.resources.memory) == (1, 1024**3)
    assert trim.env["LEVEL"] == "strict" and report.env["LEVEL"] == "lax"
    assert trim.env["EXTRA"] == "1" and summary.env["LEVEL"] == "outer"
    assert trim.retries.attempts == 2 and summary.retries.attempts == 0
    assert trim.timeout == 3600
    # Tasks run under the including workflow's folder, in the included file's workdir;
    # $HPCFLOW_INCLUDE_DIR is the included file's folder.
    assert trim.env["HPCFLOW_INCLUDE_DIR"] == str(tmp_path / "qc")
    assert "HPCFLOW_INCLUDE_DIR" not in summary.env
    graph = build_graph(loaded, check_files=False)
    by_id = {inst.id: inst for inst in graph.instances}
    assert by_id["qc_a.trim"].workdir == str(tmp_path / "qc_out")
    assert by_id["qc_b.trim"].outputs == (str(tmp_path / "qc_out" / "trim_b.txt"),)
    assert loaded.included == {str(tmp_path / "qc" / "workflow.yaml"): QC}


def test_includes_nest_and_their_names_chain(tmp_path):
    _write(tmp_path, "inner/workflow.yaml", "name: inner\ntasks:\n  - name: t\n    command: x\n")
    _write(
        tmp_path,
        "outer/workflow.yaml",
        "name: outer\ninclude: {deep: ../inner}\n"
        "tasks:\n  - name: u\n    command: y\n    needs: [deep.t]\n",
    )
    main = _write(tmp_path, "main.yaml", "name: m\ninclude: {o: outer}\n")
    loaded = load_workflow(main)
    assert [t.name for t in loaded.workflow.tasks] == ["o.u", "o.deep.t"]
    assert loaded.workflow.tasks[0].needs == ["o.deep.t"]
    # The innermost file's folder, not the file that included it.
    assert templates_for(loaded)[1].env["HPCFLOW_INCLUDE_DIR"] == str(tmp_path / "inner")


def test_errors_point_into_the_included_file_once(tmp_path):
    _write(
        tmp_path,
        "qc/workflow.yaml",
        """\
name: qc
tasks:
  - name: trim
    command: trim {sample} {missing}
  - name: report
    command: report
    needs: [trimm]
    bogus: 1
""",
    )
    main = _write(
        tmp_path,
        "main.yaml",
        "name: m\ninclude:\n"
        "  a: {file: qc, params: {sample: a}}\n  b: {file: qc, params: {sample: b}}\n",
    )
    # Shapes first: the unknown key, at its line in qc/workflow.yaml, with its own path
    # there; once though the file is included twice.
    assert _errors(main) == [
        "qc/workflow.yaml:8:5: tasks[1].bogus: unknown key 'bogus'\n"
        "    hint: allowed keys: argv, checkpoint, command, conda, container, description, "
        "env, foreach, from, inputs, modules, name, needs, outputs, params, persist, python, "
        "resources, retries, scratch, timeout, venv, workdir"
    ]
    qc = tmp_path / "qc/workflow.yaml"
    qc.write_text(qc.read_text().replace("    bogus: 1\n", ""))
    errors = _errors(main)
    assert "qc/workflow.yaml:4:14: tasks[0].command: undefined placeholder {missing}" in errors[0]
    assert any(
        e.startswith("qc/workflow.yaml:7:13: tasks[1].needs[0]: needs unknown task 'trimm'")
        for e in errors
    ), errors


def test_include_mistakes_in_the_including_file(tmp_path):
    _write(tmp_path, "qc/workflow.yaml", QC)
    main = _write(
        tmp_path,
        "main.yaml",
        """\
name: m
include:
  a: {file: nowhere.yaml}
  b: {file: qc, params: {sampel: x}}
  c.d: qc
  e: {file: qc, parms: {}}
tasks:
  - name: t
    command: x
""",
    )
    errors = _errors(main)
    assert errors[0].startswith("main.yaml:5:3: include.c.d: 'c.d' is not an include name")
    assert errors[1].startswith("main.yaml:6:17: include.e.parms: unknown key 'parms'")
    assert "hint: did you mean 'params'?" in errors[1]
    main.write_text(main.read_text().replace("  c.d: qc\n", "").replace(", parms: {}", ""))
    errors = _errors(main)
    assert errors[0] == "main.yaml:3:13: include.a.file: include 'a': no such file nowhere.yaml"
    assert errors[1].startswith(
        "main.yaml:4:26: include.b.params.sampel: no task of 'qc' uses parameter 'sampel'"
    )
    assert "its tasks' parameters: quality, sample" in errors[1]


def test_a_cycle_of_includes_is_reported(tmp_path):
    _write(
        tmp_path, "a/workflow.yaml", "name: a\ninclude: {b: ../b}\ntasks: [{name: x, command: x}]\n"
    )
    _write(
        tmp_path, "b/workflow.yaml", "name: b\ninclude: {a: ../a}\ntasks: [{name: y, command: y}]\n"
    )
    main = _write(tmp_path, "main.yaml", "name: m\ninclude: {a: a}\n")
    (error,) = _errors(main)
    a, b = tmp_path / "a/workflow.yaml", tmp_path / "b/workflow.yaml"
    assert error == f"b/workflow.yaml:2:14: include.a: include 'a' makes a cycle: {a} → {b} → {a}"
    # Including itself.
    main.write_text("name: m\ninclude: {me: main.yaml}\n")
    (error,) = _errors(main)
    assert "include 'me' makes a cycle" in error


def test_a_sweep_parameter_given_by_an_include_is_refused_at_the_include(tmp_path):
    _write(
        tmp_path,
        "qc/workflow.yaml",
        "name: qc\ntasks:\n  - name: t\n    foreach: {sample: [a, b]}\n    command: x {sample}\n",
    )
    main = _write(
        tmp_path, "main.yaml", "name: m\ninclude:\n  q: {file: qc, params: {sample: c}}\n"
    )
    (error,) = _errors(main)
    assert error.startswith(
        "main.yaml:3:26: include.q.params.sample: parameter 'sample' is both swept"
    )


def test_a_run_reads_the_included_files_it_was_planned_with(tmp_path):
    qc = _write(tmp_path, "qc/workflow.yaml", QC)
    main = _write(
        tmp_path, "main.yaml", "name: m\ninclude: {q: {file: qc, params: {sample: s, title: T}}}\n"
    )
    planned = load_workflow(main)
    qc.write_text('name: changed\ntasks: [{name: other, command: "x {sample} {title}"}]\n')
    again = parse_workflow(
        main.read_text(), str(main), source=main.resolve(), frozen_includes=planned.included
    )
    assert [t.name for t in again.workflow.tasks] == ["q.trim", "q.count", "q.stats", "q.report"]
    assert [t.name for t in load_workflow(main).workflow.tasks] == ["q.other"]
    # A node that does not see the included folder at all still plans the same tasks.
    qc.unlink()
    qc.parent.rmdir()
    again = parse_workflow(
        main.read_text(), str(main), source=main.resolve(), frozen_includes=planned.included
    )
    assert [t.name for t in again.workflow.tasks] == ["q.trim", "q.count", "q.stats", "q.report"]
