"""Unit tests of the workflow loader (hpcflow.spec): valid files, and every kind of problem
with the exact file:line:column it is reported at."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hpcflow.dag import build_graph
from hpcflow.errors import HpcflowError, SpecError, SpecProblem
from hpcflow.spec import load_workflow, parse_workflow
from hpcflow.spec.placeholders import Template, shell_quote, value_text
from hpcflow.spec.units import format_duration, format_memory, parse_duration, parse_memory

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


def one_problem(text: str) -> SpecProblem:
    found = problems(text)
    assert len(found) == 1, [p.render() for p in found]
    return found[0]


def at(p: SpecProblem) -> tuple[int | None, int | None]:
    return (p.line, p.column)


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


def test_yaml_syntax_error_hints_to_quote_placeholders_in_flow_lists() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: a
            foreach: {i: [1, 2]}
            command: touch {outputs}
            outputs: [out_{i}.txt]
        """)
    assert at(p) == (6, 19)  # the '{' of out_{i}
    assert p.message.startswith("YAML syntax error:")
    assert p.hint is not None and '["out_{i}.txt"]' in p.hint


def test_yaml_syntax_error_without_braces_has_no_hint() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: a
            command: x
          bad: [
        """)
    assert at(p) == (5, 3)
    assert p.message.startswith("YAML syntax error:")
    assert p.hint is None


def test_tab_indentation_is_a_syntax_error() -> None:
    with pytest.raises(SpecError) as info:
        parse_workflow("name: w\ntasks:\n\t- name: a\n", FILE)
    (p,) = info.value.problems
    assert at(p) == (3, 1)
    assert "YAML syntax error" in p.message


def test_duplicate_yaml_keys() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: a
            command: x
            command: y
        """)
    assert at(p) == (5, 5)
    assert p.where == "tasks[0].command"
    assert p.message == "duplicate key 'command'"
    assert p.hint == "first defined on line 4"


def test_duplicate_top_level_keys_are_all_reported() -> None:
    found = problems("""
        name: w
        name: v
        tasks:
          - name: a
            command: x
        tasks: []
        """)
    assert [(at(p), p.message) for p in found] == [
        ((2, 1), "duplicate key 'name'"),
        ((6, 1), "duplicate key 'tasks'"),
    ]


def test_yaml_merge_keys_are_rejected() -> None:
    p = one_problem("""
        name: w
        tasks:
          - &base
            name: a
            command: x
          - <<: *base
            name: b
        """)
    assert at(p) == (6, 5)
    assert "merge keys" in p.message
    assert p.hint is not None and "defaults" in p.hint


def test_non_text_keys_are_rejected() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: a
            command: x
            params:
              [a, b]: 1
        """)
    assert at(p) == (6, 7)
    assert p.message == "keys must be plain text"


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


def test_bad_standard_tag_is_a_positioned_problem() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: a
            command: x
            params: {n: !!int abc}
        """)
    assert at(p) == (5, 17)
    assert p.where == "tasks[0].params.n"
    assert p.message == "cannot read 'abc' as !!int"


def test_document_nested_too_deeply() -> None:
    # 30 block levels and 40 flow levels: each within the scanner's limit, too deep together.
    with pytest.raises(SpecError) as info:
        parse_workflow("name: w\ntasks:\n" + "- " * 30 + "[" * 40 + "]" * 40 + "\n", FILE)
    (p,) = info.value.problems
    assert p.message == "document nested too deeply (over 64 levels)"
    assert p.line == 3
    assert p.where.startswith("tasks[0][0]")


def test_very_deep_flow_nesting_is_a_quick_spec_error() -> None:
    # PyYAML's scanner is quadratic in the depth of '[': stop at 64 levels.
    with pytest.raises(SpecError) as info:
        parse_workflow("name: w\ntasks: " + "[" * 50_000 + "]" * 50_000 + "\n", FILE)
    (p,) = info.value.problems
    assert at(p) == (2, 8 + 64)
    assert p.message == "YAML syntax error: [...] and {...} nested more than 64 deep"
    assert p.hint is None


