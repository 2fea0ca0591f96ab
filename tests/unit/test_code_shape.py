"""The shape of the code, checked: records are built by name, the call factory is built
complete, and no function, class or plugin session module outgrows its size limit.

A record (a class of the project declared as a dataclass or a NamedTuple) built with many
positional arguments is read by counting: ``AllocationRow(a, b, c, d, e, f, g, …)`` says
nothing of which value is which, and one field added or moved in the class shifts every
value after it without an error. So no call passes a record more than
:data:`MAX_POSITIONAL` positional arguments, nor spreads a sequence over its fields
(``Row(*row)``: a SQL row's columns taken in the class's order).

The :class:`~hpcflow.engine.calls_factory.CallFactory` renders every call of a run from
what it was built with; a stage that learns more (the run's folder, the pilot's MPI
launch, where values lie) builds a new one (``for_run``, ``dataclasses.replace``) rather
than setting fields on one that others already hold.

A function longer than :data:`MAX_FUNCTION_LINES` or a class longer than
:data:`MAX_CLASS_LINES` (counted from its ``def``/``class`` line to its last, as ast's
``lineno``..``end_lineno``) does several things that want names of their own; the plugin's
``session.py`` has at most :data:`MAX_SESSION_LINES` lines so that the plugin stays a thin
adapter. The few that are over today, awaiting a larger split, are listed in
:data:`OVERSIZED_ALLOWED` with their sizes as ceilings: they may shrink, never grow.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("hpcflow", "snakemake_executor_plugin_hpcflow")

#: The most positional arguments a call may pass to a record.
MAX_POSITIONAL = 5


def _sources() -> Iterator[tuple[Path, ast.Module]]:
    for top in PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


@functools.cache
def _project() -> list[tuple[Path, ast.Module]]:
    """The project's modules, parsed once for every check here."""
    return list(_sources())


