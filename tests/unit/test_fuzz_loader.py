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
    max_examples=100 * SCALE,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
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


@settings(FUZZ, max_examples=600 * SCALE)
@given(text=st.one_of(st.text(max_size=200), yaml_ish_text))
def test_random_text(text: str, workflow_path: Path) -> None:
    check(text, workflow_path)


# -- (b) random YAML documents ----------------------------------------------------------------

KEYS = [
    "name",
    "description",
    "workdir",
    "defaults",
    "tasks",
    "command",
    "argv",
    "python",
    "foreach",
    "params",
    "inputs",
    "outputs",
    "needs",
    "resources",
    "retries",
    "timeout",
    "env",
    "cpus",
    "memory",
    "gpus",
    "walltime",
    "ranks",
    "nodes",
    "attempts",
    "backoff",
    "factor",
    "max_backoff",
    "product",
    "zip",
    "range",
    "seed",
    "x",
    "inputs",
    "outputs",
    "<<",
]
WORDS = [
    "a",
    "b",
    "sim",
    "reduce",
    "{seed}",
    "{x}",
    "{{x}}",
    "${HOME}",
    "{inputs}",
    "{outputs}",
    "out-{seed}.txt",
    "*.txt",
    "res/*/x",
    "[ab].txt",
    "../up",
    "/abs/path",
    "",
    " ",
    "1h30m",
    "2:00:00",
    "4GB",
    "512",
    "-1",
    "mod:func",
    "a.b:c",
    "x\x00y",
    "é",
    "\u2192",
    "{",
    "}",
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

NAMES = ["a", "b", "c", "sim", "reduce", "t5", "t6"]
PARAMS = ["seed", "x", "y"]
COMMANDS = ["echo hi > {outputs}", "cat {inputs}", "awk '{print $1}' ${HOME} {{x}}", "true"]


def workflow_documents(noisy: bool) -> st.SearchStrategy[Any]:
    """Workflow-shaped data. Clean documents have the right shapes and types everywhere, but
    random names, sweeps, paths and dependencies (so they exercise the checks across tasks and
    the DAG builder: undefined placeholders, duplicate outputs, cycles...); noisy ones also put
    wrong keys, types and values anywhere."""

    def mostly(
        good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any] = anything
    ) -> st.SearchStrategy[Any]:
        return st.one_of(good, bad) if noisy else good

    durations = mostly(
        st.one_of(
            st.sampled_from(["90s", "10m", "1h30m", "2:00:00", "1-0", "2hr"]), st.integers(0, 10**6)
        ),
        st.one_of(st.sampled_from(["soon", "-1", "9" * 400, ".inf"]), scalars),
    )
    resources = st.fixed_dictionaries(
        {},
        optional={
            "cpus": mostly(st.integers(1, 4)),
            "memory": mostly(st.sampled_from(["4GB", 512, "100MB", "512B", "2GiB"])),
            "gpus": mostly(st.integers(0, 2)),
            "walltime": durations,
            "ranks": mostly(st.integers(1, 4)),
            "nodes": mostly(st.integers(1, 2)),
            **({"cpu": st.integers(1, 2), "": anything} if noisy else {}),
        },
    )
    retries = mostly(
        st.one_of(
            st.integers(0, 3),
            st.fixed_dictionaries(
                {},
                optional={
                    "attempts": st.integers(0, 3),
                    "backoff": durations,
                    "factor": st.floats(1, 4),
                },
            ),
        ),
        st.one_of(st.integers(-2, -1), st.just({"bakoff": 1}), anything),
    )
    env = st.dictionaries(
        mostly(st.sampled_from(["A", "ON", "MODE"]), keys),
        mostly(
            st.sampled_from(["1", "${HOME}", "{{x}}", "fast"]),
            st.sampled_from(["{seed}", "{x}", 1]),
        ),
        max_size=2,
    )
    workdirs = mostly(
        st.sampled_from(["w", "/abs", "..", "a/./b", "{{lit}}", "${X}"]),
        st.sampled_from(["{seed}", "{x}", 1]),
    )

    def axes(names: list[str]) -> st.SearchStrategy[dict[str, Any]]:
        """Equal-length value lists (so that they can also be zipped)."""
        size = st.integers(1, 3)
        ints = st.lists(st.integers(-2, 4), min_size=3, max_size=3, unique=True)
        texts = st.lists(
            st.sampled_from(["a", "b", "c", "x y", "1"]), min_size=3, max_size=3, unique=True
        )
        good = st.tuples(
            size, st.lists(st.one_of(ints, texts), min_size=len(names), max_size=len(names))
        ).map(lambda t: {n: v[: t[0]] for n, v in zip(names, t[1], strict=True)})
        good_range = st.tuples(st.integers(-2, 2), st.integers(1, 3), st.sampled_from([1, 2])).map(
            lambda t: {n: {"range": [t[0], t[0] + t[1] * t[2], t[2]]} for n in names}
        )
        bad = st.fixed_dictionaries(
            {
                n: st.one_of(
                    st.just([]),
                    st.just({"range": [0, 10**30]}),
                    st.just({"range": [0, 5, 0]}),
                    st.just({"range": [3, 1]}),
                    st.just([1, "1", True]),
                    st.just([[1]]),
                    anything,
                )
                for n in names
            }
        )
        return (
            mostly(good_range if len(names) == 1 else good, bad)
            if noisy
            else st.one_of(good, good_range)
        )

    @st.composite
    def task(draw: st.DrawFn, name: str, names: list[str]) -> Any:
        doc: dict[str, Any] = {"name": name}
        kinds = draw(
            mostly(
                st.sampled_from([["command"], ["argv"], ["python"]]),
                st.sampled_from([[], ["command", "argv"]]),
            )
        )
        for kind in kinds:
            doc[kind] = draw(
                {
                    "command": mostly(st.sampled_from(COMMANDS), scalars),
                    "argv": mostly(
                        st.lists(
                            st.sampled_from(["prog", "{inputs}", "-v"]), min_size=1, max_size=3
                        )
                    ),
                    "python": mostly(
                        st.sampled_from(["mod:func", "a.b:c.d"]),
                        st.sampled_from(["bad", ":x", "a:b:c"]),
                    ),
                }[kind]
            )
        swept = draw(st.lists(st.sampled_from(PARAMS), unique=True, max_size=3))
        constant = draw(st.lists(st.sampled_from([*PARAMS, "n"]), unique=True, max_size=2))
        if noisy and draw(st.booleans()):
            constant.append(draw(st.sampled_from([*swept, "outputs"] if swept else ["inputs"])))
        else:
            constant = [c for c in constant if c not in swept]
        if swept:
            if len(swept) > 1 and draw(st.booleans()):
                split = draw(st.integers(0, len(swept)))
                doc["foreach"] = {
                    "product": draw(axes(swept[:split])),
                    "zip": draw(axes(swept[split:])),
                }
            else:
                doc["foreach"] = draw(axes(swept))
        if constant:
            doc["params"] = {
                c: draw(
                    mostly(
                        st.one_of(
                            st.integers(0, 3),
                            st.sampled_from(["a", "1"]),
                            st.lists(st.integers(0, 2), max_size=2),
                        )
                    )
                )
                for c in constant
            }
        known = swept + constant
        others = [n for n in names if n != name] or [name]
        # Outputs name every swept parameter (so instances write different files), mostly.
        mine = f"{name}/out" + "".join(f"-{{{k}}}" for k in swept)
        outputs = [mine + ".txt"]
        if draw(st.booleans()):
            outputs.append(mine + ".log")
        if noisy and draw(st.booleans()):
            outputs.append(
                draw(st.sampled_from(["shared.txt", f"{others[0]}/out.txt", "{nope}", "", "/abs"]))
            )
        if draw(st.integers(0, 3)):
            doc["outputs"] = outputs
        inputs = []
        for other in draw(st.lists(st.sampled_from(others), max_size=2)):
            holes = (
                "".join(
                    f"-{{{k}}}"
                    for k in draw(st.lists(st.sampled_from(known), unique=True))
                    if known
                )
                if known
                else ""
            )
            inputs.append(
                draw(
                    st.sampled_from(
                        [
                            f"{other}/out{holes}.txt",
                            f"{other}/*.txt",
                            f"{other}/out*",
                            f"*/out{holes}.*",
                            f"{other}/[o]ut?*.txt",
                            f"{other}/missing.txt",
                            f"{other}/../{other}/out.txt",
                        ]
                    )
                )
            )
        if inputs:
            doc["inputs"] = draw(mostly(st.just(inputs)))
        if draw(st.booleans()):
            needs = draw(st.lists(st.sampled_from(others), unique=True, max_size=2))
            doc["needs"] = draw(
                mostly(st.just(needs), st.sampled_from([["zzz"], [name], needs * 2]))
            )
        optional = {
            "resources": mostly(resources),
            "retries": retries,
            "timeout": durations,
            "env": mostly(env),
            "workdir": st.one_of(workdirs, st.sampled_from([f"w-{{{k}}}" for k in known] or ["w"])),
            "description": mostly(st.text(max_size=10), scalars),
        }
        for key in draw(st.lists(st.sampled_from(sorted(optional)), unique=True, max_size=3)):
            doc[key] = draw(optional[key])
        if noisy and draw(st.booleans()):
            doc[draw(keys)] = draw(anything)  # an unknown or repeated key
        return doc

    @st.composite
    def document(draw: st.DrawFn) -> Any:
        names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=not noisy))
        doc: dict[str, Any] = {
            "name": draw(mostly(st.just("w"), st.sampled_from(["", None, 3]))),
            "tasks": [draw(task(n, names)) for n in names],
        }
        optional = {
            "defaults": mostly(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "resources": resources,
                        "retries": retries,
                        "timeout": durations,
                        "env": env,
                        "workdir": workdirs,
                    },
                )
            ),
            "workdir": workdirs,
            "description": mostly(st.text(max_size=10), scalars),
        }
        for key in draw(st.lists(st.sampled_from(sorted(optional)), unique=True, max_size=2)):
            doc[key] = draw(optional[key])
        if noisy and draw(st.booleans()):
            doc[draw(st.sampled_from(["tsks", "name", "tasks"]))] = draw(anything)
        return doc

    return document()


