"""The import rule of docs/architecture.md, checked: no import cycle between modules, and
every import between packages goes downward through the layers below.

Imports inside functions count (they run too); those under ``if TYPE_CHECKING:`` do not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Bottom to top. A package may import its own modules and any package of a lower layer;
#: packages of one layer do not import each other. Keep in step with docs/architecture.md.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("hpcflow._version", "hpcflow.errors", "hpcflow._lazy"),
    ("hpcflow.store", "hpcflow.spec"),
    ("hpcflow.settings", "hpcflow.dag"),
    ("hpcflow.transport", "hpcflow.launchers", "hpcflow.envs"),
    ("hpcflow.backends", "hpcflow.report"),
    ("hpcflow.worker",),
    ("hpcflow.engine",),
    ("hpcflow.bootstrap",),
    ("hpcflow.modes",),
    # The Python API: workflows built in code, runs started and read back; the command
    # line is written on it.
    ("hpcflow.api",),
    ("hpcflow.cli", "snakemake_executor_plugin_hpcflow"),
    # The package's own namespace: the API's main names, re-exported (hpcflow.Workflow).
    ("hpcflow",),
)
RANK = {package: level for level, names in enumerate(LAYERS) for package in names}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for top in ("hpcflow", "snakemake_executor_plugin_hpcflow"):
        for path in (ROOT / top).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports, outside ``TYPE_CHECKING`` blocks."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(sub) for sub in ast.walk(node))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            wanted = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            wanted = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in wanted:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
    return targets


def _package(module: str) -> str:
    """The layered package a module belongs to (the longest prefix in RANK)."""
    parts = module.split(".")
    for size in range(len(parts), 0, -1):
        candidate = ".".join(parts[:size])
        if candidate in RANK:
            return candidate
    raise AssertionError(f"{module} is in no layer: add its package to LAYERS")


MODULES = _modules()
GRAPH = {name: _imports(name, path, MODULES) for name, path in MODULES.items()}


def test_every_package_has_a_layer() -> None:
    for module in GRAPH:
        _package(module)


def test_imports_go_downward_only() -> None:
    upward = []
    for module, targets in GRAPH.items():
        source = _package(module)
        for target in targets:
            dest = _package(target)
            if dest != source and RANK[dest] >= RANK[source]:
                upward.append(f"{module} -> {target} ({source} may not import {dest})")
    assert not upward, "imports against the layers:\n" + "\n".join(sorted(upward))


#: What the command line may import besides its own modules: the Python API it is written
#: on, and the bottom layer (errors, the version, lazy imports). Whatever else a command
#: needs (the state of a run, a profile, a workflow's graph) comes through hpcflow.api.
CLI_MAY_IMPORT = ("hpcflow.api", *LAYERS[0])


def test_the_cli_goes_through_the_api() -> None:
    reached = []
    for module, targets in GRAPH.items():
        if _package(module) != "hpcflow.cli":
            continue
        for target in targets:
            if _package(target) not in ("hpcflow.cli", *CLI_MAY_IMPORT):
                reached.append(f"{module} -> {target}")
    assert not reached, "the CLI past hpcflow.api:\n" + "\n".join(sorted(reached))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle() -> None:
    # A module's own package __init__ is not an edge: importing a.b runs a/__init__.
    graph = {
        module: {t for t in targets if not module.startswith(t + ".")}
        for module, targets in GRAPH.items()
    }
    assert _cycles(graph) == []


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ],
)
def test_the_cycle_check_finds_cycles(graph: dict[str, set[str]], expected: list) -> None:
    assert _cycles(graph) == expected
