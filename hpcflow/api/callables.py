"""A Python function as a python task's ``module:qualname``, or why it cannot be one.

A python task's worker imports its function by name (``package.module:function``), in
another process, with the task's working directory on ``sys.path``
(:func:`hpcflow.worker.execute.resolve_callable`). So a function can be a task when that
name finds it again: a module-level function (or a class's) of an importable module. A
function of the script being run (``__main__``) is found as the script's own module
when the script sits in the folder the task runs in, and guards what it does when run
(``if __name__ == "__main__":``), since the worker imports it. Lambdas, functions
defined inside functions, and functions of a notebook or an interactive session have
no such name.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Advice every refusal ends with.
_MOVE_IT = "define it with `def` at the top level of a module (a .py file) in the workflow's folder"


class NotImportable(ValueError):
    """A function the worker could not import by name; the message says why and the
    ``hint`` what to do."""

    def __init__(self, message: str, hint: str = _MOVE_IT) -> None:
        super().__init__(message)
        self.hint = hint


def reference(function: Callable[..., Any], workdir: Path | None) -> str:
    """``module:qualname`` of ``function``, as a python task names it.

    ``workdir`` is the folder the task runs in (None when it depends on the task's
    parameters): a function of the running script must live there. Raises
    :class:`NotImportable` for a function the worker could not import.
    """
    qualname = getattr(function, "__qualname__", None)
    module = getattr(function, "__module__", None)
    shown = getattr(function, "__name__", repr(function))
    if not isinstance(qualname, str) or not isinstance(module, str):
        raise NotImportable(f"{shown!r} is not a function a worker can import by name")
    if "<lambda>" in qualname:
        raise NotImportable("a lambda has no name a worker can import it by")
    if "<locals>" in qualname:
        raise NotImportable(
            f"{qualname.replace('.<locals>', '')!r} is defined inside a function: a worker "
            "cannot import it by name"
        )
    found: Any = sys.modules.get(module)
    if module == "__main__":
        module = _main_module(shown, workdir)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if found is not None and getattr(found, "__wrapped__", found) is not getattr(
        function, "__wrapped__", function
    ):
        raise NotImportable(
            f"{module}:{qualname} is not {shown!r}: the name was bound to something else",
            hint="give each task's function a name of its own in its module",
        )
    return f"{module}:{qualname}"


def _main_module(shown: str, workdir: Path | None) -> str:
    """The module name the worker imports the running script's functions from."""
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None)
    if not script:
        raise NotImportable(
            f"{shown!r} is defined in a notebook or an interactive session: a worker "
            "cannot import it by name"
        )
    path = Path(script).resolve()
    name = path.stem
    if path.suffix != ".py" or not name.isidentifier():
        raise NotImportable(
            f"{shown!r} is defined in the script {path}, which is not importable as a "
            "module (a .py file named like a Python identifier)"
        )
    if workdir is not None and path.parent != workdir.resolve():
        raise NotImportable(
            f"{shown!r} is defined in the script {path}, but the task runs in {workdir}, "
            "where a worker cannot import the script",
            hint=f"pass folder={str(path.parent)!r} to Workflow(...), or {_MOVE_IT}",
        )
    if not _guarded(path):
        raise NotImportable(
            f"{shown!r} is defined in the script {path}, which a worker imports to call "
            "it, and the script builds or runs a workflow when it is imported",
            hint='put the script\'s own work under `if __name__ == "__main__":`, or ' + _MOVE_IT,
        )
    return name


#: Calls that build or run a workflow: a script that makes them on import is not guarded.
_WORKFLOW_CALLS = frozenset({"Workflow", "load", "run", "task", "include", "validate", "wait"})


def _guarded(script: Path) -> bool:
    """Whether ``script`` builds or runs no workflow when it is imported: none of its
    top-level statements outside ``if __name__ == "__main__":`` calls ``Workflow(...)``
    or a workflow's ``task``, ``run``... (anything else it does on import is the
    script's own business)."""
    try:
        tree = ast.parse(script.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return True  # nothing to judge by: the worker's import will say
    for statement in tree.body:
        if isinstance(statement, ast.If) and "__name__" in ast.unparse(statement.test):
            continue
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for node in ast.walk(statement):
            if isinstance(node, ast.Call) and _called_name(node.func) in _WORKFLOW_CALLS:
                return False
    return True


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None
