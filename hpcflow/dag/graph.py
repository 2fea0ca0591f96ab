"""Dependency edges (explicit ``needs`` and inferred from files), cycle detection, order."""

from __future__ import annotations

import glob
import os
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

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
    instances = list(expand(loaded, templates))
    problems: list[SpecProblem] = []
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
    return TaskGraph(loaded, templates, instances, order)


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