def _last_name(node: ast.expr) -> str | None:
    """``X`` of ``X`` or of ``mod.X`` (None for any other expression)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_record(node: ast.ClassDef) -> bool:
    """Whether ``node`` is declared a dataclass (``@dataclass``, ``@dataclass(...)``,
    ``@dataclasses.dataclass``) or a NamedTuple (``class X(NamedTuple)``)."""
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if _last_name(target) == "dataclass":
            return True
    return any(_last_name(base) == "NamedTuple" for base in node.bases)


def record_names(trees: list[tuple[Path, ast.Module]]) -> set[str]:
    """The names of every record class the project defines."""
    return {
        node.name
        for _, tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and _is_record(node)
    }


def positional_builds(trees: list[tuple[Path, ast.Module]]) -> list[str]:
    """``file:line: Name(n positional)`` for each call that builds a record from more
    than :data:`MAX_POSITIONAL` positional arguments or from a spread sequence."""
    records = record_names(trees)
    found: list[str] = []
    for path, tree in trees:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _last_name(node.func)
            if name not in records:
                continue
            spread = any(isinstance(arg, ast.Starred) for arg in node.args)
            if len(node.args) > MAX_POSITIONAL or spread:
                what = "a spread sequence" if spread else f"{len(node.args)} positional"
                where = path.relative_to(ROOT)
                found.append(f"{where}:{node.lineno}: {name}({what})")
    return found


#: The module that owns the call factory: the only one that may set its fields.
FACTORY_MODULE = Path("hpcflow/engine/calls_factory.py")


def _names_factory(node: ast.expr) -> bool:
    """Whether ``node`` is ``factory`` or ``….factory`` (a call factory, by its name)."""
    return _last_name(node) == "factory"


def factory_changes(trees: list[tuple[Path, ast.Module]]) -> list[str]:
    """``file:line: target`` for each statement outside :data:`FACTORY_MODULE` that sets
    a field of a call factory (``prepared.factory.paths = …``) or an item of one
    (``factory.value_runs[i] = …``)."""
    found: list[str] = []
    for path, tree in trees:
        where = path.relative_to(ROOT)
        if where == FACTORY_MODULE:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            else:
                continue
            for target in targets:
                if isinstance(target, ast.Subscript):
                    target = target.value  # factory.value_runs[i] = … changes value_runs
                if isinstance(target, ast.Attribute) and _names_factory(target.value):
                    found.append(f"{where}:{node.lineno}: {ast.unparse(target)}")
    return found


def test_records_are_built_by_name() -> None:
    found = positional_builds(_project())
    assert not found, (
        f"{len(found)} calls build a record positionally; pass its fields by name:\n"
        + "\n".join(found)
    )


def test_the_check_sees_a_positional_build() -> None:
    """The check itself: a dataclass and a NamedTuple built positionally are found, by
    bare and by dotted name; a build by name, or with few positional values, is not."""
    source = (
        "from dataclasses import dataclass\n"
        "from typing import NamedTuple\n"
        "@dataclass(slots=True)\n"
        "class Row:\n"
        "    a: int\n"
        "class Pair(NamedTuple):\n"
        "    a: int\n"
        "Row(1, 2, 3, 4, 5, 6)\n"
        "mod.Pair(1, 2, 3, 4, 5, 6, 7)\n"
        "Row(*values)\n"
        "Row(1, 2, 3, 4, 5, f=6)\n"
        "Other(1, 2, 3, 4, 5, 6)\n"
    )
    trees = [(ROOT / "example.py", ast.parse(source))]
    assert positional_builds(trees) == [
        "example.py:8: Row(6 positional)",
        "example.py:9: Pair(7 positional)",
        "example.py:10: Row(a spread sequence)",
    ]


def test_the_call_factory_is_built_complete() -> None:
    found = factory_changes(_project())
    assert not found, (
        f"{len(found)} statements change a call factory after it was built; build it with"
        " the value, or a new one (dataclasses.replace):\n" + "\n".join(found)
    )


def test_the_check_sees_a_factory_changed() -> None:
    source = (
        "prepared.factory.paths = paths\n"
        "factory.value_runs[3] = where\n"
        "factory = CallFactory(graph)\n"
        "life.prepared = prepared\n"
    )
    trees = [(ROOT / "example.py", ast.parse(source))]
    assert factory_changes(trees) == [
        "example.py:1: prepared.factory.paths",
        "example.py:2: factory.value_runs",
    ]


#: The most lines a function (or method) may span, ``def`` line to last line.
MAX_FUNCTION_LINES = 100
#: The most lines a class may span, ``class`` line to last line.
MAX_CLASS_LINES = 400
#: The plugin's session module, and the most lines it may have.
SESSION_MODULE = Path("snakemake_executor_plugin_hpcflow/session.py")
MAX_SESSION_LINES = 250

#: ``(file, name) -> ceiling``: what is over its limit today and awaits the split of
#: issue 40. An entry may not grow past its ceiling; one that falls under the limit (or
#: is gone) must be removed from here. Nothing is to be added.
OVERSIZED_ALLOWED: dict[tuple[str, str], int] = {
    ("hpcflow/modes/pilot.py", "_follow"): 196,
    ("hpcflow/engine/driver.py", "Driver"): 638,
    ("hpcflow/modes/jobs.py", "JobsFollower"): 513,
}


def _span(node: ast.stmt) -> int:
    """The lines ``node`` spans, its first line to its last."""
    return (node.end_lineno or node.lineno) - node.lineno + 1


def sizes(trees: list[tuple[Path, ast.Module]]) -> Iterator[tuple[str, int, str, int, int]]:
    """``(file, line, name, lines, limit)`` for every function, method and class, with
    the limit its kind has."""
    for path, tree in trees:
        where = path.relative_to(ROOT).as_posix()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield where, node.lineno, node.name, _span(node), MAX_FUNCTION_LINES
            elif isinstance(node, ast.ClassDef):
                yield where, node.lineno, node.name, _span(node), MAX_CLASS_LINES


def oversized(
    trees: list[tuple[Path, ast.Module]],
    allowed: dict[tuple[str, str], int],
    lines_of: dict[str, int],
) -> list[str]:
    """``file:line: name is N lines (limit L)`` for each function or class over its
    limit and not allowed, or over its allowed ceiling; the session module over its
    limit (``lines_of``: each module's line count); and each allowed entry that is now
    under its limit or gone, to be removed from the list."""
    found: list[str] = []
    seen: set[tuple[str, str]] = set()
    for where, line, name, lines, limit in sizes(trees):
        key = (where, name)
        ceiling = allowed.get(key)
        if ceiling is not None:
            seen.add(key)
            if lines > ceiling:
                found.append(
                    f"{where}:{line}: {name} is {lines} lines, grown past its allowed"
                    f" {ceiling} (limit {limit}); split it"
                )
            elif lines <= limit:
                found.append(
                    f"{where}:{line}: {name} is {lines} lines, under the limit {limit}:"
                    " remove it from OVERSIZED_ALLOWED"
                )
        elif lines > limit:
            found.append(f"{where}:{line}: {name} is {lines} lines (limit {limit})")
    for where, name in sorted(allowed.keys() - seen):
        found.append(f"{where}: {name} is gone: remove it from OVERSIZED_ALLOWED")
    session = lines_of.get(SESSION_MODULE.as_posix())
    if session is not None and session > MAX_SESSION_LINES:
        found.append(f"{SESSION_MODULE}: {session} lines (limit {MAX_SESSION_LINES})")
    return found


def _line_counts(trees: list[tuple[Path, ast.Module]]) -> dict[str, int]:
    """Each module's number of lines, by its path from the root."""
    return {
        path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path, _ in trees
    }


def test_functions_classes_and_the_session_stay_small() -> None:
    trees = _project()
    found = oversized(trees, OVERSIZED_ALLOWED, _line_counts(trees))
    assert not found, (
        f"{len(found)} sizes over their limits; split them into well-named parts:\n"
        + "\n".join(found)
    )


def test_the_check_sees_what_is_too_big() -> None:
    """The check itself: a long function and a long class are found, an allowed one only
    past its ceiling; an allowed one under the limit, or gone, must leave the list; a
    session module over its limit is found."""
    long_body = "".join("    x = 1\n" for _ in range(100))
    source = (
        # three functions of 101 lines, a short one, a class of 401 lines
        f"def long():\n{long_body}"
        f"def allowed_grown():\n{long_body}"
        f"def allowed_fits():\n{long_body}"
        "def short():\n    pass\n"
        "class Big:\n" + "".join(f"    def m{i}(self):\n        pass\n" for i in range(200))
    )
    trees = [(ROOT / "example.py", ast.parse(source))]
    allowed = {
        ("example.py", "allowed_grown"): 100,
        ("example.py", "allowed_fits"): 150,
        ("example.py", "short"): 120,
        ("example.py", "vanished"): 300,
    }
    found = oversized(trees, allowed, {SESSION_MODULE.as_posix(): 251})
    assert found == [
        "example.py:1: long is 101 lines (limit 100)",
        "example.py:102: allowed_grown is 101 lines, grown past its allowed 100 (limit 100);"
        " split it",
        "example.py:304: short is 2 lines, under the limit 100: remove it from OVERSIZED_ALLOWED",
        "example.py:306: Big is 401 lines (limit 400)",
        "example.py: vanished is gone: remove it from OVERSIZED_ALLOWED",
        f"{SESSION_MODULE}: 251 lines (limit 250)",
    ]
    assert oversized(trees[:0], {}, {SESSION_MODULE.as_posix(): 250}) == []
