"""Unit tests of the workflow loader (hpcflow.spec): valid files, and every kind of problem
with the exact file:line:column it is reported at.

Problem tests are table-driven: each row is a workflow text and the problems it must raise,
in the order they are reported (unless the row says ordered=False)."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from hpcflow.dag import build_graph
from hpcflow.errors import HpcflowError, SpecError, SpecProblem
from hpcflow.spec import load_workflow, parse_workflow
from hpcflow.spec.placeholders import Template, shell_quote, value_text
from hpcflow.spec.units import (
    format_duration,
    format_elapsed,
    format_memory,
    parse_duration,
    parse_memory,
)

FILE = "wf.yaml"
MiB = 1024**2
GiB = 1024**3


def wf(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def problems(text: str) -> list[SpecProblem]:
    with pytest.raises(SpecError) as info:
        parse_workflow(wf(text), FILE)
    err = info.value
    assert err.problems, "a SpecError must carry at least one problem"
    assert all(p.file == FILE for p in err.problems)
    # The message lists every problem, each with its location.
    for p in err.problems:
        assert p.render() in str(err)
    return err.problems


def at(p: SpecProblem) -> tuple[int | None, int | None]:
    return (p.line, p.column)


# -- how a case table describes the problems it expects ---------------------------------------


class Starts(str):
    """The actual text must start with this."""


class Has(tuple):
    """The actual text must contain each of these fragments."""

    def __new__(cls, *fragments: str) -> Has:
        return super().__new__(cls, fragments)


# Plain text must match exactly; a plain tuple of expectations must all hold.
Text = str | Starts | Has | tuple
NO_HINT = "<no hint>"  # the problem must have no hint at all


def fits(actual: str | None, expected: Text) -> bool:
    if isinstance(expected, Starts):
        return actual is not None and actual.startswith(expected)
    if isinstance(expected, Has):
        return actual is not None and all(f in actual for f in expected)
    if isinstance(expected, tuple):
        return all(fits(actual, e) for e in expected)
    return actual == expected


@dataclass(frozen=True)
class P:
    """One expected problem; a field left as None is not checked."""

    at: tuple[int | None, int | None] | None = None  # (line, column)
    where: Text | None = None
    msg: Text | None = None
    hint: Text | None = None  # NO_HINT: must be None
    line: int | None = None  # the line alone, where the column is not the point

    def fits(self, p: SpecProblem) -> bool:
        return (
            (self.at is None or at(p) == self.at)
            and (self.line is None or p.line == self.line)
            and (self.where is None or fits(p.where, self.where))
            and (self.msg is None or fits(p.message, self.msg))
            and (
                self.hint is None
                or (p.hint is None if self.hint == NO_HINT else fits(p.hint, self.hint))
            )
        )


@dataclass(frozen=True)
class Case:
    text: str
    expected: tuple[P, ...]
    ordered: bool = True

    def check(self) -> None:
        found = problems(self.text)
        shown = [p.render() for p in found]
        assert len(found) == len(self.expected), shown
        if self.ordered:
            for p, e in zip(found, self.expected):
                assert e.fits(p), (p, e)
            return
        left = list(found)
        for e in self.expected:
            match = [i for i, p in enumerate(left) if e.fits(p)]
            assert match, (e, shown)
            left.pop(match[0])


def case(id: str, text: str, *expected: P, ordered: bool = True) -> object:
    return pytest.param(Case(text, expected, ordered), id=id)


def one_task(*lines: str) -> str:
    """A workflow of one task, 'a', with these lines under it."""
    return "name: w\ntasks:\n  - name: a\n" + "".join(f"    {line}\n" for line in lines)


# -- valid workflows --------------------------------------------------------------------------


def test_minimal_workflow_loads_with_defaults() -> None:
    loaded = parse_workflow(
        wf("""
        name: hello
        tasks:
          - name: greet
            command: echo hi
        """),
        FILE,
    )
    w = loaded.workflow
    assert w.name == "hello"
    assert [t.name for t in w.tasks] == ["greet"]
    task = w.tasks[0]
    assert task.kind == "shell"
    assert task.command == "echo hi"
    assert task.needs == [] and task.inputs == [] and task.outputs == [] and task.params == {}
    assert task.resources is None and task.retries is None and task.timeout is None
    assert w.defaults.resources.cpus == 1
    assert w.defaults.resources.memory is None
    assert loaded.sweeps == {}
    assert loaded.source is None
    assert loaded.base_dir == Path.cwd()
    assert loaded.task_index("greet") == 0
    with pytest.raises(KeyError):
        loaded.task_index("nope")
    # Positions are remembered for later error reports.
    assert loaded.positions.values[("tasks", 0, "command")] == (4, 14)
    assert loaded.positions.keys[("tasks", 0, "command")] == (4, 5)


def test_action_kinds() -> None:
    loaded = parse_workflow(
        wf("""
        name: kinds
        tasks:
          - name: a
            command: "true"
          - name: b
            argv: [echo, "{x}"]
            params: {x: 1}
          - name: c
            python: pkg.mod:func
        """),
        FILE,
    )
    assert [t.kind for t in loaded.workflow.tasks] == ["shell", "argv", "python"]


def test_load_workflow_from_file(tmp_path: Path) -> None:
    path = tmp_path / "workflow.yaml"
    path.write_text("name: w\ntasks:\n  - name: a\n    command: x\n", encoding="utf-8")
    loaded = load_workflow(path)
    assert loaded.source == path.resolve()
    assert loaded.base_dir == path.resolve().parent
    assert loaded.text == path.read_text(encoding="utf-8")


def test_load_workflow_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_workflow(tmp_path / "nope.yaml")
    assert info.value.problems[0].message == "no such file"
    assert info.value.problems[0].file == str(tmp_path / "nope.yaml")
    with pytest.raises(SpecError) as info:
        load_workflow(tmp_path)
    assert "directory" in info.value.problems[0].message


def test_load_workflow_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "name: w\ntasks:\n  - name: a\n    command: x\n    bogus: 1\n", encoding="utf-8"
    )
    with pytest.raises(SpecError) as info:
        load_workflow(path)
    (p,) = info.value.problems
    assert p.file == str(path)
    assert at(p) == (5, 5)
    assert str(info.value).startswith(f"{path}:5:5: tasks[0].bogus: unknown key 'bogus'")


def test_spec_error_is_an_hpcflow_error_with_first_location() -> None:
    with pytest.raises(HpcflowError) as info:
        parse_workflow("name: w\ntasks: 3\n", FILE)
    assert isinstance(info.value, SpecError)
    assert info.value.file == FILE
    assert info.value.line == 2


# -- YAML-level problems ----------------------------------------------------------------------

YAML_CASES = [
    case(
        "flow-list-braces-hint-to-quote",
        one_task("foreach: {i: [1, 2]}", "command: touch {outputs}", "outputs: [out_{i}.txt]"),
        # at the '{' of out_{i}
        P((6, 19), msg=Starts("YAML syntax error:"), hint=Has('["out_{i}.txt"]')),
    ),
    case(
        "syntax-error-without-braces-has-no-hint",
        """
        name: w
        tasks:
          - name: a
            command: x
          bad: [
        """,
        P((5, 3), msg=Starts("YAML syntax error:"), hint=NO_HINT),
    ),
    case(
        "tab-indentation",
        "name: w\ntasks:\n\t- name: a\n",
        P((3, 1), msg=Has("YAML syntax error")),
    ),
    case(
        "several-documents",
        "name: w\n---\nname: v\n",
        P(line=2, msg=Has("YAML syntax error")),
    ),
    case(
        "duplicate-key",
        one_task("command: x", "command: y"),
        P((5, 5), "tasks[0].command", "duplicate key 'command'", "first defined on line 4"),
    ),
    case(
        "duplicate-top-level-keys-all-reported",
        """
        name: w
        name: v
        tasks:
          - name: a
            command: x
        tasks: []
        """,
        P((2, 1), msg="duplicate key 'name'"),
        P((6, 1), msg="duplicate key 'tasks'"),
    ),
    case(
        "merge-key",
        """
        name: w
        tasks:
          - &base
            name: a
            command: x
          - <<: *base
            name: b
        """,
        P((6, 5), msg=Has("merge keys"), hint=Has("defaults")),
    ),
    case(
        "non-text-key",
        one_task("command: x", "params:", "  [a, b]: 1"),
        P((6, 7), msg="keys must be plain text"),
    ),
    case(
        "bad-standard-tag",
        one_task("command: x", "params: {n: !!int abc}"),
        P((5, 17), "tasks[0].params.n", "cannot read 'abc' as !!int"),
    ),
    case(
        # 30 block levels and 40 flow levels: each within the scanner's limit, too deep together.
        "nested-too-deeply-block-and-flow",
        "name: w\ntasks:\n" + "- " * 30 + "[" * 40 + "]" * 40 + "\n",
        P(
            line=3,
            where=Starts("tasks[0][0]"),
            msg="document nested too deeply (over 64 levels)",
        ),
    ),
    case(
        # PyYAML's scanner is quadratic in the depth of '[': stop at 64 levels.
        "very-deep-flow-nesting-is-quick",
        "name: w\ntasks: " + "[" * 50_000 + "]" * 50_000 + "\n",
        P(
            (2, 8 + 64),
            msg="YAML syntax error: [...] and {...} nested more than 64 deep",
            hint=NO_HINT,
        ),
    ),
    case(
        # PyYAML composes recursively: this must not escape as RecursionError.
        "very-deep-block-nesting",
        "name: w\ntasks:\n" + "- " * 20_000 + "x\n",
        P(msg=Has("nested too deeply")),
    ),
    case("recursive-alias", "name: w\ntasks: &a [*a]\n", P(msg=Has("nested too deeply"))),
    *[
        case(
            f"control-character-{where}",
            text,
            P(position, msg=f"character U+{ord(char):04X} is not allowed in a YAML file"),
        )
        for where, char, text, position in [
            ("in-a-key", "\x01", "name: w\ntasks:\n  - na\x01me: a\n", (3, 7)),
            ("at-the-start", "\x7f", "\x7fname: w\n", (1, 1)),
            ("as-a-value", "\ud800", "name: w\ntasks: \ud800\n", (2, 8)),
        ]
    ],
    *[
        case(f"not-a-mapping-{id}", text, P(position, msg=Has("must be a mapping")))
        for id, text, position in [
            ("empty", "", (None, None)),
            ("only-a-comment", "# only a comment\n", (None, None)),
            ("list", "- a\n- b\n", (1, 1)),
            ("text", "just text\n", (1, 1)),
            ("number", "42\n", (1, 1)),
            ("null-document", "---\nnull\n", (2, 1)),
        ]
    ],
]


@pytest.mark.parametrize("case", YAML_CASES)
def test_yaml_problems(case: Case) -> None:
    case.check()


def test_keys_keep_their_text() -> None:
    # YAML 1.1 reads ON/no/yes as booleans; as keys they must stay what was written.
    loaded = parse_workflow(
        wf("""
        name: w
        tasks:
          - name: a
            command: x
            env: {ON: "1", no: "0"}
            params: {yes: 1}
        """),
        FILE,
    )
    task = loaded.workflow.tasks[0]
    assert task.env == {"ON": "1", "no": "0"}
    assert task.params == {"yes": 1}


def test_alias_bomb_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    from hpcflow.spec import yamlpos

    monkeypatch.setattr(yamlpos, "_MAX_VALUES", 1000)
    lines = ["name: w", "l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, 6):
        refs = ", ".join([f"*l{level - 1}"] * 10)
        lines.append(f"l{level}: &l{level} [{refs}]")
    with pytest.raises(SpecError) as info:
        parse_workflow("\n".join(lines) + "\n", FILE)
    (p,) = info.value.problems
    assert p.message.startswith("document too large (over 1,000 values")


# -- unknown keys -----------------------------------------------------------------------------

UNKNOWN_KEY_CASES = [
    case(
        "top-level-did-you-mean",
        """
        name: w
        descriptoin: typo
        tasks:
          - name: a
            command: x
        """,
        P((2, 1), "descriptoin", "unknown key 'descriptoin'", "did you mean 'description'?"),
    ),
    case(
        "top-level-without-close-match-lists-allowed-keys",
        """
        name: w
        zzz: 1
        tasks:
          - name: a
            command: x
        """,
        P((2, 1), hint=(Starts("allowed keys: "), Has("tasks", "defaults"))),
    ),
    case(
        "task-did-you-mean",
        one_task("command: x", "ouputs: [x.txt]"),
        P((5, 5), "tasks[0].ouputs", hint="did you mean 'outputs'?"),
    ),
    case(
        "resources-in-task-and-defaults",
        """
        name: w
        defaults:
          resources: {cpus: 2, memroy: 1GB}
        tasks:
          - name: a
            command: x
            resources:
              cpu: 2
        """,
        P((3, 24), "defaults.resources.memroy", hint="did you mean 'memory'?"),
        P((8, 7), "tasks[0].resources.cpu", hint="did you mean 'cpus'?"),
        ordered=False,
    ),
    case(
        "retries-did-you-mean",
        one_task("command: x", "retries: {attempts: 2, bakcoff: 5s}"),
        P((5, 28), hint="did you mean 'backoff'?"),
    ),
]


@pytest.mark.parametrize("case", UNKNOWN_KEY_CASES)
def test_unknown_keys(case: Case) -> None:
    case.check()


# -- wrong types, wrong values and missing keys -----------------------------------------------

SHAPE_CASES = [
    case(
        "cpus-wrong-type-points-at-the-value",
        one_task("command: x", "resources:", "  cpus: many"),
        P((6, 13), "tasks[0].resources.cpus", Has("integer")),
    ),
    case(
        "cpus-not-positive",
        one_task("command: x", "resources: {cpus: 0}"),
        P((5, 23), msg=Has("greater than 0")),
    ),
    case("tasks-not-a-list", "name: w\ntasks: {a: 1}\n", P((2, 8), "tasks")),
    case("tasks-empty", "name: w\ntasks: []\n", P((2, 8), msg=Has("at least 1"))),
    case(
        "parameter-not-plain",
        one_task("command: x", "params: {p: {nested: 1}}"),
        P((5, 17), msg="a parameter must be text, a number, true/false, or a list of those"),
    ),
    case(
        "missing-workflow-name",
        """
        tasks:
          - name: a
            command: x
        """,
        P((1, 1), msg="missing required key 'name'"),
    ),
    case(
        "missing-name-and-tasks-together",
        "description: nothing\n",
        P((1, 1), msg="missing required key 'name'"),
        P((1, 1), msg="missing required key 'tasks'"),
        ordered=False,
    ),
    case(
        "missing-task-name-points-at-the-task",
        """
        name: w
        tasks:
          - name: a
            command: x
          - command: y
        """,
        P((5, 5), "tasks[1]", "missing required key 'name'"),
    ),
    case(
        "empty-task-name",
        'name: w\ntasks:\n  - name: ""\n    command: x\n',
        P((3, 11), msg=Has("at least 1 character")),
    ),
    case(
        "task-with-two-actions",
        one_task("command: x", "argv: [x]"),
        P(
            (3, 5),
            "tasks[0]",
            "a task needs exactly one of 'command', 'argv' or 'python' (it has command, argv)",
        ),
    ),
    case(
        "task-with-no-action",
        one_task("outputs: [x]"),
        P((3, 5), msg="a task needs exactly one of 'command', 'argv' or 'python'"),
    ),
    case(
        "empty-argv",
        one_task("argv: []"),
        P((4, 11), "tasks[0].argv"),
    ),
    case(
        "several-shape-problems-together",
        """
        name: w
        tasks:
          - name: a
            command: x
            resources: {cpus: -1}
          - name: b
            command: y
            timeout: soon
            extra: 1
        """,
        P((5, 23), "tasks[0].resources.cpus"),
        P((8, 14), "tasks[1].timeout"),
        P((9, 5), "tasks[1].extra"),
        ordered=False,
    ),
    *[
        case(f"retries-{id}", one_task(f"retries: {value}", "command: x"), P(position, where))
        for id, value, position, where in [
            ("negative", "-1", (4, 14), "tasks[0].retries"),
            ("bool", "true", (4, 14), "tasks[0].retries"),
            ("negative-attempts", "{attempts: -1}", (4, 25), "tasks[0].retries.attempts"),
            ("factor-below-1", "{factor: 0.5}", (4, 23), "tasks[0].retries.factor"),
            ("bad-backoff", "{backoff: whenever}", (4, 24), "tasks[0].retries.backoff"),
            ("list", "[1]", (4, 14), "tasks[0].retries"),
        ]
    ],
]


@pytest.mark.parametrize("case", SHAPE_CASES)
def test_shape_problems(case: Case) -> None:
    case.check()


# -- task names and needs ---------------------------------------------------------------------

NEEDS_CASES = [
    case(
        "duplicate-task-name",
        """
        name: w
        tasks:
          - name: a
            command: x
          - name: b
            command: x
          - name: a
            command: y
        """,
        P(
            (7, 11),
            "tasks[2].name",
            "duplicate task name 'a'",
            "first used by tasks[0]; names must be unique",
        ),
    ),
    case(
        "needs-unknown-did-you-mean",
        """
        name: w
        tasks:
          - name: simulate
            command: x
          - name: reduce
            needs: [simulte]
            command: y
        """,
        P((6, 13), "tasks[1].needs[0]", "needs unknown task 'simulte'", "did you mean 'simulate'?"),
    ),
    case(
        "needs-unknown-lists-tasks",
        """
        name: w
        tasks:
          - name: simulate
            command: x
          - name: reduce
            needs:
              - simulate
              - qqq
            command: y
        """,
        P((8, 9), "tasks[1].needs[1]", hint="tasks are: simulate, reduce"),
    ),
    case(
        "needs-itself",
        one_task("needs: [a]", "command: x"),
        P((4, 13), msg="a task cannot need itself"),
    ),
    case(
        "problems-of-every-kind-together",
        """
        name: w
        tasks:
          - name: a
            needs: [zzzz]
            command: echo {nope}
          - name: a
            python: not-a-callable
            foreach: {seed: []}
        """,
        P((6, 11), msg="duplicate task name 'a'"),
        P((5, 14), msg="undefined placeholder {nope}"),
        P((4, 13), msg="needs unknown task 'zzzz'"),
        P((8, 21), msg="a swept parameter needs at least one value"),
        P((7, 13), msg="'not-a-callable' is not 'package.module:function'"),
    ),
]


@pytest.mark.parametrize("case", NEEDS_CASES)
def test_name_and_needs_problems(case: Case) -> None:
    case.check()


# -- placeholders -----------------------------------------------------------------------------

PLACEHOLDER_CASES = [
    case(
        "undefined-did-you-mean",
        one_task("foreach: {seed: [1, 2]}", "command: run --seed {sed}"),
        P((5, 14), "tasks[0].command", "undefined placeholder {sed}", "did you mean {seed}?"),
    ),
    case(
        "undefined-without-close-match-explains-escaping",
        one_task("command: echo {zzz}"),
        P(hint=Has("{{zzz}}", "params")),
    ),
    case(
        "undefined-everywhere-all-reported",
        """
        name: w
        tasks:
          - name: a
            argv: [prog, "{x}"]
            inputs: ["in-{y}.txt"]
            outputs: ["out-{z}.txt", "{inputs}.bak"]
            workdir: "runs/{w}"
            env: {V: "{v}"}
        """,
        P((4, 18), "tasks[0].argv[1]", "undefined placeholder {x}"),
        P((5, 14), "tasks[0].inputs[0]", "undefined placeholder {y}"),
        P((6, 15), "tasks[0].outputs[0]", "undefined placeholder {z}"),
        # {inputs} and {outputs} exist only in commands and argv.
        P((6, 30), "tasks[0].outputs[1]", "undefined placeholder {inputs}"),
        P((7, 14), "tasks[0].workdir", "undefined placeholder {w}"),
        P((8, 14), "tasks[0].env.V", "undefined placeholder {v}"),
    ),
    case(
        "inherited-must-be-defined-by-every-task",
        """
        name: w
        workdir: "runs/{tag}"
        defaults:
          env: {SEED: "{seed}"}
          workdir: "{seed}"
        tasks:
          - name: a
            foreach: {seed: [1, 2]}
            params: {tag: x}
            command: x
          - name: b
            command: y
            env: {SEED: "0"}
        """,
        P((2, 10), "workdir", (Starts("undefined placeholder {tag} ("), Has("'b'"))),
        P((5, 12), "defaults.workdir", Starts("undefined placeholder {seed} (")),
    ),
    *[
        case(
            f"reserved-name-as-param-{name}",
            one_task(f"params: {{{name}: 1}}", "command: x"),
            P(
                (4, 14 + len(name) + 2),
                f"tasks[0].params.{name}",
                f"{name!r} is a reserved placeholder name; choose another parameter name",
            ),
        )
        for name in ["inputs", "outputs"]
    ],
    case(
        "reserved-name-in-foreach",
        one_task("foreach: {outputs: [1, 2]}", "command: x"),
        P((4, 14), "tasks[0].foreach", Has("reserved placeholder name")),
    ),
    case(
        "both-swept-and-constant",
        one_task("foreach: {seed: [1, 2]}", "params: {seed: 3}", "command: x"),
        P((5, 14), msg="parameter 'seed' is both swept and constant"),
    ),
]


@pytest.mark.parametrize("case", PLACEHOLDER_CASES)
def test_placeholder_problems(case: Case) -> None:
    case.check()


def test_placeholders_from_params_and_builtins_are_defined() -> None:
    loaded = parse_workflow(
        wf("""
        name: w
        tasks:
          - name: a
            params: {n: 3, files: [a, b]}
            foreach: {seed: [1]}
            command: prog -n {n} --seed {seed} {files} {inputs} > {outputs}
            outputs: ["out-{seed}-{n}.txt"]
        """),
        FILE,
    )
    assert loaded.sweeps["a"].names == ("seed",)


def test_shell_syntax_is_not_a_placeholder() -> None:
    loaded = parse_workflow(
        wf("""
        name: w
        tasks:
          - name: a
            command: >-
              echo ${HOME} $HOME {a,b} {{literal}} | awk '{print $1}' | grep -E 'x{2,3}'
        """),
        FILE,
    )
    template = Template.parse(loaded.workflow.tasks[0].command or "")
    assert template.names == ()
    assert template.is_constant
    assert template.render({}) == (
        "echo ${HOME} $HOME {a,b} {literal} | awk '{print $1}' | grep -E 'x{2,3}'"
    )


def test_template_substitution_and_literals() -> None:
    template = Template.parse("cp {src} ${DEST}/{{src}}/{src}")
    assert template.names == ("src", "src")
    assert template.render({"src": "a b"}, shell_quote) == "cp 'a b' ${DEST}/{src}/'a b'"
    assert template.render({"src": "x"}) == "cp x ${DEST}/{src}/x"
    assert Template.parse("${x}").names == ()


def test_value_text_and_shell_quote() -> None:
    assert value_text(True) == "true"
    assert value_text(False) == "false"
    assert value_text([1, "a", True]) == "1 a true"
    assert value_text(2.5) == "2.5"
    assert shell_quote(["a b", "c"]) == "'a b' c"
    assert shell_quote("it's") == "'it'\"'\"'s'"


# -- python callables -------------------------------------------------------------------------

PYTHON_CASES = [
    *[
        case(
            f"bad-callable-{callable_}",
            one_task(f'python: "{callable_}"'),
            P(
                (4, 13),
                msg=f"{callable_!r} is not 'package.module:function'",
                hint="e.g. python: mypkg.analysis:summarize",
            ),
        )
        for callable_ in ["pkg.mod", "pkg.mod:", ":func", "pkg mod:f", "1pkg:f", "a:b:c"]
    ],
    case(
        "python-task-cannot-be-mpi",
        one_task("python: m:f", "resources: {ranks: 4}"),
        P((5, 24), msg=Has("ranks > 1")),
    ),
]


@pytest.mark.parametrize("case", PYTHON_CASES)
def test_python_problems(case: Case) -> None:
    case.check()


@pytest.mark.parametrize("callable_", ["mod:f", "pkg.sub.mod:Class.method", "_p:_f"])
def test_good_python_callable(callable_: str) -> None:
    parse_workflow(f"name: w\ntasks:\n  - name: a\n    python: {callable_}\n", FILE)


# -- foreach ----------------------------------------------------------------------------------


def test_foreach_forms_are_parsed() -> None:
    loaded = parse_workflow(
        wf("""
        name: w
        tasks:
          - name: a
            foreach:
              seed: {range: [2, 10, 3]}
              sample: [x, 1, 2.5, true]
            command: c
          - name: b
            foreach:
              product: {p: [1, 2]}
              zip: {x: [1, 2, 3], y: [a, b, c]}
            command: c
        """),
        FILE,
    )
    a, b = loaded.sweeps["a"], loaded.sweeps["b"]
    assert a.names == ("seed", "sample")
    assert a.groups[0][0].values == range(2, 10, 3)
    assert a.groups[1][0].values == ("x", 1, 2.5, True)
    assert len(a) == 12
    assert b.names == ("p", "x", "y")
    assert len(b) == 6
    assert list(b.combinations())[:4] == [(1, 1, "a"), (1, 2, "b"), (1, 3, "c"), (2, 1, "a")]


NO_VALUES = "a swept parameter needs at least one value"
RANGE_ARGS = "range takes 1 to 3 integers"
NOT_SWEEP_VALUE = "sweep values must be text, numbers or true/false"

# foreach: VALUE on line 4 of task 'a': (id, VALUE, column, where under tasks[0].foreach,
# the start of the message).
FOREACH_ROWS = [
    ("empty-list", "{seed: []}", 21, ".seed", NO_VALUES),
    ("empty-mapping", "{}", 14, "", "foreach must map parameter names to lists"),
    ("scalar", "{seed: 3}", 21, ".seed", "expected a list of values or {range: [start, stop]}"),
    ("range-no-args", "{seed: {range: []}}", 29, ".seed.range", RANGE_ARGS),
    ("range-four-args", "{seed: {range: [1, 2, 3, 4]}}", 29, ".seed.range", RANGE_ARGS),
    ("range-text", "{seed: {range: [a, 5]}}", 29, ".seed.range", RANGE_ARGS),
    ("range-bool", "{seed: {range: [0, true]}}", 29, ".seed.range", RANGE_ARGS),
    ("range-float", "{seed: {range: [0, 1.5]}}", 29, ".seed.range", RANGE_ARGS),
    ("range-scalar", "{seed: {range: 5}}", 29, ".seed.range", RANGE_ARGS),
    ("range-step-0", "{seed: {range: [0, 10, 0]}}", 29, ".seed.range", "range step cannot be 0"),
    ("range-empty", "{seed: {range: [5, 1]}}", 21, ".seed", NO_VALUES),
    ("nested-list-value", "{seed: [[1, 2]]}", 22, ".seed[0]", NOT_SWEEP_VALUE),
    ("null-value", "{seed: [null]}", 22, ".seed[0]", NOT_SWEEP_VALUE),
    ("bad-name", "{1x: [1]}", 15, ".1x", "parameter name '1x' must be an identifier"),
    (
        "zip-unequal",
        "{zip: {x: [1, 2], y: [a]}}",
        20,
        ".zip",
        "zip needs lists of equal length, got x: 2, y: 1",
    ),
    ("zip-list", "{zip: [1, 2]}", 20, ".zip", "expected a mapping of parameter names to lists"),
    (
        "key-beside-product",
        "{product: {x: [1]}, seed: [1]}",
        34,
        ".seed",
        "unexpected key 'seed' beside product/zip",
    ),
    (
        "swept-twice",
        "{product: {x: [1]}, zip: {x: [1, 2]}}",
        14,
        "",
        "parameter 'x' is swept twice",
    ),
    ("no-parameters", "{product: {}, zip: {}}", 14, "", "foreach names no parameters"),
    (
        "range-too-long",
        "{seed: {range: [0, 1000000000000000000000000000000]}}",
        29,
        ".seed.range",
        "range has more than",
    ),
    (
        "too-many-combinations",
        "{a: {range: [2000]}, b: {range: [1000]}}",
        14,
        "",
        "this sweep has 2,000,000 combinations",
    ),
    ("a-list", "[1, 2]", 14, "", "Input should be a valid dictionary"),
]

FOREACH_CASES = [
    *[
        case(
            id,
            one_task(f"foreach: {value}", "command: x"),
            P((4, column), "tasks[0].foreach" + where, Starts(message)),
        )
        for id, value, column, where, message in FOREACH_ROWS
    ],
    case(
        "zip-unequal-lists-every-length",
        """
        name: w
        tasks:
          - name: a
            foreach:
              zip:
                x: [1, 2, 3]
                y: [a, b]
                z: [1, 2, 3]
            command: x
        """,
        P((6, 9), msg="zip needs lists of equal length, got x: 3, y: 2, z: 3"),
    ),
]


@pytest.mark.parametrize("case", FOREACH_CASES)
def test_bad_foreach(case: Case) -> None:
    case.check()


# -- units ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (0, 0.0),
        (30, 30.0),
        (2.5, 2.5),
        ("45", 45.0),
        ("1.5", 1.5),
        ("45s", 45.0),
        ("90sec", 90.0),
        ("10m", 600.0),
        ("10min", 600.0),
        ("2h", 7200.0),
        ("2hr", 7200.0),
        ("1d", 86400.0),
        ("1h30m", 5400.0),
        ("1h 30m 15s", 5415.0),
        ("1.5h", 5400.0),
        ("10M", 600.0),
        ("1:30", 90.0),
        ("2:00:00", 7200.0),
        ("1:02:03", 3723.0),
        ("1-12:00:00", 129600.0),
        ("2-0", 172800.0),
        ("  5m  ", 300.0),
    ],
)
def test_parse_duration(value: object, seconds: float) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize(
    "value",
    [
        -1,
        -0.5,
        True,
        None,
        [],
        "",
        "soon",
        "5 parsecs",
        "1h30",
        "m",
        "1:2:3:4",
        "-5s",
        "1e3",
        float("inf"),
        float("nan"),
        10**400,
        "9" * 400 + "s",
    ],
)
def test_parse_duration_rejects(value: object) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(value)
    assert str(info.value)


@pytest.mark.parametrize(
    ("value", "num_bytes"),
    [
        (512, 512 * MiB),
        (0.5, MiB // 2),
        ("512", 512 * MiB),
        ("512MB", 512 * MiB),
        ("512M", 512 * MiB),
        ("512mib", 512 * MiB),
        ("4GB", 4 * GiB),
        ("4G", 4 * GiB),
        ("2GiB", 2 * GiB),
        ("1.5G", 3 * GiB // 2),
        ("100KB", 100 * 1024),
        ("1T", 1024**4),
        ("1P", 1024**5),
        ("512B", 512),
        ("512b", 512),
        (" 4 GB ", 4 * GiB),
    ],
)
def test_parse_memory(value: object, num_bytes: int) -> None:
    assert parse_memory(value) == num_bytes


@pytest.mark.parametrize(
    "value",
    [
        -1,
        True,
        None,
        [],
        "",
        "lots",
        "4XB",
        "GB",
        "4 G B",
        "4i",
        "-4GB",
        float("inf"),
        float("nan"),
        10**400,
        "9" * 400 + "G",
    ],
)
def test_parse_memory_rejects(value: object) -> None:
    with pytest.raises(ValueError) as info:
        parse_memory(value)
    assert str(info.value)


def test_format_units() -> None:
    assert format_duration(5400) == "1:30:00"
    assert format_duration(59.6) == "0:01:00"
    assert format_duration(90000) == "25:00:00"
    assert format_memory(512) == "512 B"
    assert format_memory(3 * GiB // 2) == "1.5 GiB"
    assert format_memory(5 * 1024**5) == "5120.0 TiB"


def test_units_in_a_workflow() -> None:
    loaded = parse_workflow(
        wf("""
        name: w
        defaults:
          resources: {memory: 2GB, walltime: "1:00:00"}
          timeout: 90s
        tasks:
          - name: a
            command: x
            timeout: 1h30m
            resources: {memory: 512, walltime: 10m}
        """),
        FILE,
    )
    d = loaded.workflow.defaults
    assert d.resources.memory == 2 * GiB and d.resources.walltime == 3600.0 and d.timeout == 90.0
    t = loaded.workflow.tasks[0]
    assert t.timeout == 5400.0
    assert t.resources is not None
    assert t.resources.memory == 512 * MiB and t.resources.walltime == 600.0


UNIT_CASES = [
    case(id, one_task(line, "command: x"), P(position, msg=Starts(message)))
    for id, line, position, message in [
        ("timeout-text", "timeout: soon", (4, 14), "cannot read 'soon' as a duration"),
        ("timeout-negative", "timeout: -5", (4, 14), "a duration cannot be negative"),
        ("timeout-inf", "timeout: .inf", (4, 14), "a duration must be a finite number"),
        ("timeout-huge", "timeout: 1" + "0" * 400, (4, 14), "a duration must be a finite number"),
        ("memory-text", "resources: {memory: lots}", (4, 25), "cannot read 'lots' as memory"),
        ("memory-nan", "resources: {memory: .nan}", (4, 25), "memory must be a finite number"),
        ("memory-inf", "resources: {memory: .inf}", (4, 25), "memory must be a finite number"),
        ("walltime-bool", "resources: {walltime: true}", (4, 27), "expected a duration"),
    ]
]


@pytest.mark.parametrize("case", UNIT_CASES)
def test_bad_units_in_a_workflow(case: Case) -> None:
    case.check()


# -- retries and defaults ---------------------------------------------------------------------


def test_retries_as_int_and_mapping() -> None:
    loaded = parse_workflow(
        wf("""
        name: w
        tasks:
          - name: a
            command: x
            retries: 3
          - name: b
            command: x
            retries: {attempts: 2, backoff: 10s, factor: 3, max_backoff: 1m}
        """),
        FILE,
    )
    a, b = (t.retries for t in loaded.workflow.tasks)
    assert a is not None and b is not None
    assert (a.attempts, a.backoff, a.factor, a.max_backoff) == (3, 1.0, 2.0, 300.0)
    assert (b.attempts, b.backoff, b.factor, b.max_backoff) == (2, 10.0, 3.0, 60.0)
    assert [b.delay(n) for n in (1, 2, 3)] == [10.0, 30.0, 60.0]
    assert [a.delay(n) for n in (1, 2, 3, 10)] == [1.0, 2.0, 4.0, 300.0]


def test_defaults_are_merged_per_field() -> None:
    loaded = parse_workflow(
        wf("""
        name: w
        defaults:
          resources: {cpus: 4, memory: 8GB, walltime: 1h}
          retries: 2
          timeout: 2h
          env: {A: "1", B: "2"}
        tasks:
          - name: inherit
            command: x
          - name: override
            command: x
            resources: {memory: 16GB, gpus: 1}
            retries: {attempts: 5}
            timeout: 10m
            env: {B: "3", C: "4"}
        """),
        FILE,
    )
    graph = build_graph(loaded, check_files=False)
    inherit, override = graph.templates
    assert inherit.resources == loaded.workflow.defaults.resources
    assert (inherit.resources.cpus, inherit.resources.memory, inherit.resources.walltime) == (
        4,
        8 * GiB,
        3600.0,
    )
    assert inherit.retries.attempts == 2
    assert inherit.timeout == 7200.0
    assert inherit.env == {"A": "1", "B": "2"}
    r = override.resources
    # Fields the task sets win; the others come from the defaults.
    assert (r.cpus, r.memory, r.walltime, r.gpus, r.ranks) == (4, 16 * GiB, 3600.0, 1, 1)
    assert override.retries.attempts == 5
    assert override.timeout == 600.0
    assert override.env == {"A": "1", "B": "3", "C": "4"}


def test_resource_merge_keeps_explicit_values_equal_to_the_model_default() -> None:
    loaded = parse_workflow(
        wf("""
        name: w
        defaults:
          resources: {cpus: 8}
        tasks:
          - name: a
            command: x
            resources: {cpus: 1}
        """),
        FILE,
    )
    (template,) = build_graph(loaded, check_files=False).templates
    assert template.resources.cpus == 1


def test_defaults_without_any_setting() -> None:
    (template,) = build_graph(
        parse_workflow("name: w\ntasks:\n  - name: a\n    command: x\n", FILE), check_files=False
    ).templates
    assert template.retries.attempts == 0
    assert template.timeout is None
    assert template.env == {}
    assert template.resources.cpus == 1


def test_a_run_s_wall_time_reads_well_at_every_scale() -> None:
    assert format_elapsed(0.0123) == "12 ms"
    assert format_elapsed(0.32) == "320 ms"
    assert format_elapsed(4.24) == "4.2s"
    assert format_elapsed(725) == "12m 05s"
    assert format_elapsed(7380) == "2h 03m"
    # Rounded before the unit is chosen: never "1000 ms" or "60.0s".
    assert format_elapsed(0.9996) == "1.0s"
    assert format_elapsed(59.96) == "1m 00s"
