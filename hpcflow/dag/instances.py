"""Expansion of task definitions into :class:`TaskInstance` objects."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from hpcflow.dag.confine import PathRules, rules_for, trusted_folders
from hpcflow.spec.loader import LoadedWorkflow
from hpcflow.spec.models import (
    Checkpoint,
    Defaults,
    Resources,
    RetryPolicy,
    SoftwareKeys,
    TaskSpec,
)
from hpcflow.spec.placeholders import Template, value_text

ParamValue = str | int | float | bool | list[str | int | float | bool]


@dataclass(frozen=True, slots=True)
class ValueArg:
    """One argument of a python task instance that receives upstream return values.

    ``shape`` is ``value`` (the one instance in ``producers``), ``list`` (the values of
    ``producers``, in sweep order) or ``dict`` (the same, keyed by ``keys``: each
    producer's own sweep value, or a tuple of them when it sweeps several).
    """

    shape: str
    producers: tuple[int, ...]
    keys: tuple[object, ...] = ()


@dataclass(slots=True, eq=False)
class TaskInstance:
    """One node of the graph: a task definition with every sweep parameter fixed."""

    index: int
    id: str
    spec_index: int
    params: dict[str, ParamValue]
    workdir: str
    outputs: tuple[str, ...]
    input_patterns: tuple[str, ...]
    inputs: tuple[str, ...] = ()
    deps: list[int] = field(default_factory=list)
    #: Arguments that receive upstream return values (``from:``), by argument name.
    values: dict[str, ValueArg] = field(default_factory=dict)

    @property
    def is_sweep_instance(self) -> bool:
        return "[" in self.id


@dataclass(frozen=True)
class TaskTemplate:
    """What every instance of one task definition shares, pre-parsed once."""

    spec: TaskSpec
    resources: Resources
    retries: RetryPolicy
    timeout: float | None
    env: dict[str, str]
    workdir: Template
    inputs: tuple[Template, ...]
    outputs: tuple[Template, ...]
    #: The task's software environment (container, modules, venv, conda) with the
    #: defaults' keys it does not set; None when it has none.
    software: SoftwareKeys | None = None
    #: The workflow file's folder (relative image and environment paths start there).
    base_dir: str = ""
    #: The signal it asks for before the allocation ends (``checkpoint``), if any.
    checkpoint: Checkpoint | None = None
    #: Where values may take its paths (:mod:`hpcflow.dag.confine`).
    paths: PathRules | None = None


def software_of(spec: TaskSpec, defaults: Defaults) -> SoftwareKeys | None:
    """``spec``'s software keys over those of ``defaults`` (None when neither sets any)."""
    keys = SoftwareKeys.model_fields
    own = set(spec.model_fields_set)
    if own & {"venv", "conda"}:
        own |= {"venv", "conda"}  # one Python environment: the task's replaces the default
    merged = {name: getattr(spec if name in own else defaults, name) for name in keys}
    if all(value is None for value in merged.values()):
        return None
    return SoftwareKeys.model_validate(merged)


def templates_for(loaded: LoadedWorkflow) -> list[TaskTemplate]:
    """Resolve defaults into every task definition."""
    workflow = loaded.workflow
    defaults = workflow.defaults
    base_dir = str(loaded.base_dir)
    out = []
    for spec in workflow.tasks:
        resources = (
            spec.resources.merged_over(defaults.resources) if spec.resources else defaults.resources
        )
        # The folder of the file is literal text (it may contain braces); the workdir
        # settings below it may hold {placeholders}.
        relative = [p for p in (workflow.workdir, defaults.workdir, spec.workdir) if p]
        parts = Template.parse(os.path.join(*relative)).parts if relative else ("",)
        workdir = Template((os.path.join(base_dir, parts[0]), *parts[1:]))
        inputs = tuple(Template.parse(p) for p in spec.inputs)
        outputs = tuple(Template.parse(p) for p in spec.outputs)
        trusted = trusted_folders(spec.foreach, base_dir)
        out.append(
            TaskTemplate(
                spec=spec,
                resources=resources,
                retries=spec.retries or defaults.retries or RetryPolicy.model_validate({}),
                timeout=spec.timeout if spec.timeout is not None else defaults.timeout,
                env={**defaults.env, **spec.env},
                workdir=workdir,
                inputs=inputs,
                outputs=outputs,
                software=software_of(spec, defaults),
                base_dir=base_dir,
                checkpoint=spec.checkpoint or defaults.checkpoint,
                paths=rules_for(workdir, inputs, outputs, base_dir, trusted),
            )
        )
    return out


def instance_id(name: str, keys: tuple[str, ...], values: tuple[object, ...]) -> str:
    """``simulate[seed=3,sample=a]``; a task without a sweep keeps its bare name."""
    if not keys:
        return name
    if len(keys) == 1:
        return f"{name}[{keys[0]}={value_text(values[0])}]"
    inner = ",".join(f"{k}={value_text(v)}" for k, v in zip(keys, values, strict=True))
    return f"{name}[{inner}]"


def expand(
    loaded: LoadedWorkflow, templates: list[TaskTemplate], skip: frozenset[int] = frozenset()
) -> Iterator[TaskInstance]:
    """Yield every task instance, in file order, sweeps in their natural order (none of
    the task definitions in ``skip``)."""
    index = 0
    for spec_index, template in enumerate(templates):
        if spec_index in skip:
            continue
        spec = template.spec
        sweep = loaded.sweeps.get(spec.name)
        if sweep is None:
            combos: Iterator[tuple[object, ...]] = iter([()])
            keys: tuple[str, ...] = ()
        else:
            combos = sweep.combinations()
            keys = sweep.names
        constant = dict(spec.params)
        # A working directory without placeholders is the same for every instance.
        fixed_workdir = (
            os.path.normpath(template.workdir.parts[0]) if template.workdir.is_constant else None
        )
        for combo in combos:
            params: dict[str, ParamValue] = dict(constant)
            params.update(zip(keys, combo, strict=True))  # type: ignore[arg-type]
            workdir = fixed_workdir or os.path.normpath(template.workdir.render(params, value_text))
            outputs = tuple(
                os.path.normpath(os.path.join(workdir, t.render(params, value_text)))
                for t in template.outputs
            )
            patterns = tuple(
                os.path.normpath(os.path.join(workdir, t.render(params, value_text)))
                for t in template.inputs
            )
            yield TaskInstance(
                index=index,
                id=instance_id(spec.name, keys, combo),
                spec_index=spec_index,
                params=params,
                workdir=workdir,
                outputs=outputs,
                input_patterns=patterns,
            )
            index += 1
