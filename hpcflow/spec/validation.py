"""Pydantic's validation errors as positioned problems (file:line:column, what to fix)."""

from __future__ import annotations

import difflib
from typing import Any

import pydantic

from hpcflow.errors import SpecError, SpecProblem
from hpcflow.spec.models import Defaults, Include, Resources, RetryPolicy, TaskSpec, Workflow
from hpcflow.spec.yamlpos import Path, Positions


def validate_workflow(data: Any, positions: Positions) -> Workflow:
    """``data`` as a :class:`Workflow`, or a :class:`SpecError` with every problem."""
    try:
        return Workflow.model_validate(data)
    except pydantic.ValidationError as exc:
        raise SpecError(problems_from_pydantic(exc, positions)) from None


_FIELDS_BY_CONTEXT: dict[str, type[pydantic.BaseModel]] = {
    "workflow": Workflow,
    "defaults": Defaults,
    "task": TaskSpec,
    "resources": Resources,
    "retries": RetryPolicy,
    "include": Include,
}


def _context(path: Path) -> str | None:
    if path == ():
        return "workflow"
    if path == ("defaults",):
        return "defaults"
    if len(path) == 2 and path[0] == "tasks" and isinstance(path[1], int):
        return "task"
    if len(path) == 2 and path[0] == "include":
        return "include"
    if path and path[-1] in ("resources", "retries"):
        return str(path[-1])
    return None


def _document_path(loc: tuple[Any, ...], positions: Positions) -> Path:
    """Trim pydantic's location (which may name union members) to a path in the document."""
    path: Path = ()
    for part in loc:
        candidate = (*path, part)
        if positions.has(candidate):
            path = candidate
        else:
            break
    return path


def problems_from_pydantic(
    exc: pydantic.ValidationError, positions: Positions, prefix: Path = ()
) -> list[SpecProblem]:
    """Each of ``exc``'s errors at its place in the document (``prefix``: where the
    validated value sits in it)."""
    problems: list[SpecProblem] = []
    seen: set[Path] = set()
    for error in exc.errors():
        loc = (*prefix, *error["loc"])
        kind = error["type"]
        if kind == "extra_forbidden":
            path = _document_path(loc, positions)
            key = str(loc[-1])
            parent = path[:-1]
            model = _FIELDS_BY_CONTEXT.get(_context(parent) or "")
            allowed = sorted(f.alias or n for n, f in model.model_fields.items()) if model else []
            close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
            hint = (
                f"did you mean {close[0]!r}?"
                if close
                else (f"allowed keys: {', '.join(allowed)}" if allowed else None)
            )
            problems.append(positions.problem(path, f"unknown key {key!r}", hint=hint, key=True))
            continue
        if kind == "missing":
            path = _document_path(loc[:-1], positions)
            if path in seen:
                continue
            problems.append(positions.problem(path, f"missing required key {loc[-1]!r}"))
            continue
        path = _document_path(loc, positions)
        if path in seen:
            continue
        seen.add(path)
        message = str(error["msg"]).removeprefix("Value error, ")
        if len(path) < len(loc) and kind not in ("value_error",):
            # A union failed on every member: say what is accepted instead of each failure.
            message = _union_message(path) or message
        # A mapping's key that is refused (e.g. an include's name): point at the key.
        problems.append(positions.problem(path, message, key=loc[-1] == "[key]"))
    return problems or [positions.problem((), str(exc))]


def _union_message(path: Path) -> str | None:
    if len(path) >= 2 and path[-2] == "params":
        return "a parameter must be text, a number, true/false, or a list of those"
    return None