def test_very_deep_block_nesting_is_a_spec_error() -> None:
    # PyYAML composes recursively: this must not escape as RecursionError.
    with pytest.raises(SpecError) as info:
        parse_workflow("name: w\ntasks:\n" + "- " * 20_000 + "x\n", FILE)
    (p,) = info.value.problems
    assert "nested too deeply" in p.message


def test_recursive_alias_is_a_spec_error() -> None:
    with pytest.raises(SpecError) as info:
        parse_workflow("name: w\ntasks: &a [*a]\n", FILE)
    assert any("nested too deeply" in p.message for p in info.value.problems)


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


@pytest.mark.parametrize(
    ("char", "position"), [("\x01", (3, 7)), ("\x7f", (1, 1)), ("\ud800", (2, 8))]
)
def test_control_characters_are_positioned(char: str, position: tuple[int, int]) -> None:
    text = {
        (3, 7): f"name: w\ntasks:\n  - na{char}me: a\n",
        (1, 1): f"{char}name: w\n",
        (2, 8): f"name: w\ntasks: {char}\n",
    }[position]
    with pytest.raises(SpecError) as info:
        parse_workflow(text, FILE)
    (p,) = info.value.problems
    assert at(p) == position
    assert p.message == f"character U+{ord(char):04X} is not allowed in a YAML file"


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("", (None, None)),
        ("# only a comment\n", (None, None)),
        ("- a\n- b\n", (1, 1)),
        ("just text\n", (1, 1)),
        ("42\n", (1, 1)),
        ("---\nnull\n", (2, 1)),
    ],
)
def test_a_document_that_is_not_a_mapping(
    text: str, position: tuple[int | None, int | None]
) -> None:
    with pytest.raises(SpecError) as info:
        parse_workflow(text, FILE)
    (p,) = info.value.problems
    assert p.file == FILE
    assert "must be a mapping" in p.message
    assert at(p) == position


def test_several_documents_are_a_syntax_error() -> None:
    with pytest.raises(SpecError) as info:
        parse_workflow("name: w\n---\nname: v\n", FILE)
    (p,) = info.value.problems
    assert p.line == 2
    assert "YAML syntax error" in p.message


# -- shape and type problems ------------------------------------------------------------------


def test_unknown_top_level_key_suggests_the_right_one() -> None:
    p = one_problem("""
        name: w
        descriptoin: typo
        tasks:
          - name: a
            command: x
        """)
    assert at(p) == (2, 1)
    assert p.where == "descriptoin"
    assert p.message == "unknown key 'descriptoin'"
    assert p.hint == "did you mean 'description'?"


def test_unknown_key_without_close_match_lists_allowed_keys() -> None:
    p = one_problem("""
        name: w
        zzz: 1
        tasks:
          - name: a
            command: x
        """)
    assert at(p) == (2, 1)
    assert p.hint is not None and p.hint.startswith("allowed keys: ")
    assert "tasks" in p.hint and "defaults" in p.hint


def test_unknown_task_key_suggests_the_right_one() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: a
            command: x
            ouputs: [x.txt]
        """)
    assert at(p) == (5, 5)
    assert p.where == "tasks[0].ouputs"
    assert p.hint == "did you mean 'outputs'?"


def test_unknown_resource_keys_in_task_and_defaults() -> None:
    found = problems("""
        name: w
        defaults:
          resources: {cpus: 2, memroy: 1GB}
        tasks:
          - name: a
            command: x
            resources:
              cpu: 2
        """)
    by_where = {p.where: p for p in found}
    assert set(by_where) == {"defaults.resources.memroy", "tasks[0].resources.cpu"}
    assert at(by_where["defaults.resources.memroy"]) == (3, 24)
    assert by_where["defaults.resources.memroy"].hint == "did you mean 'memory'?"
    assert at(by_where["tasks[0].resources.cpu"]) == (8, 7)
    assert by_where["tasks[0].resources.cpu"].hint == "did you mean 'cpus'?"


def test_unknown_retries_key_suggests_the_right_one() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: a
            command: x
            retries: {attempts: 2, bakcoff: 5s}
        """)
    assert at(p) == (5, 28)
    assert p.hint == "did you mean 'backoff'?"


