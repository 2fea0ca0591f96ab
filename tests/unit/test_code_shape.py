"""The shape of the code, checked: records are built by name, and the call factory is
built complete.

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
