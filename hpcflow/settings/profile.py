"""The :class:`Profile`: where a run's allocations go and how they are shaped.

A profile is pure data, like the workflow spec: it names a backend, a launcher, a
transport and the size of an allocation, and knows no batch-system syntax. Backends turn
it into ``#SBATCH``/``#PBS`` lines; :mod:`hpcflow.settings.resolve` builds one from its
layers (built-in defaults, a profile file, the environment, the command line).
"""

from __future__ import annotations

import re
import shlex
import sys
import types
import typing
from typing import Annotated, Any, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    model_validator,
)

from hpcflow.spec.models import Duration, GpuKind, Memory, ModuleName, PoolName
from hpcflow.spec.units import parse_duration, parse_memory

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _single_line(value: str) -> str:
    # These values end up on one `#SBATCH`/`#PBS`/`module load` line each; a newline
    # would start a new directive or command that nobody wrote on purpose.
    if "\n" in value or "\r" in value or "\0" in value:
        raise ValueError("must be a single line (no line breaks)")
    return value


def _env_name(value: str) -> str:
    if not _ENV_NAME.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a valid environment variable name "
            "(letters, digits and '_', not starting with a digit)"
        )
    return value


def _env_value_text(value: Any) -> Any:
    # `OMP_NUM_THREADS: 1` is unambiguous; true/false are not (which spelling?), so
    # booleans still fail and ask to be quoted.
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


def _check_worker_memory_limit(value: Any) -> Any:
    """Dask's ``memory_limit``: ``"auto"``, a fraction of the node (0-1], or an amount."""
    if isinstance(value, bool):
        raise ValueError("expected 'auto', a fraction such as 0.8, or memory such as '4GB'")
    if isinstance(value, int | float):
        value = str(value)
    if not isinstance(value, str):
        raise ValueError("expected 'auto', a fraction such as 0.8, or memory such as '4GB'")
    text = value.strip()
    if text.lower() == "auto":
        return "auto"
    try:
        fraction = float(text)
    except ValueError:
        parse_memory(text)  # raises a ValueError that shows the accepted forms
        return text
    if not 0 < fraction <= 1:
        raise ValueError(
            "a bare number is a fraction of the node's memory and must be in (0, 1]; "
            "write an amount such as '4GB' otherwise"
        )
    return text


def _check_fraction(value: Any) -> Any:
    """A memory threshold: a fraction in (0, 1], or false to switch it off."""
    if value is None or value is False:
        return value
    if isinstance(value, str) and value.strip().lower() in ("false", "off", "no"):
        return False
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError("expected a fraction such as 0.6, or false to switch it off")
    try:
        number = float(value)
    except ValueError:
        raise ValueError("expected a fraction such as 0.6, or false to switch it off") from None
    if not 0 < number <= 1:
        raise ValueError("must be a fraction in (0, 1], or false to switch it off")
    return number


SingleLine = Annotated[str, AfterValidator(_single_line)]
MemoryFraction = Annotated[float | Literal[False] | None, BeforeValidator(_check_fraction)]
EnvName = Annotated[str, AfterValidator(_env_name)]
EnvValue = Annotated[str, BeforeValidator(_env_value_text)]
WorkerMemoryLimit = Annotated[str, BeforeValidator(_check_worker_memory_limit)]
PositiveDuration = Annotated[Duration, Field(gt=0)]


class CrossFieldError(ValueError):
    """A problem with a combination of fields; ``fields`` lets callers say where each came from."""

    def __init__(self, message: str, fields: tuple[str, ...]) -> None:
        super().__init__(message)
        self.fields = fields


