"""The Python API's builder: a workflow built in code is the document a workflow file
holds and the same plan; its errors are the loader's, at the Python call that made the
offending part; functions become ``module:qualname`` or a clear refusal."""

from __future__ import annotations

import inspect
import subprocess
import sys
import types
import typing
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
import yaml

import hpcflow
import hpcflow.api
from hpcflow.api import Workflow
from hpcflow.api.callables import NotImportable, reference
from hpcflow.api.launch import ProfileOverrides, RunRequest
from hpcflow.dag.graph import TaskGraph, build_graph
from hpcflow.errors import RunError, SpecError
from hpcflow.spec import models
from hpcflow.spec.loader import parse_workflow

HERE = __file__


def make(seed: int, model: str) -> list[int]:
    return [seed, len(model)]


def gather(runs: dict[object, list[int]], label: str) -> int:
    return len(runs)


class Steps:
    @staticmethod
    def scale(x: int) -> int:
        return 2 * x


def _line() -> int:
    """The line of the caller's next line."""
    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return frame.f_back.f_lineno + 1


def _errors(wf: Workflow) -> list[str]:
    """The problems ``wf.validate()`` reports, rendered as the command line prints them."""
    with pytest.raises(SpecError) as caught:
        wf.validate()
    return [p.render() for p in caught.value.problems]


def _plan(graph: TaskGraph) -> list[tuple[object, ...]]:
    """What makes two plans the same: instances, their parameters, files, dependencies
    and values received, and each definition's resolved settings."""
    templates = [
        (t.spec.name, t.resources, t.retries, t.timeout, t.env, t.software, t.checkpoint)
        for t in graph.templates
    ]
    instances = [
        (
            i.id,
            i.params,
            i.workdir,
            i.outputs,
            i.input_patterns,
            sorted(i.deps),
            {k: (v.shape, v.producers, v.keys) for k, v in i.values.items()},
        )
        for i in graph.instances
    ]
    return [*templates, *instances, tuple(graph.order)]


SAME_YAML = """\
name: same
workdir: work
defaults:
  resources: {cpus: 2, memory: 1GB}
  retries: {attempts: 2, backoff: 5s}
  env: {OMP_NUM_THREADS: "1"}
include:
  qc: {file: qc/workflow.yaml, params: {sample: s1}}
tasks:
  - name: prepare
    command: echo {level} > {outputs}
    params: {level: 3}
    outputs: [prepared.txt]
  - name: simulate
    foreach:
      product: {seed: {range: [0, 6, 2]}, model: [small, large]}
      zip: {alpha: [0.1, 0.2], beta: [1, 2]}
    python: test_api_workflow:make
    inputs: [prepared.txt]
    resources: {cpus: 4, walltime: 1h}
    timeout: 90
  - name: rows
    foreach: {from_table: samples.csv}
    argv: [wc, "{sample}"]
    needs: [prepare, qc.report]
    container: {image: img.sif, binds: [/data]}
  - name: summary
    python: test_api_workflow:gather
    params: {label: all}
    from:
      runs: {task: simulate, as: dict}
    persist: false
    retries: 1
    checkpoint: {before: 5m}
    modules: [gcc/12]
"""

QC_YAML = """\
name: qc
tasks:
  - name: trim
    params: {sample: none}
    command: trim {sample} > {outputs}
    outputs: ["trim_{sample}.txt"]
  - name: report
    command: report {sample}
    params: {sample: none}
    needs: [trim]
"""


def _same_in_python(folder: Path) -> Workflow:
    wf = Workflow(
        "same",
        folder=folder,
        workdir="work",
        defaults={
            "resources": {"cpus": 2, "memory": "1GB"},
            "retries": {"attempts": 2, "backoff": "5s"},
            "env": {"OMP_NUM_THREADS": "1"},
        },
    )
    qc = wf.include("qc", Path("qc/workflow.yaml"), params={"sample": "s1"})
    prepare = wf.task(
        "prepare", command="echo {level} > {outputs}", params={"level": 3}, outputs=["prepared.txt"]
    )
    simulate = wf.task(
        "simulate",
        foreach={
            "product": {"seed": range(0, 6, 2), "model": ("small", "large")},
            "zip": {"alpha": [0.1, 0.2], "beta": [np.int64(1), np.int64(2)]},
        },
        python=make,
        inputs=[Path("prepared.txt")],
        resources={"cpus": 4, "walltime": "1h"},
        timeout=timedelta(seconds=90),
    )
    wf.task(
        "rows",
        foreach={"from_table": "samples.csv"},
        argv=["wc", "{sample}"],
        needs=[prepare, qc.task("report")],
        container={"image": "img.sif", "binds": ["/data"]},
    )
    wf.task(
        "summary",
        python=gather,
        params={"label": "all"},
        from_={"runs": (simulate, "dict")},
        persist=False,
        retries=1,
        checkpoint={"before": "5m"},
        modules=["gcc/12"],
    )
    return wf


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "qc").mkdir()
    (tmp_path / "qc" / "workflow.yaml").write_text(QC_YAML)
    (tmp_path / "work").mkdir()
    (tmp_path / "samples.csv").write_text("sample,depth\na,1\nb,2\n")
    (tmp_path / "img.sif").write_text("")
    return tmp_path


