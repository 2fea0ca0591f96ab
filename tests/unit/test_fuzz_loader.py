"""Property test: whatever text it is given, the loader and the DAG builder either succeed or
raise :class:`SpecError` with a message and a file name on every problem -- never anything else.

Inputs are (a) random text, (b) random YAML documents, from arbitrary nested data to
workflow-shaped mappings with random keys and values, and (c) random edits of a valid
workflow. ``max_examples`` keeps the whole file well under 20 s on a slow 2-core machine;
set ``HPCFLOW_FUZZ_SCALE=50`` (say) to run fifty times as many examples.
"""

from __future__ import annotations

import os
import string
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcflow.dag import build_graph
from hpcflow.dag.render import render_dot, render_mermaid, render_text
from hpcflow.errors import SpecError
from hpcflow.spec import parse_workflow

FILE = "fuzz.yaml"
SCALE = max(1, int(os.environ.get("HPCFLOW_FUZZ_SCALE", "1")))

FUZZ = settings(
    max_examples=150 * SCALE,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


@pytest.fixture(scope="module")
def workflow_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the fuzzed workflow pretends to live, so relative globs look in an empty folder."""
    return tmp_path_factory.mktemp("fuzz") / "workflow.yaml"


def check(text: str, source: Path) -> None:
    """The property: success, or a SpecError that says what and where."""
    try:
        loaded = parse_workflow(text, FILE, source=source)
        graph = build_graph(loaded, check_files=False)
    except SpecError as err:
        assert str(err).strip(), "a SpecError must have a message"
        assert err.problems, "a SpecError must list its problems"
        for problem in err.problems:
            assert problem.file == FILE
            assert problem.message.strip()
            assert problem.render().startswith(FILE)
        return
    # A graph that builds is a valid schedule and can be shown.
    position = {node: k for k, node in enumerate(graph.order)}
    assert len(position) == len(graph.instances)
    for inst in graph.instances:
        for dep in inst.deps:
            assert position[dep] < position[inst.index]
    for render in (render_text, render_mermaid, render_dot):
        render(graph)
        render(graph, instances=True)


# -- (a) random text --------------------------------------------------------------------------

YAML_CHARS = string.ascii_letters[:8] + string.digits[:4] + " \n\t:-[]{},#&*!|>'\"%@`?.$_/\\"

yaml_ish_text = st.text(alphabet=YAML_CHARS, max_size=200)


@FUZZ
@given(text=st.one_of(st.text(max_size=200), yaml_ish_text))
def test_random_text(text: str, workflow_path: Path) -> None:
    check(text, workflow_path)


# -- (b) random YAML documents ----------------------------------------------------------------

KEYS = [
    "name", "description", "workdir", "defaults", "tasks", "command", "argv", "python",
    "foreach", "params", "inputs", "outputs", "needs", "resources", "retries", "timeout", "env",
    "cpus", "memory", "gpus", "walltime", "ranks", "nodes", "attempts", "backoff", "factor",
    "max_backoff", "product", "zip", "range", "seed", "x", "inputs", "outputs", "<<",
]
WORDS = [
    "a", "b", "sim", "reduce", "{seed}", "{x}", "{{x}}", "${HOME}", "{inputs}", "{outputs}",
    "out-{seed}.txt", "*.txt", "res/*/x", "[ab].txt", "../up", "/abs/path", "", " ", "1h30m",
    "2:00:00", "4GB", "512", "-1", "mod:func", "a.b:c", "x\x00y", "é", "\u2192", "{", "}",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=-3, max_value=12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(WORDS),
    st.text(max_size=12),
)
keys = st.one_of(st.sampled_from(KEYS), st.text(max_size=8))
anything = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(keys, children, max_size=5),
    ),
    max_leaves=25,
)

def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any] = anything) -> st.SearchStrategy[Any]:
    """``good`` about 29 times in 30, else ``bad``: a document has many fields, and a fair
    share of whole documents should be valid so that the DAG builder gets to work."""
    return st.sampled_from([False] * 29 + [True]).flatmap(lambda is_bad: bad if is_bad else good)


NAMES = ["a", "b", "c", "sim", "reduce"]
PARAMS = ["seed", "x", "y"]
patterns = mostly(
    st.sampled_from(
        ["out.txt", "out-{seed}.txt", "out-{x}.txt", "{seed}-{x}.txt", "*.txt", "out-*.txt",
         "d/{seed}/r.txt", "*/r.txt", "d/*/r.txt", "[o]ut-?.txt", "{seed}", "a.txt", "b.txt",
         "../up.txt", "/abs/{x}"]
    ),
    st.one_of(st.sampled_from(["{undefined}", "", ".", "/tmp", "x\x00y", "{", "{{x}}"]), st.text(max_size=8)),
)
sweep_values = mostly(
    st.one_of(
        st.lists(st.one_of(st.integers(-2, 4), st.sampled_from(["a", "b", "1", True, 1.5])), min_size=1, max_size=3),
        st.builds(lambda r: {"range": r}, st.lists(st.integers(-2, 5), min_size=1, max_size=3)),
    ),
    st.one_of(st.just([]), st.just({"range": [0, 10**30]}), st.just({"range": [0, 5, 0]}), anything),
)
sweep_axes = st.dictionaries(
    mostly(st.sampled_from(PARAMS), st.sampled_from(["inputs", "1bad", "range", ""])), sweep_values,
    min_size=1, max_size=2,
)
foreach = mostly(
    st.one_of(
        sweep_axes,
        st.fixed_dictionaries({}, optional={"product": sweep_axes, "zip": sweep_axes}),
    ),
    st.one_of(st.fixed_dictionaries({"zip": sweep_axes, "seed": sweep_values}), anything),
)
durations = mostly(
    st.one_of(st.sampled_from(["90s", "10m", "1h30m", "2:00:00", "1-0", "2hr"]), st.integers(0, 10**6)),
    st.one_of(st.sampled_from(["soon", "-1", "1e400", ".inf"]), scalars),
)
resources = st.dictionaries(
    mostly(st.sampled_from(["cpus", "memory", "gpus", "walltime", "ranks", "nodes"]), st.sampled_from(["cpu", "mem"])),
    mostly(st.one_of(st.integers(1, 4), st.sampled_from(["4GB", "512", "1h", "100MB", "512B"])), scalars),
    max_size=4,
)
retries = mostly(
    st.one_of(
        st.integers(0, 3),
        st.fixed_dictionaries({}, optional={"attempts": st.integers(0, 3), "backoff": durations, "factor": st.floats(1, 4)}),
    ),
    st.one_of(st.integers(-2, -1), st.just({"bakoff": 1}), anything),
)
env = st.dictionaries(
    mostly(st.sampled_from(["A", "ON", "MODE"]), keys),
    mostly(st.sampled_from(["1", "{seed}", "${HOME}", "{{x}}", "fast"]), scalars),
    max_size=2,
)
workdirs = mostly(st.sampled_from(["w", "w/{seed}", "{x}", "/abs", "..", "a/./b"]), scalars)
constant_params = st.dictionaries(
    mostly(st.sampled_from(PARAMS + ["n"]), st.sampled_from(["outputs", "inputs"])),
    mostly(st.one_of(st.integers(0, 3), st.sampled_from(["a", "1"]), st.lists(st.integers(0, 2), max_size=2)), anything),
    max_size=2,
)
COMMANDS = ["echo {seed} > {outputs}", "cat {inputs}", "awk '{print $1}' ${HOME}", "x {y}", "run {n}"]


@st.composite
def tasks(draw: st.DrawFn) -> Any:
    task: dict[str, Any] = {"name": draw(mostly(st.sampled_from(NAMES), st.sampled_from(["", "a[x=1]", 3])))}
    kinds = draw(mostly(st.sampled_from([["command"], ["argv"], ["python"]]), st.sampled_from([[], ["command", "argv"]])))
    for kind in kinds:
        task[kind] = draw({
            "command": mostly(st.sampled_from(COMMANDS), scalars),
            "argv": mostly(st.lists(st.sampled_from(["prog", "{x}", "{seed}", "{inputs}", "-v"]), min_size=1, max_size=3)),
            "python": mostly(st.sampled_from(["mod:func", "a.b:c.d"]), st.sampled_from(["bad", ":x", "a:b:c"])),
        }[kind])
    optional = {
        "foreach": foreach,
        "params": constant_params,
        "inputs": mostly(st.lists(patterns, max_size=3)),
        "outputs": mostly(st.lists(patterns, max_size=3)),
        "needs": mostly(st.lists(mostly(st.sampled_from(NAMES), st.sampled_from(["zzz", ""])), max_size=3)),
        "resources": mostly(resources),
        "retries": retries,
        "timeout": durations,
        "env": mostly(env),
        "workdir": workdirs,
        "description": mostly(st.text(max_size=10), scalars),
    }
    for key in draw(st.lists(st.sampled_from(sorted(optional)), unique=True, max_size=6)):
        task[key] = draw(optional[key])
    if draw(st.integers(0, 19)) == 0:
        task[draw(keys)] = draw(anything)  # an unknown or repeated key
    return task


@st.composite
def workflows(draw: st.DrawFn) -> Any:
    doc: dict[str, Any] = {
        "name": draw(mostly(st.just("w"), scalars)),
        "tasks": draw(mostly(st.lists(tasks(), min_size=1, max_size=5))),
    }
    optional = {
        "defaults": mostly(
            st.fixed_dictionaries(
                {},
                optional={"resources": resources, "retries": retries, "timeout": durations, "env": env, "workdir": workdirs},
            )
        ),
        "workdir": workdirs,
        "description": mostly(st.text(max_size=10), scalars),
        "tsks": anything,
    }
    for key in draw(st.lists(st.sampled_from(sorted(optional)), unique=True, max_size=2)):
        doc[key] = draw(optional[key])
    if draw(st.booleans()):
        doc.pop("name") if draw(st.integers(0, 9)) == 0 else None
    return doc


def dump(data: Any, flow: bool | None) -> str:
    return yaml.safe_dump(data, default_flow_style=flow, allow_unicode=True, sort_keys=False)


@FUZZ
@given(data=anything, flow=st.sampled_from([None, True, False]))
def test_random_yaml_data(data: Any, flow: bool | None, workflow_path: Path) -> None:
    check(dump(data, flow), workflow_path)


@settings(FUZZ, max_examples=400 * SCALE)
@given(data=workflows(), flow=st.sampled_from([None, False]))
def test_random_workflow_shaped_documents(data: Any, flow: bool | None, workflow_path: Path) -> None:
    check(dump(data, flow), workflow_path)


# -- (c) edits of a valid workflow ------------------------------------------------------------

VALID = """\
name: fuzz
description: a workflow that uses most features
workdir: runs
defaults:
  resources: {cpus: 1, memory: 100MB, walltime: 5m}
  retries: {attempts: 1, backoff: 1s}
  env: {MODE: fast}
tasks:
  - name: prepare
    argv: [mkdir, -p, data]
    outputs: [data/config.txt]
  - name: simulate
    foreach:
      seed: {range: [0, 3]}
      size: [10, 20]
    needs: [prepare]
    command: |
      awk -v seed={seed} 'BEGIN { print seed }' > {outputs}  # ${HOME} and {{literal}}
    outputs: ["results/pi-{seed}-{size}.txt"]
    resources: {memory: 2GB}
    timeout: 1h30m
  - name: analyse
    foreach:
      product: {seed: [0, 1, 2]}
      zip: {method: [a, b], order: [1, 2]}
    inputs: ["results/pi-{seed}-*.txt", data/config.txt]
    python: mypkg.analysis:run
    outputs: ["analysis/{seed}-{method}.json"]
    retries: 2
  - name: reduce
    inputs: ["analysis/*.json"]
    needs: [analyse]
    command: cat {inputs} > {outputs}
    outputs: [summary.txt]
    env: {MODE: "{n}"}
    params: {n: 3}
"""

INSERTS = [
    "{", "}", "[", "]", ":", "-", " ", "  ", "\n", "\t", "#", "'", '"', "&a", "*a", "!!int ",
    "{x}", "{seed}", "{{", "$", ",", "?", "|", ">", "- ", "name: a", "needs: [reduce]",
    "foreach: {}", "- name: simulate\n    command: x", "outputs: [summary.txt]",
    "inputs: [summary.txt]", "range: [0, 0]", "0", "-1", "999999999999999999999", ".inf",
    "<<: *a",
]


@st.composite
def edited_workflow(draw: st.DrawFn) -> str:
    text = VALID
    for _ in range(draw(st.integers(1, 4))):
        lines = text.split("\n")
        op = draw(st.sampled_from(["delete", "replace", "insert", "del_line", "dup_line", "swap", "new_line"]))
        if op in ("delete", "replace", "insert"):
            i = draw(st.integers(0, len(text)))
            j = min(len(text), i + draw(st.integers(0, 6)))
            piece = "" if op == "delete" else draw(st.one_of(st.sampled_from(INSERTS), st.text(max_size=4)))
            text = text[:i] + piece + (text[j:] if op != "insert" else text[i:])
        elif op == "del_line" and lines:
            del lines[draw(st.integers(0, len(lines) - 1))]
            text = "\n".join(lines)
        elif op == "dup_line" and lines:
            k = draw(st.integers(0, len(lines) - 1))
            lines.insert(draw(st.integers(0, len(lines))), lines[k])
            text = "\n".join(lines)
        elif op == "swap" and len(lines) > 1:
            a, b = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            lines[a], lines[b] = lines[b], lines[a]
            text = "\n".join(lines)
        else:
            indent = draw(st.sampled_from(["", "  ", "    ", "      "]))
            new = indent + draw(st.sampled_from(INSERTS))
            lines.insert(draw(st.integers(0, len(lines))), new)
            text = "\n".join(lines)
    return text


def test_the_valid_workflow_is_valid(workflow_path: Path) -> None:
    graph = build_graph(parse_workflow(VALID, FILE, source=workflow_path), check_files=False)
    assert graph.counts_by_task() == {"prepare": 1, "simulate": 6, "analyse": 6, "reduce": 1}
    assert sum(len(i.deps) for i in graph.instances) > 10


@settings(FUZZ, max_examples=400 * SCALE)
@given(text=edited_workflow())
def test_edited_valid_workflow(text: str, workflow_path: Path) -> None:
    check(text, workflow_path)