class Pool(BaseModel):
    """One allocation shape of a profile (a CPU partition, a GPU partition...): the
    profile's settings it changes. Tasks name the pool they need (``resources.pool``),
    or run in the smallest pool that fits them; see :mod:`hpcflow.engine.pools`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str | None = Field(None, description="one line shown by `hpcflow profiles`")
    partition: SingleLine | None = Field(None, description="partition (SLURM) or queue (PBS)")
    account: SingleLine | None = Field(None, description="account/project charged")
    qos: SingleLine | None = Field(None, description="quality of service")
    constraint: SingleLine | None = Field(None, description="node features required")
    nodes: PositiveInt | None = Field(None, description="nodes per allocation")
    cpus_per_node: PositiveInt | None = Field(None, description="CPU cores used on each node")
    gpus_per_node: NonNegativeInt | None = Field(None, description="GPUs on each node")
    gpu_kind: GpuKind | None = Field(
        None, description="the kind of its GPUs (SLURM gres type, e.g. a100)"
    )
    memory_per_node: Memory | None = Field(None, description="memory requested on each node")
    walltime: Duration | None = Field(None, description="time limit of one allocation")
    workers_per_node: PositiveInt | Literal["per-gpu"] | None = Field(
        None, description="Dask workers per node, or 'per-gpu'"
    )
    threads_per_worker: PositiveInt | None = Field(None, description="threads of each worker")
    modules: list[ModuleName] | None = Field(
        None, description="environment modules of this pool's allocations (replace the profile's)"
    )
    setup: list[str] | None = Field(
        None, description="shell lines of this pool's batch scripts (replace the profile's)"
    )
    extra_directives: list[SingleLine] | None = Field(
        None, description="extra batch-system options (replace the profile's)"
    )
    env: dict[EnvName, EnvValue] = Field(
        default_factory=dict, description="environment variables added to the profile's"
    )
    min_workers: NonNegativeInt | None = Field(
        None, description="elastic mode: this pool's worker jobs kept when it has nothing to run"
    )
    max_workers: PositiveInt | None = Field(
        None, description="elastic mode: most worker jobs of this pool at once"
    )

    def over(self, profile: Profile) -> Profile:
        """``profile`` as this pool shapes it (its own ``pools`` dropped)."""
        update: dict[str, Any] = {
            name: getattr(self, name)
            for name in self.model_fields_set
            if name not in ("description", "env") and getattr(self, name) is not None
        }
        update["env"] = {**profile.env, **self.env}
        update["pools"] = {}
        shaped = profile.model_copy(update=update)
        if shaped.workers_per_node == "per-gpu" and shaped.gpus_per_node < 1:
            raise CrossFieldError(
                "workers_per_node 'per-gpu' needs gpus_per_node of at least 1",
                ("workers_per_node", "gpus_per_node"),
            )
        if shaped.min_workers > shaped.max_workers:
            raise CrossFieldError(
                f"min_workers ({shaped.min_workers}) is more than max_workers "
                f"({shaped.max_workers})",
                ("min_workers", "max_workers"),
            )
        return shaped


class Profile(BaseModel):
    """Everything about where and how a run's allocations are made.

    Guarantees, once constructed: durations are seconds, memory is bytes, every value
    that becomes a directive or a ``module load`` is a single line, and the
    combinations below are consistent (``per-gpu`` workers need GPUs; the poll interval
    cap is not below the first interval).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # -- identity -------------------------------------------------------------------------
    name: str = Field(min_length=1, description="the profile's name (its file name)")
    description: str | None = Field(None, description="one line shown by `hpcflow profiles`")

    # -- where and how ----------------------------------------------------------------------
    backend: Literal["local", "slurm", "pbs"] = Field(
        "local", description="the batch system allocations are queued on"
    )
    pbs_flavor: Literal["pro", "torque"] = Field(
        "pro",
        description="PBS backend: 'pro' (PBS Professional/OpenPBS: select=, qstat -F json) or "
        "'torque' (nodes=N:ppn=C, text qstat)",
    )
    mode: Literal["pilot", "jobs", "elastic"] = Field(
        "pilot",
        description="pilot: one allocation runs Dask over its ranks; jobs: one batch job per "
        "task; elastic: dask-jobqueue workers that come and go",
    )
    partition: SingleLine | None = Field(None, description="partition (SLURM) or queue (PBS)")
    account: SingleLine | None = Field(None, description="account/project charged")
    qos: SingleLine | None = Field(None, description="quality of service")
    constraint: SingleLine | None = Field(None, description="node features required")
    modules: list[ModuleName] = Field(
        default_factory=list, description="environment modules; each becomes `module load X`"
    )
    setup: list[str] = Field(
        default_factory=list,
        description="shell lines run first in the batch script (trusted, not quoted)",
    )

    # -- inside the allocation --------------------------------------------------------------
    launcher: Literal["srun", "mpirun", "single"] = Field(
        "srun", description="how ranks start inside an allocation"
    )
    mpi: SingleLine = Field("pmix", description="srun --mpi value")
    local_mpi_launch: list[SingleLine] | None = Field(
        None,
        description="pilot mode: the command that starts an MPI task that fits on one "
        "worker on that worker's own node, instead of a batch-system step (hpcflow adds "
        "-n RANKS), e.g. [mpirun, --mca, plm, isolated, --oversubscribe, --bind-to, none] "
        "for Open MPI or [mpiexec, -launcher, fork] for MPICH; default: every MPI task is a "
        "step",
    )
    transport: Literal["tcp", "tls", "ucx"] = Field(
        "tls",
        description="how Dask's scheduler, driver and workers talk: tls (per-run "
        "certificates, the default), tcp (no authentication) or ucx (unencrypted)",
    )
    require_encryption: bool = Field(
        False, description="refuse transports that do not encrypt (tcp, ucx)"
    )
    interface: SingleLine | None = Field(
        None, description="network interface Dask binds to, e.g. ib0"
    )
    dashboard_address: SingleLine | None = Field(
        None,
        description="serve the scheduler's dashboard here, e.g. ':8787' or ':0' (any port); "
        "off when unset",
    )
    # -- Dask worker knobs (distributed.Worker) ----------------------------------------------
    worker_memory_target: MemoryFraction = Field(
        None, description="fraction of memory_limit at which a worker spills to disk"
    )
    worker_memory_spill: MemoryFraction = Field(
        None, description="fraction of process memory at which a worker spills"
    )
    worker_memory_pause: MemoryFraction = Field(
        None, description="fraction at which a worker stops running tasks"
    )
    worker_resources: dict[SingleLine, Annotated[float, Field(ge=0)]] = Field(
        default_factory=dict,
        description="extra abstract resources every worker offers, e.g. {licence: 1}",
    )
    worker_lifetime: PositiveDuration | None = Field(
        None, description="workers retire gracefully after this long (e.g. before the walltime)"
    )
    worker_lifetime_stagger: Duration = Field(
        0.0, description="random spread of worker_lifetime, so workers do not retire at once"
    )
    worker_nanny: bool = Field(
        True,
        description="run each worker under a nanny: a killed worker is restarted and what "
        "its tasks left running is killed",
    )
    nodes: PositiveInt = Field(1, description="nodes per allocation")
    workers_per_node: PositiveInt | Literal["per-gpu"] = Field(
        1, description="Dask workers per node, or 'per-gpu' for one per GPU"
    )
    threads_per_worker: PositiveInt | None = Field(
        None, description="threads of each worker (default: cpus_per_node / workers_per_node)"
    )
    cpus_per_node: PositiveInt | None = Field(None, description="CPU cores used on each node")
    gpus_per_node: NonNegativeInt = Field(0, description="GPUs requested on each node")
    gpu_kind: GpuKind | None = Field(
        None,
        description="the kind of GPU asked for (SLURM: --gres=gpu:KIND:N); tasks that need "
        "another kind run in a pool of theirs",
    )
    memory_per_node: Memory | None = Field(None, description="memory requested on each node")
    worker_memory_limit: WorkerMemoryLimit | None = Field(
        None, description="Dask worker memory limit: 'auto', a fraction, or e.g. '8GB'"
    )
    local_directory: str | None = Field(
        None, description="node-local scratch for workers; $VARS are expanded on the node"
    )
    walltime: Duration | None = Field(None, description="time limit of one allocation")
    overcommit: bool = Field(True, description="allow more ranks than cores (srun --overcommit)")
    extra_directives: list[SingleLine] = Field(
        default_factory=list,
        description="extra batch-system options, one per item, without '#SBATCH'/'#PBS'",
    )
    env: dict[EnvName, EnvValue] = Field(
        default_factory=dict, description="environment variables set for every rank"
    )
    python: str | None = Field(
        None, description="Python interpreter on the compute nodes (default: this one)"
    )

    # -- software environments of tasks (container:, modules:) ---------------------------------
    container_runtime: Literal["apptainer", "singularity", "charliecloud", "podman"] = Field(
        "apptainer", description="the container runtime of tasks whose container names none"
    )
    container_commands: dict[SingleLine, SingleLine] = Field(
        default_factory=dict,
        description="the command of a runtime where it differs from its name, e.g. "
        "{apptainer: /opt/apptainer/bin/apptainer}",
    )
    container_binds: list[SingleLine] = Field(
        default_factory=list,
        description="host paths every container mounts, 'SRC' or 'SRC:DST' (e.g. /scratch)",
    )
    container_options: list[SingleLine] = Field(
        default_factory=list,
        description="extra arguments of every container run, one per item",
    )
    container_cache: str | None = Field(
        None, description="where Apptainer keeps the images it pulls (docker://, oras://)"
    )
    modules_init: str | None = Field(
        None,
        description="the shell file that defines `module` for tasks' modules: (default: "
        "Lmod's or Environment Modules' init file, wherever found)",
    )

    # -- files of tasks on the file system ------------------------------------------------------
    task_logs: Literal["per-task", "per-worker"] = Field(
        "per-task",
        description="per-task: each attempt's stdout/stderr in files of their own "
        "(tasks/SLUG/N.out, .err); per-worker: appended as records to one file per worker "
        "process (logs/), far fewer files on a shared file system; `hpcflow logs` reads both",
    )
    scratch_dir: SingleLine | None = Field(
        None,
        description="where tasks with 'scratch: true' run, in a fresh folder each, on the "
        "node; $VARS are expanded there (default: $SLURM_TMPDIR, else $TMPDIR, else /tmp)",
    )

    # -- elastic mode -----------------------------------------------------------------------
    min_workers: NonNegativeInt = Field(
        0, description="elastic mode: worker jobs kept even when there is nothing to run"
    )
    max_workers: PositiveInt = Field(4, description="elastic mode: most worker jobs at once")
    adapt_interval: PositiveDuration = Field(
        5.0, description="elastic mode: time between scaling decisions"
    )
    adapt_wait_count: PositiveInt = Field(
        3, description="elastic mode: idle checks in a row before a worker job is retired"
    )

    # -- talking to the batch system ----------------------------------------------------------
    poll_interval: PositiveDuration = Field(5.0, description="first wait between status polls")
    max_poll_interval: PositiveDuration = Field(60.0, description="longest wait between polls")
    submit_retries: NonNegativeInt = Field(3, description="retries of a failed submission")
    resubmit: bool = Field(
        False,
        description="queue a continuation allocation when the walltime runs out or a "
        "node failure ends the allocation",
    )
    max_resubmits: NonNegativeInt = Field(3, description="most continuation allocations")

    # -- jobs mode --
    max_array_size: PositiveInt = Field(
        1000, description="jobs mode: most task instances in one job array (larger sweeps split)"
    )
    array_parallelism: PositiveInt | None = Field(
        None, description="jobs mode: most elements of one array running at once (the % cap)"
    )
    dependencies: Literal["scheduler", "driver"] = Field(
        "scheduler",
        description="jobs mode: the batch system holds dependent jobs (afterok), or the "
        "submit host submits a job once its upstream tasks succeeded",
    )
    submit_rate: PositiveFloat = Field(
        5.0, description="jobs mode: most job submissions per second"
    )
    max_queued_jobs: PositiveInt | None = Field(
        None, description="jobs mode: most jobs (array elements count) queued or running at once"
    )

    # -- several allocation shapes ------------------------------------------------------------
    pools: dict[PoolName, Pool] = Field(
        default_factory=dict,
        description="named allocation shapes (e.g. cpu, gpu), each the settings it changes; "
        "a task runs in the pool it names (resources.pool) or the smallest that fits it",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Profile:
        if self.workers_per_node == "per-gpu" and self.gpus_per_node < 1:
            raise CrossFieldError(
                "workers_per_node 'per-gpu' needs gpus_per_node of at least 1",
                ("workers_per_node", "gpus_per_node"),
            )
        if self.max_poll_interval < self.poll_interval:
            raise CrossFieldError(
                f"max_poll_interval ({self.max_poll_interval:g}s) is shorter than "
                f"poll_interval ({self.poll_interval:g}s)",
                ("max_poll_interval", "poll_interval"),
            )
        return self

    @model_validator(mode="after")
    def _elastic_consistent(self) -> Profile:
        if self.min_workers > self.max_workers:
            raise CrossFieldError(
                f"min_workers ({self.min_workers}) is more than max_workers ({self.max_workers})",
                ("min_workers", "max_workers"),
            )
        return self

    @model_validator(mode="after")
    def _pools_consistent(self) -> Profile:
        # Each pool over this profile must be a consistent profile too.
        for name, pool in self.pools.items():
            try:
                pool.over(self)
            except CrossFieldError as exc:
                raise CrossFieldError(f"pool {name}: {exc}", ("pools",)) from None
        return self

    def workers_on_each_node(self) -> int:
        """How many Dask workers run on each node (``per-gpu`` resolved)."""
        if self.workers_per_node == "per-gpu":
            return self.gpus_per_node
        return self.workers_per_node

    def threads_of_each_worker(self) -> int | None:
        """Threads per worker: as set, else the node's cores shared out (at least 1).

        ``None`` when neither ``threads_per_worker`` nor ``cpus_per_node`` is known; the
        worker then decides from what it finds on its node.
        """
        if self.threads_per_worker is not None:
            return self.threads_per_worker
        if self.cpus_per_node is None:
            return None
        return max(1, self.cpus_per_node // self.workers_on_each_node())

    def module_lines(self) -> list[str]:
        """``module load NAME`` for each of ``modules``, every name shell-quoted."""
        return [f"module load {shlex.quote(module)}" for module in self.modules]

    def for_pool(self, name: str | None) -> Profile:
        """This profile as pool ``name`` shapes it; itself for ``None``."""
        return self if name is None else self.pools[name].over(self)

    def python_executable(self) -> str:
        """The interpreter the compute nodes run: as set, else the submitting one."""
        return self.python or sys.executable


FieldKind = Literal["memory", "duration", "list", "dict", "scalar"]


def field_kind(name: str) -> FieldKind:
    """What sort of value field ``name`` of :class:`Profile` holds.

    Used to read values written as text (environment variables, ``--set``) and to show
    values readably; it is derived from the annotations, so it cannot drift from them.
    """
    return _kind_of(Profile.model_fields[name].annotation, Profile.model_fields[name].metadata)


def _kind_of(annotation: Any, metadata: list[Any]) -> FieldKind:
    for item in metadata:
        if isinstance(item, BeforeValidator):
            if item.func is parse_memory:
                return "memory"
            if item.func is parse_duration:
                return "duration"
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        inner, *extra = typing.get_args(annotation)
        return _kind_of(inner, [*metadata, *extra])
    if origin is list:
        return "list"
    if origin is dict:
        return "dict"
    if origin is Union or origin is types.UnionType:
        for arg in typing.get_args(annotation):
            if arg is not type(None):
                kind = _kind_of(arg, metadata)
                if kind != "scalar":
                    return kind
    return "scalar"