def test_wrong_type_points_at_the_value() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: a
            command: x
            resources:
              cpus: many
        """)
    assert at(p) == (6, 13)
    assert p.where == "tasks[0].resources.cpus"
    assert "integer" in p.message


def test_non_positive_cpus() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: a
            command: x
            resources: {cpus: 0}
        """)
    assert at(p) == (5, 23)
    assert "greater than 0" in p.message


def test_tasks_must_be_a_non_empty_list() -> None:
    p = one_problem("name: w\ntasks: {a: 1}\n")
    assert at(p) == (2, 8)
    assert p.where == "tasks"
    p = one_problem("name: w\ntasks: []\n")
    assert at(p) == (2, 8)
    assert "at least 1" in p.message


def test_bad_parameter_value_has_a_plain_message() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: a
            command: x
            params: {p: {nested: 1}}
        """)
    assert at(p) == (5, 17)
    assert p.message == "a parameter must be text, a number, true/false, or a list of those"


def test_missing_workflow_name() -> None:
    p = one_problem("""
        tasks:
          - name: a
            command: x
        """)
    assert at(p) == (1, 1)
    assert p.message == "missing required key 'name'"


def test_missing_tasks_and_name_are_reported_together() -> None:
    found = problems("description: nothing\n")
    assert sorted(p.message for p in found) == [
        "missing required key 'name'",
        "missing required key 'tasks'",
    ]
    assert all(at(p) == (1, 1) for p in found)


def test_missing_task_name_points_at_the_task() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: a
            command: x
          - command: y
        """)
    assert at(p) == (5, 5)
    assert p.where == "tasks[1]"
    assert p.message == "missing required key 'name'"


def test_empty_task_name() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: ""
            command: x
        """)
    assert at(p) == (3, 11)
    assert "at least 1 character" in p.message


def test_task_with_two_actions() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: a
            command: x
            argv: [x]
        """)
    assert at(p) == (3, 5)
    assert p.where == "tasks[0]"
    assert (
        p.message
        == "a task needs exactly one of 'command', 'argv' or 'python' (it has command, argv)"
    )


def test_task_with_no_action() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: a
            outputs: [x]
        """)
    assert at(p) == (3, 5)
    assert p.message == "a task needs exactly one of 'command', 'argv' or 'python'"


def test_empty_argv() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: a
            argv: []
        """)
    assert at(p) == (4, 11)
    assert p.where == "tasks[0].argv"


# -- whole-document checks --------------------------------------------------------------------


def test_duplicate_task_names() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: a
            command: x
          - name: b
            command: x
          - name: a
            command: y
        """)
    assert at(p) == (7, 11)
    assert p.where == "tasks[2].name"
    assert p.message == "duplicate task name 'a'"
    assert p.hint == "first used by tasks[0]; names must be unique"


def test_needs_unknown_task_with_did_you_mean() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: simulate
            command: x
          - name: reduce
            needs: [simulte]
            command: y
        """)
    assert at(p) == (6, 13)
    assert p.where == "tasks[1].needs[0]"
    assert p.message == "needs unknown task 'simulte'"
    assert p.hint == "did you mean 'simulate'?"


def test_needs_unknown_task_without_close_match_lists_tasks() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: simulate
            command: x
          - name: reduce
            needs:
              - simulate
              - qqq
            command: y
        """)
    assert at(p) == (8, 9)
    assert p.where == "tasks[1].needs[1]"
    assert p.hint == "tasks are: simulate, reduce"


def test_task_cannot_need_itself() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: a
            needs: [a]
            command: x
        """)
    assert at(p) == (4, 13)
    assert p.message == "a task cannot need itself"


