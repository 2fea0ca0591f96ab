"""Read a workflow file into a validated :class:`LoadedWorkflow`, or raise one
:class:`~hpcflow.errors.SpecError` listing every problem with its file:line:column."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import Any

from hpcflow.errors import SpecError, SpecProblem
from hpcflow.spec.includes import MAX_TASKS, IncludeReader, expand_includes
from hpcflow.spec.limits import InputTooLarge, read_capped
from hpcflow.spec.models import TaskSpec, Workflow
from hpcflow.spec.placeholders import BUILTINS, Template
from hpcflow.spec.shell_context import refusals
from hpcflow.spec.sources import SourceReader
from hpcflow.spec.sweep import MAX_TOTAL_INSTANCES, Sweep, parse_sweep
from hpcflow.spec.validation import validate_workflow
from hpcflow.spec.yamlpos import Path, Positions, load_yaml

_CALLABLE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


@dataclass(frozen=True)
class LoadedWorkflow:
    """A validated workflow plus what later stages need to report errors precisely."""

    workflow: Workflow
    positions: Positions
    source: FsPath | None
    text: str
    sweeps: dict[str, Sweep]
    #: What the sweeps' sources (from_files, from_table) read, by ``TASK/KEY``: kept in
    #: the run directory so that the run's allocations rebuild the same instances.
    sources: dict[str, Any] = field(default_factory=dict)
    #: The included workflow files' texts, by resolved path (kept in the run directory).
    included: dict[str, str] = field(default_factory=dict)

    @property
    def base_dir(self) -> FsPath:
        """The folder relative paths in the file are resolved against."""
        return self.source.parent if self.source else FsPath.cwd()

    @property
    def waiting(self) -> dict[str, tuple[str, ...]]:
        """Tasks whose instances are not known yet (a sweep reads files a task makes,
        ``after:``), each with the tasks it waits for."""
        return {name: sweep.after for name, sweep in self.sweeps.items() if sweep.waiting}

    def task_index(self, name: str) -> int:
        for i, task in enumerate(self.workflow.tasks):
            if task.name == name:
                return i
        raise KeyError(name)


def load_workflow(path: str | FsPath, ready: frozenset[str] = frozenset()) -> LoadedWorkflow:
    """Load and validate the workflow file at ``path``; sweeps that read files ``after``
    a task in ``ready`` read them now (the others wait)."""
    source = FsPath(path)
    try:
        text = read_capped(source, "a workflow file")
    except InputTooLarge as exc:
        raise SpecError(
            [
                SpecProblem(
                    file=str(path),
                    line=None,
                    column=None,
                    where="",
                    message=str(exc),
                    hint=exc.hint,
                )
            ]
        ) from None
    except FileNotFoundError:
        raise SpecError([SpecProblem(str(path), None, None, "", "no such file")]) from None
    except IsADirectoryError:
        raise SpecError(
            [SpecProblem(str(path), None, None, "", "is a directory, not a workflow file")]
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([SpecProblem(str(path), None, None, "", f"cannot read: {exc}")]) from None
    return parse_workflow(text, str(path), source=source.resolve(), ready=ready)


def parse_workflow(
    text: str,
    file: str = "<workflow>",
    source: FsPath | None = None,
    frozen_sources: dict[str, Any] | None = None,
    frozen_includes: dict[str, str] | None = None,
    ready: frozenset[str] = frozenset(),
) -> LoadedWorkflow:
    """Validate workflow ``text``; ``file`` is the name used in error messages. Sweep
    sources and included files are read relative to ``source``'s folder, or taken from
    ``frozen_sources`` and ``frozen_includes`` (what :attr:`LoadedWorkflow.sources` and
    :attr:`LoadedWorkflow.included` recorded when the run was planned)."""
    data, positions = load_yaml(text, file)
    if not isinstance(data, dict):
        raise SpecError(
            [
                positions.problem(
                    (),
                    "a workflow must be a mapping with 'name' and 'tasks'",
                    hint="start from `hpcflow init` or workflows/hello/workflow.yaml",
                )
            ]
        )
    base_dir = source.parent if source else FsPath.cwd()
    includes = IncludeReader(frozen_includes)
    expand_includes(data, positions, base_dir, includes, (source,) if source else ())
    workflow = validate_workflow(data, positions)
    problems: list[SpecProblem] = []
    sweeps: dict[str, Sweep] = {}
    reader = SourceReader(base_dir, positions, frozen_sources, ready)
    _check_tasks(workflow, positions, problems, sweeps, reader)
    if problems:
        raise SpecError(problems)
    _check_size(workflow, sweeps, positions)
    return LoadedWorkflow(
        workflow=workflow,
        positions=positions,
        source=source,
        text=text,
        sweeps=sweeps,
        sources=reader.read,
        included=includes.read,
    )


# -- whole-document checks ------------------------------------------------------------------


def _check_size(workflow: Workflow, sweeps: dict[str, Sweep], positions: Positions) -> None:
    """At most :data:`MAX_TASKS` task definitions and :data:`MAX_TOTAL_INSTANCES` task
    instances in all, counted before any is made (a sweep's size is known unexpanded)."""
    if len(workflow.tasks) > MAX_TASKS:  # (includes stop at the cap; this is the file's own)
        raise SpecError(
            [
                positions.problem(
                    ("tasks",),
                    f"the workflow has {len(workflow.tasks):,} task definitions; at most "
                    f"{MAX_TASKS:,} are allowed",
                    hint="sweep one task over values with foreach: instead of writing "
                    "a task per value",
                )
            ]
        )
    total = sum(len(sweeps[t.name]) if t.name in sweeps else 1 for t in workflow.tasks)
    if total > MAX_TOTAL_INSTANCES:
        raise SpecError(
            [
                positions.problem(
                    ("tasks",),
                    f"the workflow has {total:,} task instances once its sweeps are "
                    f"expanded; at most {MAX_TOTAL_INSTANCES:,} are allowed",
                    hint="split it into several workflows, or sweep fewer values",
                )
            ]
        )


def _check_tasks(
    workflow: Workflow,
    positions: Positions,
    problems: list[SpecProblem],
    sweeps: dict[str, Sweep],
    sources: SourceReader,
) -> None:
    names: dict[str, int] = {}
    reported: set[tuple[Path, str]] = set()
    for i, task in enumerate(workflow.tasks):
        where: Path = ("tasks", i)
        if task.name in names:
            problems.append(
                positions.problem(
                    (*where, "name"),
                    f"duplicate task name {task.name!r}",
                    hint=f"first used by tasks[{names[task.name]}]; names must be unique",
                )
            )
        else:
            names[task.name] = i
    all_names = list(names)
    for i, task in enumerate(workflow.tasks):
        where = ("tasks", i)
        swept: tuple[str, ...] = ()
        if task.foreach is not None:
            sweep, sweep_problems = parse_sweep(
                task.foreach, (*where, "foreach"), positions, sources, task.name
            )
            problems.extend(sweep_problems)
            if sweep is not None:
                sweeps[task.name] = sweep
                swept = sweep.names
        clash = set(swept) & set(task.params)
        for name in sorted(clash):
            problems.append(
                positions.problem(
                    (*where, "params", name),
                    f"parameter {name!r} is both swept and constant",
                    key=True,
                )
            )
        for name in sorted((set(swept) | set(task.params)) & BUILTINS):
            problems.append(
                positions.problem(
                    (*where, "params", name) if name in task.params else (*where, "foreach"),
                    f"{name!r} is a reserved placeholder name; choose another parameter name",
                )
            )
        known = set(swept) | set(task.params)
        _check_nul_values(task, where, sweeps.get(task.name), positions, problems)
        _check_placeholders(task, where, known, positions, problems)
        _check_inherited_placeholders(workflow, task, known, positions, problems, reported)
        for j, need in enumerate(task.needs):
            if need == task.name:
                problems.append(
                    positions.problem((*where, "needs", j), "a task cannot need itself")
                )
            elif need not in names:
                close = difflib.get_close_matches(need, all_names, n=1, cutoff=0.6)
                problems.append(
                    positions.problem(
                        (*where, "needs", j),
                        f"needs unknown task {need!r}",
                        hint=f"did you mean {close[0]!r}?"
                        if close
                        else f"tasks are: {', '.join(all_names[:20])}",
                    )
                )
        for upstream in sweeps[task.name].after if task.name in sweeps else ():
            _check_after(task.name, upstream, where, names, workflow, positions, problems)
        _check_values_from(workflow, i, names, known, positions, problems)
        if task.python is not None and not _CALLABLE.match(task.python):
            problems.append(
                positions.problem(
                    (*where, "python"),
                    f"{task.python!r} is not 'package.module:function'",
                    hint="e.g. python: mypkg.analysis:summarize",
                )
            )
        if task.scratch and (task.container or workflow.defaults.container) is not None:
            problems.append(
                positions.problem(
                    (*where, "scratch"),
                    "scratch: true does not combine with a container (the container's "
                    "working folder is fixed when the run is planned)",
                    hint="drop scratch:, or cd to $TMPDIR inside the task's command",
                )
            )
        if task.python is not None and task.resources and task.resources.ranks > 1:
            problems.append(
                positions.problem(
                    (*where, "resources", "ranks"),
                    "a python task cannot have ranks > 1; use 'command' or 'argv' for MPI programs",
                )
            )


def _check_after(
    task: str,
    upstream: str,
    where: Path,
    names: dict[str, int],
    workflow: Workflow,
    positions: Positions,
    problems: list[SpecProblem],
) -> None:
    """``after:`` in a sweep's source names another task of the workflow."""
    foreach = workflow.tasks[names[task]].foreach or {}
    key = next(
        (
            k
            for k in ("from_files", "from_table")
            if (foreach.get(k) or {}).get("after") == upstream
        ),
        "from_files",
    )
    at: Path = (*where, "foreach", key, "after")
    if upstream == task:
        problems.append(positions.problem(at, "a task cannot sweep over files it makes itself"))
    elif upstream not in names:
        close = difflib.get_close_matches(upstream, list(names), n=1, cutoff=0.6)
        problems.append(
            positions.problem(
                at,
                f"reads files after unknown task {upstream!r}",
                hint=f"did you mean {close[0]!r}?"
                if close
                else f"tasks are: {', '.join(list(names)[:20])}",
            )
        )


def _check_values_from(
    workflow: Workflow,
    i: int,
    names: dict[str, int],
    known: set[str],
    positions: Positions,
    problems: list[SpecProblem],
) -> None:
    """``from:``: only on python tasks, from another python task, and never an argument
    that a parameter already gives."""
    task = workflow.tasks[i]
    where: Path = ("tasks", i, "from")
    if task.from_ and task.python is None:
        problems.append(
            positions.problem(
                where,
                "only a 'python' task receives values with 'from'",
                hint="a command reads files: list them under 'inputs:' instead",
                key=True,
            )
        )
        return
    for argument, source in task.from_.items():
        at: Path = (*where, argument)
        if not argument.isidentifier():
            problems.append(
                positions.problem(at, f"{argument!r} is not a Python argument name", key=True)
            )
        elif argument in known:
            problems.append(
                positions.problem(
                    at,
                    f"argument {argument!r} is also a parameter of {task.name!r}",
                    hint="rename one of them: each argument comes from one place",
                    key=True,
                )
            )
        if source.task == task.name:
            problems.append(positions.problem(at, "a task cannot receive its own value"))
            continue
        upstream = names.get(source.task)
        if upstream is None:
            close = difflib.get_close_matches(source.task, list(names), n=1, cutoff=0.6)
            problems.append(
                positions.problem(
                    at,
                    f"receives a value from unknown task {source.task!r}",
                    hint=f"did you mean {close[0]!r}?"
                    if close
                    else f"tasks are: {', '.join(list(names)[:20])}",
                )
            )
        elif workflow.tasks[upstream].python is None:
            problems.append(
                positions.problem(
                    at,
                    f"{source.task!r} is not a 'python' task: it returns no value",
                    hint="pass its files with 'inputs:', or make it a python task",
                )
            )


def _check_nul_values(
    task: TaskSpec,
    where: Path,
    sweep: Sweep | None,
    positions: Positions,
    problems: list[SpecProblem],
) -> None:
    """A value with a NUL byte can reach no command, argument or variable: refused."""
    found: list[tuple[Path, str]] = []
    for name, value in task.params.items():
        items = value if isinstance(value, list) else [value]
        found += [
            ((*where, "params", name), name) for v in items if isinstance(v, str) and "\0" in v
        ]
    if sweep is not None:
        for group in sweep.groups:
            for axis in group:
                if not isinstance(axis.values, range) and any(
                    isinstance(v, str) and "\0" in v for v in axis.values
                ):
                    found.append(((*where, "foreach"), axis.name))
    for path, name in found:
        problems.append(
            positions.problem(
                path,
                f"a value of {name!r} holds a NUL byte, which no command can receive",
                hint="remove the NUL byte from the value",
            )
        )


def _check_placeholders(
    task: TaskSpec, where: Path, known: set[str], positions: Positions, problems: list[SpecProblem]
) -> None:
    fields: list[tuple[Path, str, set[str]]] = []
    action_names = known | BUILTINS
    if task.command is not None:
        fields.append(((*where, "command"), task.command, action_names))
        for refused in refusals(task.command):  # a value there would be shell syntax
            problems.append(
                positions.problem(
                    (*where, "command"),
                    f"placeholder {{{refused.name}}} cannot be quoted safely: {refused.reason}",
                    hint=refused.hint,
                )
            )
    for j, arg in enumerate(task.argv or []):
        fields.append(((*where, "argv", j), arg, action_names))
    for key in ("inputs", "outputs"):
        for j, pattern in enumerate(getattr(task, key)):
            fields.append(((*where, key, j), pattern, known))
    if task.workdir is not None:
        fields.append(((*where, "workdir"), task.workdir, known))
    for env_key, env_value in task.env.items():
        fields.append(((*where, "env", env_key), env_value, known))
    for path, text, allowed in fields:
        for name in Template.parse(text).names:
            if name not in allowed:
                close = difflib.get_close_matches(name, sorted(allowed), n=1, cutoff=0.6)
                hint = (
                    f"did you mean {{{close[0]}}}?"
                    if close
                    else (
                        "define it under 'params:' or 'foreach:'; write {{"
                        + name
                        + "}} for literal braces"
                    )
                )
                problems.append(
                    positions.problem(path, f"undefined placeholder {{{name}}}", hint=hint)
                )


def _check_inherited_placeholders(
    workflow: Workflow,
    task: TaskSpec,
    known: set[str],
    positions: Positions,
    problems: list[SpecProblem],
    reported: set[tuple[Path, str]],
) -> None:
    """Placeholders in the workflow's and the defaults' workdir/env must be defined by every
    task that inherits them (they are filled in per task instance)."""
    fields: list[tuple[Path, str]] = []
    if workflow.workdir is not None:
        fields.append((("workdir",), workflow.workdir))
    if workflow.defaults.workdir is not None:
        fields.append((("defaults", "workdir"), workflow.defaults.workdir))
    for env_key, env_value in workflow.defaults.env.items():
        if env_key not in task.env:
            fields.append((("defaults", "env", env_key), env_value))
    for path, text in fields:
        for name in Template.parse(text).names:
            if name in known or (path, name) in reported:
                continue
            reported.add((path, name))
            problems.append(
                positions.problem(
                    path,
                    f"undefined placeholder {{{name}}} (task {task.name!r} has no such parameter)",
                    hint="every task inherits this value, so each must define it under 'params:' "
                    "or 'foreach:'; write {{" + name + "}} for literal braces",
                )
            )
