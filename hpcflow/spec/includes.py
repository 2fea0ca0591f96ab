"""Includes: another workflow file's tasks joined into a workflow under a name.

``include: {qc_a: {file: qc/workflow.yaml, params: {sample: a}}}`` adds every task of
``qc/workflow.yaml`` as ``qc_a.TASK``. Inside the included file, ``needs`` and ``from``
name its own tasks (they are renamed with it); its ``defaults`` (and top-level
``workdir``) apply to its tasks only; ``params`` replace the values its tasks give and
fill in the placeholders they leave open. Tasks run in the including workflow's folder;
``$HPCFLOW_INCLUDE_DIR`` is the included file's folder (for its scripts), and its venv,
conda and image paths are relative to that folder. Includes nest; a cycle is an error.

The expansion works on the loaded document, before it is validated as a whole: each
included task is copied into ``tasks`` with the positions of its own file, so that every
later error points into the file the text came from.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import Any

import pydantic

from hpcflow.errors import SpecError, SpecProblem
from hpcflow.spec.limits import InputTooLarge, read_capped
from hpcflow.spec.models import IncludeEntry, Namespace, Workflow
from hpcflow.spec.placeholders import Template
from hpcflow.spec.validation import problems_from_pydantic, validate_workflow
from hpcflow.spec.yamlpos import Path, Positions, load_yaml

#: The file an included folder holds.
FOLDER_FILE = "workflow.yaml"
#: The variable included tasks find their file's folder in.
INCLUDE_DIR_VARIABLE = "HPCFLOW_INCLUDE_DIR"
#: Deepest chain of includes.
MAX_DEPTH = 16
#: Most task definitions a workflow may have once its includes are expanded.
MAX_TASKS = 50_000

_ENTRIES = pydantic.TypeAdapter(dict[Namespace, IncludeEntry])
_PLACEHOLDER = re.compile(r"\{([A-Za-z_]\w*)\}")
#: Task fields whose text may hold {placeholders}.
_TEMPLATED = ("command", "argv", "inputs", "outputs", "workdir", "env")


@dataclass(frozen=True)
class Included:
    """One included file, read, parsed and expanded once per load however often it is
    included: its document (its own includes expanded), positions, model, folder, the
    names of its own tasks, and how deep its own includes go (0: it includes nothing)."""

    data: dict[str, Any]
    positions: Positions
    workflow: Workflow
    folder: FsPath
    own: frozenset[str]
    height: int


@dataclass
class IncludeReader:
    """Reads included files: from disk when a run is planned, or from what was read then
    (``frozen``: resolved path → text), so a run's allocations see the same files. Each
    file is read and parsed once per load (:attr:`parsed`), and the tasks that includes
    add are counted against :data:`MAX_TASKS`."""

    frozen: dict[str, str] | None = None
    #: What was read, by resolved path: kept in the run directory.
    read: dict[str, str] = field(default_factory=dict)
    #: Each included file, parsed and expanded, by resolved path.
    parsed: dict[FsPath, Included] = field(default_factory=dict)
    #: Included files that could not be loaded, with why (each reported once).
    failed: dict[FsPath, SpecError] = field(default_factory=dict)
    #: How many files were parsed (each once).
    parses: int = 0

    def text(self, path: FsPath) -> str:
        key = str(path)
        if self.frozen is not None and key in self.frozen:
            text = self.frozen[key]
        else:
            text = read_capped(path, "an included workflow file")
        self.read[key] = text
        return text


def expand_includes(
    data: dict[str, Any],
    positions: Positions,
    folder: FsPath,
    reader: IncludeReader,
    stack: tuple[FsPath, ...] = (),
) -> int:
    """Add the tasks of ``data``'s includes (and theirs) to ``data['tasks']``, in place,
    with their positions; ``folder`` is the including file's folder, ``stack`` the files
    that include it. Returns how deep the includes go (0: none). Raises
    :class:`SpecError` with every problem found."""
    raw = data.get("include")
    if not raw:
        return 0
    try:
        entries = _ENTRIES.validate_python(raw)
    except pydantic.ValidationError as exc:
        raise SpecError(problems_from_pydantic(exc, positions, ("include",))) from None
    tasks = data.setdefault("tasks", [])
    if not isinstance(tasks, list):
        return 0  # validating the document says what is wrong
    problems: list[SpecProblem] = []
    height = 0
    for name, entry in entries.items():
        where: Path = ("include", name)
        try:
            included = _load(name, entry.file, where, positions, folder, reader, stack)
        except SpecError as exc:
            # (A file included twice has its problems once.)
            problems += [p for p in exc.problems if p not in problems]
            continue
        height = max(height, 1 + included.height)
        first = len(tasks)
        if first + len(included.data["tasks"]) > MAX_TASKS:
            at: Path = (*where, "file") if positions.has((*where, "file")) else where
            raise SpecError(
                [
                    *problems,
                    positions.problem(
                        at,
                        f"with include {name!r} the workflow has more than {MAX_TASKS:,} "
                        "task definitions",
                        hint="include fewer files (a file that includes another twice "
                        "doubles its tasks), or sweep one task over values with foreach:",
                    ),
                ]
            )
        for i, task in enumerate(included.data["tasks"]):
            at = ("tasks", len(tasks))
            positions.graft(at, included.positions, ("tasks", i))
            tasks.append(_renamed(name, task, included.own))
            _inherit(tasks[-1], at, included.data, included.positions, positions, included.folder)
        _apply_params(name, entry.params, tasks, first, included.workflow, positions, problems)
    if problems:
        raise SpecError(problems)
    return height


def _load(
    name: str,
    file: str,
    where: Path,
    positions: Positions,
    folder: FsPath,
    reader: IncludeReader,
    stack: tuple[FsPath, ...],
) -> Included:
    """The included file, parsed and expanded (once per load: later uses take what the
    first one made)."""
    target = folder / file
    shown = os.path.normpath(os.path.join(os.path.dirname(positions.file_for(where)), file))
    inside = str((target / FOLDER_FILE).resolve())
    if target.is_dir() or (reader.frozen is not None and inside in reader.frozen):
        target, shown = target / FOLDER_FILE, os.path.join(shown, FOLDER_FILE)
    target = target.resolve()
    at: Path = (*where, "file") if positions.has((*where, "file")) else where
    if target in stack:
        chain = " → ".join(str(p) for p in (*stack[stack.index(target) :], target))
        raise SpecError([positions.problem(at, f"include {name!r} makes a cycle: {chain}")])
    if target in reader.failed:
        raise reader.failed[target]
    done = reader.parsed.get(target)
    if done is not None:
        if len(stack) + done.height >= MAX_DEPTH:
            raise SpecError([positions.problem(at, f"includes nested more than {MAX_DEPTH} deep")])
        return done
    if len(stack) >= MAX_DEPTH:
        raise SpecError([positions.problem(at, f"includes nested more than {MAX_DEPTH} deep")])
    try:
        done = _parse(target, shown, name, at, positions, reader, stack)
    except SpecError as exc:
        reader.failed[target] = exc
        raise
    reader.parsed[target] = done
    return done


def _parse(
    target: FsPath,
    shown: str,
    name: str,
    at: Path,
    positions: Positions,
    reader: IncludeReader,
    stack: tuple[FsPath, ...],
) -> Included:
    """Read, parse, expand and validate the included file ``target``."""
    try:
        text = reader.text(target)
    except FileNotFoundError:
        raise SpecError(
            [positions.problem(at, f"include {name!r}: no such file {shown}")]
        ) from None
    except InputTooLarge as exc:
        raise SpecError(
            [positions.problem(at, f"include {name!r}: {exc}", hint=exc.hint)]
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([positions.problem(at, f"include {name!r}: cannot read: {exc}")]) from None
    reader.parses += 1
    data, sub_positions = load_yaml(text, shown)
    if not isinstance(data, dict):
        raise SpecError(
            [sub_positions.problem((), "an included workflow is a mapping with 'name' and 'tasks'")]
        )
    height = expand_includes(data, sub_positions, target.parent, reader, (*stack, target))
    workflow = validate_workflow(data, sub_positions)
    own = frozenset(t.name for t in workflow.tasks)
    return Included(
        data=data,
        positions=sub_positions,
        workflow=workflow,
        folder=target.parent,
        own=own,
        height=height,
    )


def _renamed(name: str, task: dict[str, Any], own: frozenset[str]) -> dict[str, Any]:
    """A copy of an included task with its own and its upstream tasks' names prefixed
    (``needs``, ``from``, and the ``after`` of its sweep's sources); ``own``: the names
    of the included file's tasks."""

    def prefixed(task_name: str) -> str:
        # A name that is not the file's own stays as it is, and is reported as unknown.
        return f"{name}.{task_name}" if task_name in own else task_name

    out = dict(task)
    out["name"] = f"{name}.{task['name']}"
    if task.get("needs"):
        out["needs"] = [prefixed(n) for n in task["needs"]]
    foreach = task.get("foreach")
    if isinstance(foreach, dict):
        out["foreach"] = {
            key: {**value, "after": prefixed(value["after"])}
            if isinstance(value, dict) and isinstance(value.get("after"), str)
            else value
            for key, value in foreach.items()
        }
    if task.get("from"):
        out["from"] = {
            argument: prefixed(source)
            if isinstance(source, str)
            else {**source, "task": prefixed(source["task"])}
            for argument, source in task["from"].items()
        }
    return out


def _inherit(
    task: dict[str, Any],
    at: Path,
    sub_data: dict[str, Any],
    sub_positions: Positions,
    positions: Positions,
    folder: FsPath,
) -> None:
    """Fold the included file's ``defaults`` and ``workdir`` into one of its tasks (the
    including workflow's defaults then apply only where neither sets a value), and make
    its environment paths absolute."""
    defaults = sub_data.get("defaults") or {}
    for key, value in defaults.items():
        if value is None or key == "workdir":
            continue
        if key in ("resources", "env"):
            own = task.get(key) or {}
            task[key] = {**value, **own}
            for field_name in value:
                if field_name not in own:
                    positions.graft(
                        (*at, key, field_name), sub_positions, ("defaults", key, field_name)
                    )
        elif key in ("venv", "conda"):
            if task.get("venv") is None and task.get("conda") is None:
                task[key] = value
                positions.graft((*at, key), sub_positions, ("defaults", key))
        elif task.get(key) is None:
            task[key] = value
            positions.graft((*at, key), sub_positions, ("defaults", key))
    parts = [
        p for p in (sub_data.get("workdir"), defaults.get("workdir"), task.get("workdir")) if p
    ]
    if parts:
        task["workdir"] = os.path.join(*parts)
    env = dict(task.get("env") or {})
    # Literal text: a {name} in the folder's name must not read as a placeholder.
    env.setdefault(INCLUDE_DIR_VARIABLE, _PLACEHOLDER.sub(r"{{\1}}", str(folder)))
    task["env"] = env
    for key in ("venv", "conda"):
        if isinstance(task.get(key), str):
            task[key] = os.path.normpath(folder / task[key])
    container = task.get("container")
    image = container if isinstance(container, str) else (container or {}).get("image")
    if isinstance(image, str) and "://" not in image and (folder / image).exists():
        local = os.path.normpath(folder / image)
        task["container"] = {**container, "image": local} if isinstance(container, dict) else local


def _apply_params(
    name: str,
    params: dict[str, Any],
    tasks: list[Any],
    first: int,
    workflow: Workflow,
    positions: Positions,
    problems: list[SpecProblem],
) -> None:
    """Give each of the include's parameters to the included tasks that use it: those
    that set it under ``params``, and (commands only) those whose text has ``{it}``."""
    for param, value in params.items():
        users = 0
        for k in range(first, len(tasks)):
            task = tasks[k]
            if param in (task.get("params") or {}) or (
                task.get("python") is None and param in _placeholders(task)
            ):
                task["params"] = {**(task.get("params") or {}), param: value}
                positions.graft(
                    ("tasks", k, "params", param), positions, ("include", name, "params", param)
                )
                users += 1
        if not users:
            used = sorted({p for t in tasks[first:] for p in (t.get("params") or {})})
            problems.append(
                positions.problem(
                    ("include", name, "params", param),
                    f"no task of {workflow.name!r} uses parameter {param!r}",
                    hint=f"its tasks' parameters: {', '.join(used)}"
                    if used
                    else "its tasks set no parameters and use no {placeholder} of that name",
                    key=True,
                )
            )


def _placeholders(task: dict[str, Any]) -> set[str]:
    """The placeholder names in a task's templated text."""
    texts: list[str] = []
    for key in _TEMPLATED:
        value = task.get(key)
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, list):
            texts += [v for v in value if isinstance(v, str)]
        elif isinstance(value, dict):
            texts += [v for v in value.values() if isinstance(v, str)]
    return {name for text in texts for name in Template.parse(text).names}