def test_the_api_and_the_yaml_make_the_same_plan(project: Path) -> None:
    wf = _same_in_python(project)
    by_hand = project / "by-hand.yaml"
    by_hand.write_text(SAME_YAML)
    expected = build_graph(parse_workflow(SAME_YAML, str(by_hand), source=by_hand))
    assert _plan(wf.validate()) == _plan(expected)
    # Key for key the document a hand-written file holds.
    assert wf.to_dict() == yaml.safe_load(SAME_YAML)
    # And what it writes reads back as the same plan.
    written = parse_workflow(wf.to_yaml(), "x", source=by_hand)
    assert _plan(build_graph(written)) == _plan(expected)
    ids = [i.id for i in expected.instances]
    assert "simulate[seed=4,model=large,alpha=0.2,beta=2]" in ids
    assert {"qc.trim", "qc.report", "rows[sample=a,depth=1]"} <= set(ids)


def test_load_reads_a_file_into_the_same_workflow(project: Path) -> None:
    path = project / "workflow.yaml"
    path.write_text(SAME_YAML)
    loaded = hpcflow.api.load(path)
    assert loaded.name == "same" and loaded.file == path and loaded.folder == project
    assert loaded.to_dict() == _same_in_python(project).to_dict()
    assert [t.name for t in loaded.tasks] == ["prepare", "simulate", "rows", "summary"]
    assert loaded["simulate"].spec["timeout"] == 90
    # Unchanged, it runs from the file itself: writing leaves it alone.
    before = path.stat().st_mtime_ns
    assert loaded.write() == path and path.stat().st_mtime_ns == before
    assert path.read_text() == SAME_YAML
    # Changed, it would overwrite the user's file: refused, with the way out.
    loaded.task("more", command="true")
    with pytest.raises(RunError, match="was not written by hpcflow's Python API"):
        loaded.write()
    assert loaded.write("more.yaml") == project / "more.yaml"
    # A bad file is refused with its own positions, as `hpcflow validate` says them.
    path.write_text("name: bad\ntasks:\n  - name: a\n    comand: x\n")
    with pytest.raises(SpecError) as caught:
        hpcflow.api.load(path)
    assert caught.value.problems[0].file == str(path) and caught.value.problems[0].line == 4


def test_write_is_idempotent_and_keeps_foreign_files(tmp_path: Path) -> None:
    wf = Workflow("w x/y", folder=tmp_path)
    wf.task("a", command="true")
    assert wf.file == tmp_path / "w_x_y.workflow.yaml"
    path = wf.write()
    text = path.read_text()
    assert text.startswith("# Written by hpcflow's Python API") and "name: w x/y" in text
    before = path.stat().st_mtime_ns
    assert wf.write() == path and path.stat().st_mtime_ns == before
    wf.task("b", command="true", needs=["a"])
    wf.write()
    assert "needs: [a]" in path.read_text()
    own = Workflow("mine", folder=tmp_path, file="workflow.yaml")
    own.task("a", command="true")
    (tmp_path / "workflow.yaml").write_text("name: mine\ntasks: [{name: a, command: echo}]\n")
    with pytest.raises(RunError, match="not overwritten"):
        own.write()