def test_undefined_placeholder_with_did_you_mean() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: a
            foreach: {seed: [1, 2]}
            command: run --seed {sed}
        """)
    assert at(p) == (5, 14)
    assert p.where == "tasks[0].command"
    assert p.message == "undefined placeholder {sed}"
    assert p.hint == "did you mean {seed}?"


def test_undefined_placeholder_without_close_match_explains_escaping() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: a
            command: echo {zzz}
        """)
    assert p.hint is not None
    assert "{{zzz}}" in p.hint and "params" in p.hint


def test_undefined_placeholders_everywhere_are_all_reported() -> None:
    found = problems("""
        name: w
        tasks:
          - name: a
            argv: [prog, "{x}"]
            inputs: ["in-{y}.txt"]
            outputs: ["out-{z}.txt", "{inputs}.bak"]
            workdir: "runs/{w}"
            env: {V: "{v}"}
        """)
    assert [(at(p), p.where, p.message) for p in found] == [
        ((4, 18), "tasks[0].argv[1]", "undefined placeholder {x}"),
        ((5, 14), "tasks[0].inputs[0]", "undefined placeholder {y}"),
        ((6, 15), "tasks[0].outputs[0]", "undefined placeholder {z}"),
        # {inputs} and {outputs} exist only in commands and argv.
        ((6, 30), "tasks[0].outputs[1]", "undefined placeholder {inputs}"),
        ((7, 14), "tasks[0].workdir", "undefined placeholder {w}"),
        ((8, 14), "tasks[0].env.V", "undefined placeholder {v}"),
    ]


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


@pytest.mark.parametrize("name", ["inputs", "outputs"])
def test_reserved_placeholder_names_as_params(name: str) -> None:
    p = one_problem(f"""
        name: w
        tasks:
          - name: a
            params: {{{name}: 1}}
            command: x
        """)
    assert at(p) == (4, 14 + len(name) + 2)
    assert p.where == f"tasks[0].params.{name}"
    assert p.message == f"{name!r} is a reserved placeholder name; choose another parameter name"


def test_reserved_placeholder_name_in_foreach() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: a
            foreach: {outputs: [1, 2]}
            command: x
        """)
    assert at(p) == (4, 14)
    assert p.where == "tasks[0].foreach"
    assert "reserved placeholder name" in p.message


def test_parameter_both_swept_and_constant() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: a
            foreach: {seed: [1, 2]}
            params: {seed: 3}
            command: x
        """)
    assert at(p) == (5, 14)
    assert p.message == "parameter 'seed' is both swept and constant"


@pytest.mark.parametrize(
    "callable_", ["pkg.mod", "pkg.mod:", ":func", "pkg mod:f", "1pkg:f", "a:b:c"]
)
def test_bad_python_callable(callable_: str) -> None:
    p = one_problem(f"""
        name: w
        tasks:
          - name: a
            python: "{callable_}"
        """)
    assert at(p) == (4, 13)
    assert p.message == f"{callable_!r} is not 'package.module:function'"
    assert p.hint == "e.g. python: mypkg.analysis:summarize"


@pytest.mark.parametrize("callable_", ["mod:f", "pkg.sub.mod:Class.method", "_p:_f"])
def test_good_python_callable(callable_: str) -> None:
    parse_workflow(f"name: w\ntasks:\n  - name: a\n    python: {callable_}\n", FILE)


