"""Typed models of a workflow file.

These are pure data: they validate shapes and types, nothing here knows how a task is run.
Semantic checks that need the whole document (names, placeholders, dependencies) live in
:mod:`hpcflow.spec.loader`; sweep expansion lives in :mod:`hpcflow.dag`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    WithJsonSchema,
    model_validator,
)

from hpcflow.spec.names import image_problem, module_problem
from hpcflow.spec.units import parse_duration, parse_memory

Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    WithJsonSchema(
        {
            "anyOf": [{"type": "number", "minimum": 0}, {"type": "string"}],
            "description": "seconds, or e.g. '90s', '10m', '1h30m', '2:00:00'",
        }
    ),
]
Memory = Annotated[
    int,
    BeforeValidator(parse_memory),
    WithJsonSchema(
        {
            "anyOf": [{"type": "number", "minimum": 0}, {"type": "string"}],
            "description": "e.g. '512MB', '4GB', '2GiB'; a bare number is megabytes",
        }
    ),
]
Scalar = str | int | float | bool


def _gpu_count(value: Any) -> Any:
    """A whole number of GPUs, or a share of one (0 < x < 1): never 1.5."""
    if isinstance(value, bool):
        raise ValueError("expected a number of GPUs")
    if not isinstance(value, int | float):
        return value  # the type check says what is wrong
    if value < 0:
        raise ValueError("must be 0 or more")
    if value > 1 and value != int(value):
        raise ValueError("a task shares at most one GPU: use a fraction below 1, or whole GPUs")
    return int(value) if value == int(value) else float(value)


GpuCount = Annotated[
    int | float,
    BeforeValidator(_gpu_count),
    WithJsonSchema(
        {
            "type": "number",
            "minimum": 0,
            "description": "whole GPUs, or a fraction of one (e.g. 0.25: four tasks share it)",
        }
    ),
]


def _matching(pattern: str, what: str) -> AfterValidator:
    """A check that a name matches ``pattern`` whole; the error says it is not ``what``."""
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"{value!r} is not {what}")
        return value

    return AfterValidator(check)


def _checked(problem: Callable[[str], str | None]) -> AfterValidator:
    """A validator that refuses a value ``problem`` finds fault with (names.py)."""

    def check(value: str) -> str:
        found = problem(value)
        if found:
            raise ValueError(found)
        return value

    return AfterValidator(check)


#: An environment module's name, checked before Lmod sees it (it evaluates names).
ModuleName = Annotated[str, _checked(module_problem)]
#: A container image: a reference or a path, never an option.
ImageName = Annotated[str, _checked(image_problem)]

#: A pool's name: it becomes part of job names and of a Dask resource's name.
PoolName = Annotated[
    str,
    _matching(
        r"[A-Za-z][A-Za-z0-9_-]{0,31}",
        "a pool name: a letter, then up to 31 letters, digits, '_' or '-'",
    ),
]
#: A kind of GPU as the batch system names it (SLURM's gres type: a100, h100...).
GpuKind = Annotated[
    str,
    _matching(
        r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}",
        "a GPU kind: letters, digits, '_', '.' or '-' (e.g. a100)",
    ),
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Resources(_Model):
    """What one attempt of a task needs. Unset fields inherit from ``defaults``."""

    cpus: PositiveInt = Field(1, description="CPU cores (slots) the task occupies")
    memory: Memory | None = Field(None, description="memory, e.g. '4GB'")
    gpus: GpuCount = Field(
        0, description="GPUs the task needs: a whole number, or a fraction of one GPU (0.25)"
    )
    walltime: Duration | None = Field(None, description="expected upper bound of the runtime")
    ranks: PositiveInt = Field(1, description="MPI ranks (a task with ranks > 1 is an MPI task)")
    nodes: PositiveInt | None = Field(None, description="nodes to spread MPI ranks over")
    pool: PoolName | None = Field(
        None,
        description="the profile's pool (allocation shape) to run in; default: the smallest "
        "pool that fits the task",
    )
    gpu_kind: GpuKind | None = Field(
        None,
        description="the kind of GPU the task needs (e.g. a100): it runs in a pool of that "
        "kind, and a job of its own asks for that kind",
    )

    def merged_over(self, base: Resources) -> Resources:
        """These resources, with fields this object did not set taken from ``base``."""
        # Both sides are already validated: re-validating would parse memory (in bytes)
        # again as a bare number of megabytes.
        return base.model_copy(update={name: getattr(self, name) for name in self.model_fields_set})


def _retries_from_int(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return {"attempts": value}
    return value


class RetryPolicy(_Model):
    """How often a failed task is tried again, and how long to wait in between."""

    attempts: NonNegativeInt = Field(0, description="extra attempts after the first one fails")
    backoff: Duration = Field(1.0, description="wait before the first retry")
    factor: float = Field(2.0, ge=1.0, description="each further wait is multiplied by this")
    max_backoff: Duration = Field(300.0, description="upper bound of one wait")

    def allows_another(self, attempt: int) -> bool:
        """Whether a task whose attempt number ``attempt`` (1-based) failed is tried again."""
        return attempt - 1 < self.attempts

    def delay(self, retry_number: int) -> float:
        """Seconds to wait before retry ``retry_number`` (1-based)."""
        return float(min(self.max_backoff, self.backoff * self.factor ** (retry_number - 1)))


Retries = Annotated[
    RetryPolicy,
    BeforeValidator(_retries_from_int),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {
                    "type": "object",
                    "properties": {
                        "attempts": {"type": "integer", "minimum": 0},
                        "backoff": {"anyOf": [{"type": "number"}, {"type": "string"}]},
                        "factor": {"type": "number", "minimum": 1},
                        "max_backoff": {"anyOf": [{"type": "number"}, {"type": "string"}]},
                    },
                    "additionalProperties": False,
                },
            ]
        }
    ),
]


Runtime = Literal["apptainer", "singularity", "charliecloud", "podman"]


class ContainerSpec(_Model):
    """The container image a task runs in, and how."""

    image: ImageName = Field(
        min_length=1,
        description="a .sif file, an image folder, a squashfs file (Charliecloud), a "
        "docker:// or oras:// reference (Apptainer), or an image name (Podman)",
    )
    runtime: Runtime | None = Field(
        None,
        description="apptainer, singularity, charliecloud or podman (default: the "
        "profile's container_runtime; .sqfs images: charliecloud)",
    )
    binds: list[str] = Field(
        default_factory=list,
        description="more host paths to mount, 'SRC' or 'SRC:DST' (the workflow folder and "
        "the run directory are always mounted at their own paths)",
    )
    options: list[str] = Field(
        default_factory=list, description="extra runtime arguments, one per item"
    )
    python: str = Field(
        "python3", min_length=1, description="python tasks: the image's Python interpreter"
    )


def _container_from_image(value: Any) -> Any:
    return {"image": value} if isinstance(value, str) else value


Container = Annotated[
    ContainerSpec,
    BeforeValidator(_container_from_image),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "description": "the image"},
                {
                    "type": "object",
                    "properties": {
                        "image": {"type": "string"},
                        "runtime": {"enum": ["apptainer", "singularity", "charliecloud", "podman"]},
                        "binds": {"type": "array", "items": {"type": "string"}},
                        "options": {"type": "array", "items": {"type": "string"}},
                        "python": {"type": "string"},
                    },
                    "required": ["image"],
                    "additionalProperties": False,
                },
            ]
        }
    ),
]


class ModulesSpec(_Model):
    """Environment modules (Lmod or Environment Modules) loaded before a task runs."""

    load: list[ModuleName] = Field(
        default_factory=list, description="modules, loaded in this order"
    )
    purge: bool = Field(False, description="run `module purge` first")


def _modules_from_list(value: Any) -> Any:
    return {"load": value} if isinstance(value, list) else value


Modules = Annotated[
    ModulesSpec,
    BeforeValidator(_modules_from_list),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "array", "items": {"type": "string"}},
                {
                    "type": "object",
                    "properties": {
                        "load": {"type": "array", "items": {"type": "string"}},
                        "purge": {"type": "boolean"},
                    },
                    "additionalProperties": False,
                },
            ]
        }
    ),
]


class SoftwareKeys(_Model):
    """The software environment keys a task and ``defaults`` share."""

    container: Container | None = Field(None, description="the container image the task runs in")
    modules: Modules | None = Field(
        None, description="environment modules to load: a list, or {load: [...], purge: true}"
    )
    venv: str | None = Field(
        None, min_length=1, description="a Python virtual environment (folder) to activate"
    )
    conda: str | None = Field(
        None, min_length=1, description="a conda environment's prefix (folder) to activate"
    )

    @model_validator(mode="after")
    def _one_python_environment(self) -> SoftwareKeys:
        if self.venv is not None and self.conda is not None:
            raise ValueError("give one of 'venv' and 'conda': a task activates one environment")
        return self


#: Signals a task may ask for before its allocation ends.
CHECKPOINT_SIGNALS = ("SIGUSR1", "SIGUSR2", "SIGTERM", "SIGINT", "SIGHUP", "SIGALRM")


def _signal_name(value: Any) -> Any:
    if isinstance(value, str):
        name = value.strip().upper()
        name = name if name.startswith("SIG") else f"SIG{name}"
        if name not in CHECKPOINT_SIGNALS:
            raise ValueError(f"expected one of {', '.join(CHECKPOINT_SIGNALS)}")
        return name
    return value


class Checkpoint(_Model):
    """A signal a task gets before its allocation's walltime, to save its state: its
    attempt is then *interrupted* (not failed), and a continuation allocation runs it
    again with ``HPCFLOW_CONTINUATION=1``."""

    signal: Annotated[str, BeforeValidator(_signal_name)] = Field(
        "SIGUSR1", description="the signal: SIGUSR1 (default), SIGUSR2, SIGTERM, SIGINT, ..."
    )
    before: Duration = Field(description="how long before the allocation ends it comes, e.g. '5m'")


class Defaults(SoftwareKeys):
    """Values every task inherits unless it sets its own."""

    resources: Resources = Field(default_factory=lambda: Resources.model_validate({}))
    retries: Retries | None = None
    timeout: Duration | None = None
    checkpoint: Checkpoint | None = None
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str | None = None


class ValueFrom(_Model):
    """Where a ``python:`` task's argument comes from: an upstream ``python:`` task's
    return value."""

    task: str = Field(min_length=1, description="the upstream python task")
    as_: Literal["auto", "value", "list", "dict"] = Field(
        "auto",
        alias="as",
        description="value: exactly one upstream instance; list: every instance the "
        "argument gathers, in sweep order; dict: the same keyed by their parameters; "
        "auto (default): one value when paired or unswept, else a list",
    )


def _value_from_name(value: Any) -> Any:
    return {"task": value} if isinstance(value, str) else value


ValueSource = Annotated[
    ValueFrom,
    BeforeValidator(_value_from_name),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "description": "the upstream python task"},
                {
                    "type": "object",
                    "properties": {
                        "task": {"type": "string"},
                        "as": {"enum": ["auto", "value", "list", "dict"]},
                    },
                    "required": ["task"],
                    "additionalProperties": False,
                },
            ]
        }
    ),
]


class TaskSpec(SoftwareKeys):
    """One entry of ``tasks:``; a ``foreach`` sweep turns it into many task instances."""

    name: str = Field(min_length=1, description="unique name; sweep instances get name[k=v,...]")
    description: str | None = None
    command: str | None = Field(
        None, description="shell command run by bash; {param} values are shell-quoted"
    )
    argv: list[str] | None = Field(
        None, min_length=1, description="program and arguments, run without a shell"
    )
    python: str | None = Field(
        None, description="'package.module:function', called with the task's parameters"
    )
    foreach: dict[str, Any] | None = Field(
        None,
        description="sweep: param → list or {range: [start, stop, step]}; "
        "or {product: {...}, zip: {...}}; from_files: 'data/{sample}.fastq' (an instance "
        "per matching file) and from_table: samples.tsv (per row of a CSV/TSV/JSON/YAML "
        "sheet; {path, where, columns}) add the values they read",
    )
    params: dict[str, Scalar | list[Scalar]] = Field(
        default_factory=dict, description="constant parameters"
    )
    inputs: list[str] = Field(default_factory=list, description="files (globs) the task reads")
    outputs: list[str] = Field(default_factory=list, description="files the task must create")
    needs: list[str] = Field(default_factory=list, description="names of tasks to run first")
    from_: dict[str, ValueSource] = Field(
        default_factory=dict,
        alias="from",
        description="python tasks: argument → upstream python task whose return value it "
        "receives (instances sweeping the same parameters are paired, as with 'needs')",
    )
    persist: bool = Field(
        True,
        description="python tasks: keep the return value other tasks receive in the run "
        "directory, so a later run can hand it on (false: in memory only, on Dask)",
    )
    resources: Resources | None = None
    retries: Retries | None = None
    timeout: Duration | None = Field(None, description="kill the attempt after this long")
    checkpoint: Checkpoint | None = Field(
        None,
        description="batch runs: a signal before the allocation's walltime ({signal: "
        "SIGUSR1, before: 5m}); the attempt is then interrupted and continued",
    )
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str | None = Field(None, description="directory the task runs in")
    scratch: bool = Field(
        False,
        description="run in a fresh folder on the node's own disk (the profile's "
        "scratch_dir), inputs linked in, declared outputs copied back after a success",
    )

    @model_validator(mode="after")
    def _one_action(self) -> TaskSpec:
        given = [k for k in ("command", "argv", "python") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "a task needs exactly one of 'command', 'argv' or 'python'"
                + (f" (it has {', '.join(given)})" if given else "")
            )
        return self

    @property
    def kind(self) -> str:
        """``shell``, ``argv`` or ``python``."""
        if self.command is not None:
            return "shell"
        if self.argv is not None:
            return "argv"
        return "python"


#: An include's name: its tasks are named ``NAME.TASK``.
Namespace = Annotated[
    str,
    _matching(
        r"[A-Za-z][A-Za-z0-9_-]{0,63}",
        "an include name: a letter, then letters, digits, '_' or '-' (no '.')",
    ),
]


class Include(_Model):
    """Another workflow file whose tasks join this workflow, named ``NAME.TASK``."""

    file: str = Field(
        min_length=1,
        description="the workflow file, or a folder with a workflow.yaml, relative to this file",
    )
    params: dict[str, Scalar | list[Scalar]] = Field(
        default_factory=dict,
        description="values of parameters its tasks use: they replace the values its tasks "
        "give, and fill in {placeholders} its tasks leave open",
    )


def _include_from_file(value: Any) -> Any:
    return {"file": value} if isinstance(value, str) else value


IncludeEntry = Annotated[
    Include,
    BeforeValidator(_include_from_file),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "description": "the workflow file or folder"},
                {
                    "type": "object",
                    "properties": {
                        "file": {"type": "string"},
                        "params": {"type": "object"},
                    },
                    "required": ["file"],
                    "additionalProperties": False,
                },
            ]
        }
    ),
]


class Workflow(_Model):
    """A whole workflow file."""

    name: str = Field(min_length=1, description="the workflow's name")
    description: str | None = None
    workdir: str | None = Field(
        None, description="directory tasks run in, relative to this file (default: its folder)"
    )
    defaults: Defaults = Field(default_factory=lambda: Defaults.model_validate({}))
    include: dict[Namespace, IncludeEntry] = Field(
        default_factory=dict,
        description="other workflow files whose tasks join this one: NAME → file (or "
        "{file, params}); their tasks are named NAME.TASK",
    )
    tasks: list[TaskSpec] = Field(min_length=1)