def test_errors_name_the_python_call(tmp_path: Path, project: Path) -> None:
    wf = Workflow("errors", folder=tmp_path)
    a_line = _line()
    wf.task("a", command="echo {x}")
    b_line = _line()
    wf.task(
        "b",
        command="echo",
        needs=["c"],
    )
    with pytest.raises(SpecError) as caught:
        wf.validate()
    rendered = [p.render() for p in caught.value.problems]
    assert rendered == [
        f"{HERE}:{a_line}: tasks[0].command: undefined placeholder {{x}}\n"
        "    hint: define it under 'params:' or 'foreach:'; write {{x}} for literal braces",
        f"{HERE}:{b_line}: tasks[1].needs[0]: needs unknown task 'c'\n    hint: tasks are: a, b",
    ]
    assert caught.value.file == HERE and caught.value.line == a_line
    # A cycle (found when the plan is built) names the call of its first task.
    cyclic = Workflow("cyclic", folder=tmp_path)
    x_line = _line()
    x = cyclic.task("x", command="true", needs=["y"])
    cyclic.task("y", command="true", needs=[x])
    assert _errors(cyclic)[0].startswith(f"{HERE}:{x_line}: tasks[0]: dependency cycle: x → y → x")
    # The workflow's own keys: at Workflow(...); an include's: at wf.include(...).
    top_line = _line()
    bad = Workflow("bad", folder=project, defaults={"resources": {"cpus": 0}})
    bad.task("a", command="true")
    assert _errors(bad)[0].startswith(
        f"{HERE}:{top_line}: defaults.resources.cpus: Input should be greater than 0"
    )
    inc = Workflow("inc", folder=project)
    inc_line = _line()
    inc.include("qc", "qc/workflow.yaml", params={"nope": 1})
    inc.task("a", command="true")
    assert _errors(inc)[0].startswith(
        f"{HERE}:{inc_line}: include.qc.params.nope: no task of 'qc' uses parameter 'nope'"
    )
    # A problem inside the included file stays there.
    (project / "qc" / "workflow.yaml").write_text(QC_YAML.replace("needs: [trim]", "needs: [x]"))
    plain = Workflow("plain", folder=project)
    plain.include("qc", "qc/workflow.yaml")
    plain.task("a", command="true")
    assert _errors(plain)[0].startswith(
        f"{project / 'qc' / 'workflow.yaml'}:10:13: tasks[1].needs[0]: needs unknown task 'x'"
    )


def test_errors_in_what_a_call_passes_are_raised_at_the_call(tmp_path: Path) -> None:
    wf = Workflow("w", folder=tmp_path)
    other = Workflow("other", folder=tmp_path).task("t", command="true")
    with pytest.raises(SpecError) as caught:
        line = _line()
        wf.task("a", command="x", params={"s": {1, 2}}, needs=[other])
    assert [p.render() for p in caught.value.problems] == [
        f"{HERE}:{line}: tasks[0].params.s: a set cannot be written in a workflow file (text, "
        "numbers, true/false, lists and mappings of those can)",
        f"{HERE}:{line}: tasks[0].needs: task 't' belongs to another workflow ('other')\n"
        "    hint: give its name instead if it is included here, or add the task to this "
        "workflow",
    ]
    assert wf.tasks == []  # nothing was added
    with pytest.raises(SpecError, match="include 'q' is given twice"):
        wf.include("q", "a.yaml")
        wf.include("q", "b.yaml")


def test_values_are_written_as_the_file_writes_them(tmp_path: Path) -> None:
    wf = Workflow("values", folder=tmp_path)
    a = wf.task(
        "a",
        foreach={"i": range(3), "j": range(1, 10, 4), "k": (np.float64(0.5), True)},
        python="pkg.mod:f",
        timeout=timedelta(minutes=2),
        workdir=Path("sub"),
        env={"X": "1"},
    )
    b = wf.task("b", python="pkg.mod:g", from_={"xs": a, "ys": {"task": a, "as": "list"}})
    assert a.spec["foreach"] == {
        "i": {"range": [0, 3]},
        "j": {"range": [1, 10, 4]},
        "k": [0.5, True],
    }
    assert a.spec["timeout"] == 120.0 and a.spec["workdir"] == "sub"
    assert b.spec["from"] == {"xs": "a", "ys": {"task": "a", "as": "list"}}
    assert type(a.spec["foreach"]["k"][0]) is float
    assert wf["b"] == b and str(b) == "b" and b.index == 1


def test_functions_become_module_and_qualname(tmp_path: Path) -> None:
    module = make.__module__
    assert reference(make, None) == f"{module}:make"
    assert reference(Steps.scale, None) == f"{module}:Steps.scale"
    with pytest.raises(NotImportable, match="a lambda has no name"):
        reference(lambda: 1, None)

    def inner() -> None: ...

    with pytest.raises(NotImportable, match="'test_functions_become_module_and_qualname.inner' "
                       "is defined inside a function"):  # fmt: skip
        reference(inner, None)
    renamed = types.FunctionType(make.__code__, {}, "make")
    renamed.__module__ = module
    renamed.__qualname__ = "gather"
    with pytest.raises(NotImportable, match="the name was bound to something else"):
        reference(renamed, None)
    with pytest.raises(SpecError) as caught:
        line = _line()
        Workflow("w", folder=tmp_path).task("t", python=lambda: 1)
    assert caught.value.problems[0].render() == (
        f"{HERE}:{line}: tasks[0].python: a lambda has no name a worker can import it by\n"
        "    hint: define it with `def` at the top level of a module (a .py file) in the "
        "workflow's folder"
    )