def test_python_task_cannot_be_mpi() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: a
            python: m:f
            resources: {ranks: 4}
        """)
    assert at(p) == (5, 24)
    assert "ranks > 1" in p.message


def test_several_problems_are_reported_together() -> None:
    found = problems("""
        name: w
        tasks:
          - name: a
            needs: [zzzz]
            command: echo {nope}
          - name: a
            python: not-a-callable
            foreach: {seed: []}
        """)
    assert [(at(p), p.message) for p in found] == [
        ((6, 11), "duplicate task name 'a'"),
        ((5, 14), "undefined placeholder {nope}"),
        ((4, 13), "needs unknown task 'zzzz'"),
        ((8, 21), "a swept parameter needs at least one value"),
        ((7, 13), "'not-a-callable' is not 'package.module:function'"),
    ]


def test_several_shape_problems_are_reported_together() -> None:
    found = problems("""
        name: w
        tasks:
          - name: a
            command: x
            resources: {cpus: -1}
          - name: b
            command: y
            timeout: soon
            extra: 1
        """)
    assert sorted((at(p), p.where) for p in found) == [
        ((5, 23), "tasks[0].resources.cpus"),
        ((8, 14), "tasks[1].timeout"),
        ((9, 5), "tasks[1].extra"),
    ]


def test_inherited_placeholders_must_be_defined_by_every_task() -> None:
    found = problems("""
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
        """)
    assert [(at(p), p.where, p.message.split(" (")[0]) for p in found] == [
        ((2, 10), "workdir", "undefined placeholder {tag}"),
        ((5, 12), "defaults.workdir", "undefined placeholder {seed}"),
    ]
    assert "'b'" in found[0].message


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


FOREACH_ERRORS = [
    (
        "foreach: {seed: []}",
        (4, 21),
        "tasks[0].foreach.seed",
        "a swept parameter needs at least one value",
    ),
    ("foreach: {}", (4, 14), "tasks[0].foreach", "foreach must map parameter names to lists"),
    (
        "foreach: {seed: 3}",
        (4, 21),
        "tasks[0].foreach.seed",
        "expected a list of values or {range: [start, stop]}",
    ),
    (
        "foreach: {seed: {range: []}}",
        (4, 29),
        "tasks[0].foreach.seed.range",
        "range takes 1 to 3 integers",
    ),
    (
        "foreach: {seed: {range: [1, 2, 3, 4]}}",
        (4, 29),
        "tasks[0].foreach.seed.range",
        "range takes 1 to 3 integers",
    ),
    (
        "foreach: {seed: {range: [a, 5]}}",
        (4, 29),
        "tasks[0].foreach.seed.range",
        "range takes 1 to 3 integers",
    ),
    (
        "foreach: {seed: {range: [0, true]}}",
        (4, 29),
        "tasks[0].foreach.seed.range",
        "range takes 1 to 3 integers",
    ),
    (
        "foreach: {seed: {range: [0, 1.5]}}",
        (4, 29),
        "tasks[0].foreach.seed.range",
        "range takes 1 to 3 integers",
    ),
    (
        "foreach: {seed: {range: 5}}",
        (4, 29),
        "tasks[0].foreach.seed.range",
        "range takes 1 to 3 integers",
    ),
    (
        "foreach: {seed: {range: [0, 10, 0]}}",
        (4, 29),
        "tasks[0].foreach.seed.range",
        "range step cannot be 0",
    ),
    (
        "foreach: {seed: {range: [5, 1]}}",
        (4, 21),
        "tasks[0].foreach.seed",
        "a swept parameter needs at least one value",
    ),
    (
        "foreach: {seed: [[1, 2]]}",
        (4, 22),
        "tasks[0].foreach.seed[0]",
        "sweep values must be text, numbers or true/false",
    ),
    (
        "foreach: {seed: [null]}",
        (4, 22),
        "tasks[0].foreach.seed[0]",
        "sweep values must be text, numbers or true/false",
    ),
    (
        "foreach: {1x: [1]}",
        (4, 15),
        "tasks[0].foreach.1x",
        "parameter name '1x' must be an identifier",
    ),
    (
        "foreach: {zip: {x: [1, 2], y: [a]}}",
        (4, 20),
        "tasks[0].foreach.zip",
        "zip needs lists of equal length, got x: 2, y: 1",
    ),
    (
        "foreach: {zip: [1, 2]}",
        (4, 20),
        "tasks[0].foreach.zip",
        "expected a mapping of parameter names to lists",
    ),
    (
        "foreach: {product: {x: [1]}, seed: [1]}",
        (4, 34),
        "tasks[0].foreach.seed",
        "unexpected key 'seed' beside product/zip",
    ),
    (
        "foreach: {product: {x: [1]}, zip: {x: [1, 2]}}",
        (4, 14),
        "tasks[0].foreach",
        "parameter 'x' is swept twice",
    ),
    ("foreach: {product: {}, zip: {}}", (4, 14), "tasks[0].foreach", "foreach names no parameters"),
    (
        "foreach: {seed: {range: [0, 1000000000000000000000000000000]}}",
        (4, 29),
        "tasks[0].foreach.seed.range",
        "range has more than",
    ),
    (
        "foreach: {a: {range: [2000]}, b: {range: [1000]}}",
        (4, 14),
        "tasks[0].foreach",
        "this sweep has 2,000,000 combinations",
    ),
    ("foreach: [1, 2]", (4, 14), "tasks[0].foreach", "Input should be a valid dictionary"),
]


@pytest.mark.parametrize(("line", "position", "where", "message"), FOREACH_ERRORS)
def test_bad_foreach(line: str, position: tuple[int, int], where: str, message: str) -> None:
    p = one_problem(f"""
        name: w
        tasks:
          - name: a
            {line}
            command: x
        """)
    assert (at(p), p.where) == (position, where)
    assert p.message.startswith(message), p.message


def test_zip_length_mismatch_hint_lists_every_length() -> None:
    p = one_problem("""
        name: w
        tasks:
          - name: a
            foreach:
              zip:
                x: [1, 2, 3]
                y: [a, b]
                z: [1, 2, 3]
            command: x
        """)
    assert at(p) == (6, 9)
    assert p.message == "zip needs lists of equal length, got x: 3, y: 2, z: 3"


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


@pytest.mark.parametrize(
    ("line", "position", "message"),
    [
        ("timeout: soon", (4, 14), "cannot read 'soon' as a duration"),
        ("timeout: -5", (4, 14), "a duration cannot be negative"),
        ("timeout: .inf", (4, 14), "a duration must be a finite number"),
        ("timeout: 1" + "0" * 400, (4, 14), "a duration must be a finite number"),
        ("resources: {memory: lots}", (4, 25), "cannot read 'lots' as memory"),
        ("resources: {memory: .nan}", (4, 25), "memory must be a finite number"),
        ("resources: {memory: .inf}", (4, 25), "memory must be a finite number"),
        ("resources: {walltime: true}", (4, 27), "expected a duration"),
    ],
)
def test_bad_units_in_a_workflow(line: str, position: tuple[int, int], message: str) -> None:
    p = one_problem(f"""
        name: w
        tasks:
          - name: a
            {line}
            command: x
        """)
    assert at(p) == position
    assert p.message.startswith(message), p.message


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


@pytest.mark.parametrize(
    ("value", "position", "where"),
    [
        ("-1", (4, 14), "tasks[0].retries"),
        ("true", (4, 14), "tasks[0].retries"),
        ("{attempts: -1}", (4, 25), "tasks[0].retries.attempts"),
        ("{factor: 0.5}", (4, 23), "tasks[0].retries.factor"),
        ("{backoff: whenever}", (4, 24), "tasks[0].retries.backoff"),
        ("[1]", (4, 14), "tasks[0].retries"),
    ],
)
def test_bad_retries(value: str, position: tuple[int, int], where: str) -> None:
    p = one_problem(f"""
        name: w
        tasks:
          - name: a
            retries: {value}
            command: x
        """)
    assert (at(p), p.where) == (position, where)


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