workflows = st.one_of(workflow_documents(noisy=False), workflow_documents(noisy=True))


def dump(data: Any, flow: bool | None) -> str:
    return yaml.safe_dump(data, default_flow_style=flow, allow_unicode=True, sort_keys=False)


@settings(FUZZ, max_examples=300 * SCALE)
@given(data=anything, flow=st.sampled_from([None, True, False]))
def test_random_yaml_data(data: Any, flow: bool | None, workflow_path: Path) -> None:
    check(dump(data, flow), workflow_path)


@settings(FUZZ, max_examples=150 * SCALE)
@given(data=workflows, flow=st.sampled_from([None, False]))
def test_random_workflow_shaped_documents(
    data: Any, flow: bool | None, workflow_path: Path
) -> None:
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
    "{",
    "}",
    "[",
    "]",
    ":",
    "-",
    " ",
    "  ",
    "\n",
    "\t",
    "#",
    "'",
    '"',
    "&a",
    "*a",
    "!!int ",
    "{x}",
    "{seed}",
    "{{",
    "$",
    ",",
    "?",
    "|",
    ">",
    "- ",
    "name: a",
    "needs: [reduce]",
    "foreach: {}",
    "- name: simulate\n    command: x",
    "outputs: [summary.txt]",
    "inputs: [summary.txt]",
    "range: [0, 0]",
    "0",
    "-1",
    "999999999999999999999",
    ".inf",
    "<<: *a",
    "!!int x",
    "!!bool maybe",
    "!!timestamp 2020",
    "!!float ''",
    "!!binary ~",
    "!custom",
]


@st.composite
def edited_workflow(draw: st.DrawFn) -> str:
    text = VALID
    for _ in range(draw(st.integers(1, 4))):
        lines = text.split("\n")
        op = draw(
            st.sampled_from(
                ["delete", "replace", "insert", "del_line", "dup_line", "swap", "new_line"]
            )
        )
        if op in ("delete", "replace", "insert"):
            i = draw(st.integers(0, len(text)))
            j = min(len(text), i + draw(st.integers(0, 6)))
            piece = (
                ""
                if op == "delete"
                else draw(st.one_of(st.sampled_from(INSERTS), st.text(max_size=4)))
            )
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


@settings(FUZZ, max_examples=700 * SCALE)
@given(text=edited_workflow())
def test_edited_valid_workflow(text: str, workflow_path: Path) -> None:
    check(text, workflow_path)
