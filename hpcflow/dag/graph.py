"""Dependency edges (explicit ``needs`` and inferred from files), cycle detection, order."""

from __future__ import annotations

import dataclasses
import glob
import os
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from hpcflow.dag.confine import check_paths
from hpcflow.dag.instances import TaskInstance, TaskTemplate, ValueArg, expand, templates_for
from hpcflow.errors import SpecError, SpecProblem
from hpcflow.spec.loader import LoadedWorkflow

_GLOB_CHARS = frozenset("*?[")


@dataclass
class TaskGraph:
    """Every task instance with its dependencies, in a valid execution order."""

    loaded: LoadedWorkflow
    templates: list[TaskTemplate]
    instances: list[TaskInstance]
    order: list[int]
    #: Task definitions not planned yet, by index, with why: a sweep over files a task
    #: has not made yet (``after:``), or a task that depends on such a task.
    waiting: dict[int, str] = field(default_factory=dict)
    #: The tasks each waiting task definition waits for, by name.
    waiting_on: dict[int, tuple[str, ...]] = field(default_factory=dict)

    def template(self, instance: TaskInstance) -> TaskTemplate:
        return self.templates[instance.spec_index]

    def dependents(self) -> list[list[int]]:
        """For each instance, the instances that depend on it."""
        out: list[list[int]] = [[] for _ in self.instances]
        for inst in self.instances:
            for dep in inst.deps:
                out[dep].append(inst.index)
        return out

    def counts_by_task(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for inst in self.instances:
            name = self.templates[inst.spec_index].spec.name
            counts[name] = counts.get(name, 0) + 1
        return counts


def build_graph(loaded: LoadedWorkflow, *, check_files: bool = True) -> TaskGraph:
    """Expand sweeps, connect dependencies and order the graph.

    ``check_files`` also reports inputs that no task produces and that do not exist.
    Raises :class:`SpecError` for duplicate ids or outputs, missing inputs and cycles.
    """
    templates = templates_for(loaded)
    waiting_on = _waiting_tasks(loaded, templates)
    instances = list(expand(loaded, templates, frozenset(waiting_on)))
    if waiting_on:
        instances = _without_waiting(loaded, templates, instances, waiting_on)
    waiting = {i: _why_waiting(loaded, i, on) for i, on in waiting_on.items()}
    problems: list[SpecProblem] = []
    check_paths(loaded, [t.paths for t in templates], instances, problems)
    if problems:
        raise SpecError(problems)
    _check_unique_ids(loaded, instances, problems)
    producers = _producers(loaded, instances, problems)
    if problems:
        raise SpecError(problems)
    _connect_needs(loaded, templates, instances, problems)
    if problems:
        raise SpecError(problems)
    _connect_values(loaded, templates, instances, problems)
    if problems:
        raise SpecError(problems)
    _connect_files(loaded, instances, producers, problems, check_files)
    if problems:
        raise SpecError(problems)
    order = _topological_order(loaded, instances)
    return TaskGraph(
        loaded=loaded,
        templates=templates,
        instances=instances,
        order=order,
        waiting=waiting,
        waiting_on=waiting_on,
    )


def _why_waiting(loaded: LoadedWorkflow, i: int, on: tuple[str, ...]) -> str:
    name = loaded.workflow.tasks[i].name
    if name in loaded.waiting:
        return f"its instances are known when {', '.join(on)} ends"
    return f"waits for {', '.join(on)}, not planned yet"


def _waiting_tasks(
    loaded: LoadedWorkflow, templates: list[TaskTemplate]
) -> dict[int, tuple[str, ...]]:
    """The task definitions whose sweeps wait for files, and those that need or receive
    values from them, each with the tasks it waits for; :func:`_without_waiting` adds
    those that read their files."""
    waiting: dict[int, tuple[str, ...]] = {}
    for name, after in loaded.waiting.items():
        waiting[loaded.task_index(name)] = after
    _needing_waiting(loaded, templates, waiting)
    return waiting


def _needing_waiting(
    loaded: LoadedWorkflow, templates: list[TaskTemplate], waiting: dict[int, tuple[str, ...]]
) -> None:
    """Add to ``waiting`` the tasks that need, or receive values from, a waiting one."""
    changed = bool(waiting)
    while changed:
        changed = False
        for i, template in enumerate(templates):
            if i in waiting:
                continue
            upstream = [*template.spec.needs, *(s.task for s in template.spec.from_.values())]
            late = tuple(dict.fromkeys(u for u in upstream if loaded.task_index(u) in waiting))
            if late:
                waiting[i] = late
                changed = True


def _without_waiting(
    loaded: LoadedWorkflow,
    templates: list[TaskTemplate],
    instances: list[TaskInstance],
    waiting: dict[int, tuple[str, ...]],
) -> list[TaskInstance]:
    """``instances`` less those of tasks that read files a waiting task may write (their
    inputs may match its outputs), renumbered; such tasks wait too."""
    base_dir = str(loaded.base_dir)
    late_outputs: list[tuple[str, str]] = []  # (output glob, task)
    counted: set[int] = set()
    while True:
        for i in sorted(set(waiting) - counted):
            name = templates[i].spec.name
            late_outputs += [(g, name) for g in _output_globs(templates[i], base_dir)]
            counted.add(i)
        late: dict[int, set[str]] = {}
        for inst in instances:
            for pattern in inst.input_patterns:
                for output, name in late_outputs:
                    if _overlap(pattern, output):
                        late.setdefault(inst.spec_index, set()).add(name)
        if not late:
            break
        for spec_index, names in late.items():
            waiting[spec_index] = tuple(sorted(names))
        _needing_waiting(loaded, templates, waiting)
        instances = [inst for inst in instances if inst.spec_index not in waiting]
    for index, inst in enumerate(instances):
        inst.index = index
    return instances


def _output_globs(template: TaskTemplate, base_dir: str) -> list[str]:
    """The outputs of a task's instances, whatever its parameters: each placeholder a
    ``*``."""

    def star(parts: tuple[str, ...]) -> str:
        return "".join(glob.escape(p) if k % 2 == 0 else "*" for k, p in enumerate(parts))

    workdir = star(template.workdir.parts) or base_dir
    return [os.path.normpath(os.path.join(workdir, star(t.parts))) for t in template.outputs]


def _overlap(pattern: str, output_glob: str) -> bool:
    """Whether a path ``pattern`` reads (maybe a glob) may name a file ``output_glob``
    describes; when both are globs, their fixed beginnings decide (erring towards yes)."""
    if not _GLOB_CHARS & set(pattern):
        return fnmatchcase(pattern, output_glob)
    if not _GLOB_CHARS & set(output_glob):
        return fnmatchcase(output_glob, pattern)
    a, b = _fixed_start(pattern), _fixed_start(output_glob)
    return a.startswith(b) or b.startswith(a)


def _fixed_start(pattern: str) -> str:
    cut = min((pattern.index(c) for c in _GLOB_CHARS if c in pattern), default=len(pattern))
    return pattern[:cut]


def _check_unique_ids(
    loaded: LoadedWorkflow, instances: Sequence[TaskInstance], problems: list[SpecProblem]
) -> None:
    seen: set[str] = set()
    for inst in instances:
        if inst.id in seen:
            problems.append(
                loaded.positions.problem(
                    ("tasks", inst.spec_index, "foreach"),
                    f"two sweep instances have the same id {inst.id!r}",
                    hint="sweep values must differ as text (1 and '1' are the same)",
                )
            )
            return
        seen.add(inst.id)


def _producers(
    loaded: LoadedWorkflow, instances: Sequence[TaskInstance], problems: list[SpecProblem]
) -> dict[str, int]:
    producers: dict[str, int] = {}
    for inst in instances:
        for path in inst.outputs:
            other = producers.setdefault(path, inst.index)
            if other != inst.index:
                problems.append(
                    loaded.positions.problem(
                        ("tasks", inst.spec_index, "outputs"),
                        f"{inst.id!r} and {instances[other].id!r} both write {path}",
                        hint="every output file must come from exactly one task instance",
                    )
                )
                return producers
    return producers


def _connect_needs(
    loaded: LoadedWorkflow,
    templates: list[TaskTemplate],
    instances: list[TaskInstance],
    problems: list[SpecProblem],
) -> None:
    by_task: dict[int, list[TaskInstance]] = defaultdict(list)
    for inst in instances:
        by_task[inst.spec_index].append(inst)
    name_to_index = {t.spec.name: i for i, t in enumerate(templates)}
    for spec_index, template in enumerate(templates):
        sweep = loaded.sweeps.get(template.spec.name)
        for upstream in sweep.after if sweep is not None else ():
            # A sweep over files a task makes: after every instance of that task.
            targets = [i.index for i in by_task[name_to_index[upstream]]]
            for inst in by_task[spec_index]:
                inst.deps.extend(targets)
        for need in template.spec.needs:
            target = name_to_index[need]
            swept = loaded.sweeps.get(need)
            mine = by_task[spec_index]
            shared: tuple[str, ...] = ()
            if swept is not None and mine:
                shared = tuple(k for k in swept.names if k in mine[0].params)
            if not shared:
                # A plain need (or a reduce): depend on every instance of the needed task.
                targets = [i.index for i in by_task[target]]
                for inst in mine:
                    inst.deps.extend(targets)
                continue
            # Both sides sweep the same parameters: pair instances with equal values.
            index: dict[tuple[str, ...], list[int]] = defaultdict(list)
            for other in by_task[target]:
                index[tuple(str(other.params[k]) for k in shared)].append(other.index)
            for inst in mine:
                key = tuple(str(inst.params[k]) for k in shared)
                partners = index.get(key)
                if partners:
                    inst.deps.extend(partners)
                    continue
                j = template.spec.needs.index(need)
                values = ", ".join(f"{k}={v}" for k, v in zip(shared, key, strict=True))
                problems.append(
                    loaded.positions.problem(
                        ("tasks", spec_index, "needs", j),
                        f"{inst.id!r} needs {need!r}, but no instance of {need!r} has {values}",
                        hint="instances are paired on the parameters they share "
                        f"({', '.join(shared)}); "
                        "sweep the same values, or rename the parameter to wait for every instance",
                    )
                )
                return


def _connect_values(
    loaded: LoadedWorkflow,
    templates: list[TaskTemplate],
    instances: list[TaskInstance],
    problems: list[SpecProblem],
) -> None:
    """``from:``: each argument's producers, paired on the sweep parameters both tasks
    have (as ``needs``), gathered over the producer's other ones; each is a dependency."""
    by_task: dict[int, list[TaskInstance]] = defaultdict(list)
    for inst in instances:
        by_task[inst.spec_index].append(inst)
    name_to_index = {t.spec.name: i for i, t in enumerate(templates)}
    for spec_index, template in enumerate(templates):
        mine = by_task[spec_index]
        for argument, source in template.spec.from_.items():
            where = ("tasks", spec_index, "from", argument)
            target = name_to_index[source.task]
            swept = loaded.sweeps.get(source.task)
            names = swept.names if swept is not None else ()
            shared = tuple(k for k in names if mine and k in mine[0].params)
            extra = tuple(k for k in names if k not in shared)
            if source.as_ == "dict" and not extra:
                problems.append(
                    loaded.positions.problem(
                        where,
                        f"'as: dict' keys values by the parameters {source.task!r} sweeps "
                        f"and {template.spec.name!r} does not; there are none",
                        hint="use 'as: value' (or leave 'as' out)",
                    )
                )
                return
            if source.as_ == "value" and extra:
                problems.append(
                    loaded.positions.problem(
                        where,
                        f"'as: value' takes one instance, but each {template.spec.name!r} "
                        f"gathers every {source.task!r} over {', '.join(extra)}",
                        hint="use 'as: list' or 'as: dict', or sweep the same parameters",
                    )
                )
                return
            groups: dict[tuple[str, ...], list[TaskInstance]] = defaultdict(list)
            for other in by_task[target]:
                groups[tuple(str(other.params[k]) for k in shared)].append(other)
            shape = source.as_
            if shape == "auto":
                shape = "list" if extra else "value"
            for inst in mine:
                key = tuple(str(inst.params[k]) for k in shared)
                partners = groups.get(key)
                if not partners:
                    values = ", ".join(f"{k}={v}" for k, v in zip(shared, key, strict=True))
                    problems.append(
                        loaded.positions.problem(
                            where,
                            f"{inst.id!r} receives {argument!r} from {source.task!r}, but no "
                            f"instance of {source.task!r} has {values}",
                            hint=f"instances are paired on the parameters they share "
                            f"({', '.join(shared)}); sweep the same values",
                        )
                    )
                    return
                keys: tuple[object, ...] = ()
                if shape == "dict":
                    keys = tuple(
                        p.params[extra[0]] if len(extra) == 1 else tuple(p.params[k] for k in extra)
                        for p in partners
                    )
                inst.values[argument] = ValueArg(shape, tuple(p.index for p in partners), keys)
                inst.deps.extend(p.index for p in partners)


def _connect_files(
    loaded: LoadedWorkflow,
    instances: list[TaskInstance],
    producers: dict[str, int],
    problems: list[SpecProblem],
    check_files: bool,
) -> None:
    by_dir: dict[str, list[str]] | None = None
    for inst in instances:
        resolved: list[str] = []
        deps = set(inst.deps)
        for pattern in inst.input_patterns:
            if _GLOB_CHARS & set(pattern):
                if by_dir is None:
                    by_dir = defaultdict(list)
                    for path in producers:
                        by_dir[os.path.dirname(path)].append(path)
                matches = set(_glob_outputs(pattern, by_dir))
                matches.update(glob.glob(pattern))
                for path in sorted(matches):
                    producer = producers.get(path)
                    if producer == inst.index:
                        continue  # its own output, which its glob also matches
                    resolved.append(path)
                    if producer is not None:
                        deps.add(producer)
                continue
            resolved.append(pattern)
            producer = producers.get(pattern)
            if producer is not None:
                if producer != inst.index:
                    deps.add(producer)
            elif check_files and not os.path.exists(pattern):
                problems.append(
                    loaded.positions.problem(
                        ("tasks", inst.spec_index, "inputs"),
                        f"input {pattern} of {inst.id!r} is not produced by any task "
                        "and does not exist",
                        hint="add the task that writes it (with 'outputs:'), or fix the path",
                    )
                )
                if len(problems) > 20:
                    return
        inst.inputs = tuple(resolved)
        deps.discard(inst.index)
        inst.deps = sorted(deps)


def _glob_outputs(pattern: str, by_dir: dict[str, list[str]]) -> list[str]:
    directory = os.path.dirname(pattern)
    if _GLOB_CHARS & set(directory):
        candidates = [p for paths in by_dir.values() for p in paths]
    else:
        candidates = by_dir.get(directory, [])
    return [p for p in candidates if fnmatchcase(p, pattern)]


def _topological_order(loaded: LoadedWorkflow, instances: list[TaskInstance]) -> list[int]:
    indegree = [len(inst.deps) for inst in instances]
    dependents: list[list[int]] = [[] for _ in instances]
    for inst in instances:
        for dep in inst.deps:
            dependents[dep].append(inst.index)
    ready = deque(i for i, d in enumerate(indegree) if d == 0)
    order: list[int] = []
    while ready:
        node = ready.popleft()
        order.append(node)
        for child in dependents[node]:
            indegree[child] -= 1
            if indegree[child] == 0:
                ready.append(child)
    if len(order) == len(instances):
        return order
    cycle = _find_cycle(instances, {i for i, d in enumerate(indegree) if d > 0})
    ids = [instances[i].id for i in cycle]
    first = instances[cycle[0]]
    raise SpecError(
        [
            loaded.positions.problem(
                ("tasks", first.spec_index),
                "dependency cycle: " + " → ".join([*ids, ids[0]]),
                hint="remove one of these dependencies ('needs:', 'from:', or an input "
                "matching an output)",
            )
        ]
    )


def _find_cycle(instances: list[TaskInstance], stuck: set[int]) -> list[int]:
    """A cycle among ``stuck`` nodes, as a list in dependency order (a needs b needs ...)."""
    start = min(stuck)
    seen: dict[int, int] = {}
    path: list[int] = []
    node = start
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        node = next(d for d in instances[node].deps if d in stuck)
    cycle = path[seen[node] :]
    return cycle


def renumbered(graph: TaskGraph, first: Sequence[str]) -> TaskGraph:
    """``graph`` with the instances whose ids are ``first`` numbered first, in that order,
    then the others in graph order: a run's instances keep their numbers when the graph
    grows (a sweep over files a task made is planned during the run). Ids of ``first``
    the graph does not have are left out."""
    by_id = {inst.id: inst for inst in graph.instances}
    ordered = [by_id[task_id] for task_id in first if task_id in by_id]
    known = set(first)
    ordered += [inst for inst in graph.instances if inst.id not in known]
    new_index = {inst.index: k for k, inst in enumerate(ordered)}
    for k, inst in enumerate(ordered):
        inst.index = k
        inst.deps = sorted(new_index[d] for d in inst.deps)
        inst.values = {
            name: dataclasses.replace(arg, producers=tuple(new_index[p] for p in arg.producers))
            for name, arg in inst.values.items()
        }
    order = _topological_order(graph.loaded, ordered)
    return TaskGraph(
        loaded=graph.loaded,
        templates=graph.templates,
        instances=ordered,
        order=order,
        waiting=graph.waiting,
        waiting_on=graph.waiting_on,
    )