def _as_main(monkeypatch: pytest.MonkeyPatch, script: Path | None, source: str = "") -> None:
    """Make ``script`` (None: a notebook, which has no file) the running ``__main__``."""
    main = types.ModuleType("__main__")
    if script is not None:
        script.write_text(source)
        main.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__main__", main)


def _main_function(name: str = "step") -> types.FunctionType:
    function = types.FunctionType(make.__code__, {}, name)
    function.__module__ = "__main__"
    function.__qualname__ = name
    return function


GUARDED = """\
from hpcflow.api import Workflow

def step(x):
    return x

if __name__ == "__main__":
    wf = Workflow("w")
    wf.task("t", python=step)
    wf.run()
"""

UNGUARDED = """\
import hpcflow

def step(x):
    return x

wf = hpcflow.Workflow("w")
"""


def test_a_scripts_functions_are_its_module_when_the_worker_can_import_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "my_script.py"
    _as_main(monkeypatch, script, GUARDED)
    assert reference(_main_function(), tmp_path) == "my_script:step"
    wf = Workflow("w", folder=tmp_path)
    assert wf.task("t", python=_main_function()).spec["python"] == "my_script:step"
    # The task runs elsewhere: the script is not importable there.
    with pytest.raises(SpecError, match="but the task runs in .*sub, where a worker cannot"):
        wf.task("u", python=_main_function(), workdir="sub")
    # A workdir made of parameters is not known: the script's folder is trusted.
    assert wf.task("v", python=_main_function(), workdir="{x}").spec["python"] == "my_script:step"
    # A script that builds and runs its workflow when imported would do so in the worker.
    _as_main(monkeypatch, script, UNGUARDED)
    with pytest.raises(NotImportable, match="builds or runs a workflow when it is imported"):
        reference(_main_function(), tmp_path)
    # A script that cannot be imported under its file name.
    _as_main(monkeypatch, tmp_path / "my-script.py", GUARDED)
    with pytest.raises(NotImportable, match="not importable as a module"):
        reference(_main_function(), tmp_path)
    # A notebook or an interactive session: no file to import.
    _as_main(monkeypatch, None)
    with pytest.raises(NotImportable, match="defined in a notebook or an interactive session"):
        reference(_main_function(), tmp_path)


def test_the_keywords_follow_the_models() -> None:
    """The typed keys and keywords of the API are the workflow file's, key for key."""

    def keys(model: type) -> set[str]:
        return {f.alias or name for name, f in model.model_fields.items()}

    task = set(inspect.signature(Workflow.task).parameters) - {"self"}
    assert {"from" if k == "from_" else k for k in task} == keys(models.TaskSpec)
    pairs = [
        (hpcflow.api.Resources, models.Resources),
        (hpcflow.api.Retries, models.RetryPolicy),
        (hpcflow.api.Checkpoint, models.Checkpoint),
        (hpcflow.api.Container, models.ContainerSpec),
        (hpcflow.api.Modules, models.ModulesSpec),
        (hpcflow.api.Defaults, models.Defaults),
    ]
    for typed, model in pairs:
        assert set(typing.get_type_hints(typed)) == keys(model), typed
    run = set(inspect.signature(Workflow.run).parameters) - {"self", "observer", "overrides"}
    request = {f for f in RunRequest.__dataclass_fields__ if f not in ("dry_run", "overrides")}
    assert run == request
    assert set(typing.get_type_hints(ProfileOverrides)) == {
        "nodes", "partition", "account", "walltime", "mode", "transport"
    }  # fmt: skip


def test_the_namespaces_import_lazily() -> None:
    assert sorted(hpcflow.api.__all__) == sorted(hpcflow.api._WHERE)
    for name in hpcflow.api.__all__:
        assert getattr(hpcflow.api, name) is not None
    assert hpcflow.Workflow is Workflow and hpcflow.open_run is hpcflow.api.open_run
    with pytest.raises(AttributeError):
        _ = hpcflow.nothing  # type: ignore[attr-defined]
    code = (
        "import sys, hpcflow, hpcflow.api.locate; "
        "print(sorted(m for m in sys.modules if m.startswith(('hpcflow.engine', 'hpcflow.spec',"
        " 'hpcflow.api.workflow', 'pydantic'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
