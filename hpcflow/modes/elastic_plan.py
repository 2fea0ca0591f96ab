"""Elastic mode's plan: one profile → the arguments of a dask-jobqueue cluster.

Pure: nothing is submitted and nothing of dask-jobqueue is imported here, so the mapping
from a profile to worker jobs is tested without a batch system. One worker job is one
node's worth of the profile (``cpus_per_node``, ``memory_per_node``, ``gpus_per_node``,
``workers_per_node`` Dask workers in it); :mod:`hpcflow.modes.elastic` starts the
cluster and lets ``adapt(min_workers, max_workers)`` queue and retire such jobs.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcflow.engine.pools import POOL_CAPACITY, pool_resource
from hpcflow.errors import ProfileError
from hpcflow.settings.profile import Profile
from hpcflow.transport.http_servers import (
    LOOPBACK_ANY_PORT,
    WORKER_CLI_ARGS,
    dashboard_bind,
    worker_environment,
)
from hpcflow.worker import run_over

#: dask-jobqueue writes paths into ``#SBATCH``/``#PBS`` lines and the worker command
#: without quoting them; only such plain paths can go there.
_PLAIN_PATH = re.compile(r"[A-Za-z0-9_./+:@%=,-]+")
#: ``local_directory`` may name node variables (``$TMPDIR``), expanded by the job's shell.
_PLAIN_OR_VARIABLE = re.compile(r"[A-Za-z0-9_./+:@%=,${}-]+")

#: dask-jobqueue class per backend.
CLUSTER_CLASSES = {"slurm": "SLURMCluster", "pbs": "PBSCluster"}

#: Dask's memory thresholds, set in the worker job's environment (the worker CLI has no
#: flags for them).
_MEMORY_ENV = {
    "worker_memory_target": "DASK_DISTRIBUTED__WORKER__MEMORY__TARGET",
    "worker_memory_spill": "DASK_DISTRIBUTED__WORKER__MEMORY__SPILL",
    "worker_memory_pause": "DASK_DISTRIBUTED__WORKER__MEMORY__PAUSE",
}


@dataclass(frozen=True)
class ElasticPlan:
    """How worker jobs look and how many of them may come and go.

    ``kwargs`` go to the dask-jobqueue class ``cluster_class`` as they are; ``security``
    is added by the caller (it holds the run's key paths).
    """

    cluster_class: str
    kwargs: dict[str, Any]
    minimum: int
    maximum: int
    interval: float
    wait_count: int
    workers_per_job: int
    threads_per_worker: int
    gpus_per_worker: int
    memory_per_worker: int | None  # bytes; None: the batch system's default
    job_name: str
    resources: dict[str, float] = field(default_factory=dict)

    @property
    def dashboard(self) -> bool:
        """Whether the scheduler serves Dask's dashboard (the profile asked for it)."""
        return bool(self.kwargs["scheduler_options"].get("dashboard", True))

    @property
    def max_slots(self) -> int:
        """CPU slots when every allowed worker job runs (what the driver sizes work for)."""
        return self.maximum * self.workers_per_job * self.threads_per_worker


def walltime_text(seconds: float) -> str:
    """``H:MM:SS`` as both SLURM and PBS read it (whole seconds, rounded up)."""
    total = int(-(-seconds // 1))
    hours, rest = divmod(total, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def _plain(value: str, what: str, pattern: re.Pattern[str] = _PLAIN_PATH) -> str:
    if not pattern.fullmatch(value):
        raise ProfileError(
            f"elastic mode cannot use {what} {value!r}: dask-jobqueue writes it into the "
            "worker job script unquoted",
            hint="use a path of letters, digits and ./_- only (e.g. --run-dir /scratch/run1)",
        )
    return value


def prologue(profile: Profile, run_id: str, base_dir: Path) -> list[str]:
    """Shell lines run before each worker starts: modules, set-up, environment, folder."""
    lines = profile.module_lines()
    lines += list(profile.setup)  # trusted shell lines, as in pilot mode
    env = {**profile.env, "HPCFLOW_RUN_ID": run_id}
    for name, attr in _MEMORY_ENV.items():
        value = getattr(profile, name, None)
        if value is not None:
            env[attr] = "False" if value is False else str(value)
    # The worker's HTTP server (the CLI has no flag for its routes): /health only.
    env.update(worker_environment())
    lines += [f"export {name}={shlex.quote(value)}" for name, value in env.items()]
    # Tasks run relative to the workflow's folder, as on every other backend.
    lines.append(f"cd {shlex.quote(str(base_dir))}")
    return lines


def plan_elastic(
    profile: Profile,
    run_dir: Path,
    run_id: str,
    base_dir: Path,
    *,
    log_directory: Path | None = None,
    pool: str | None = None,
) -> ElasticPlan:
    """Turn ``profile`` into dask-jobqueue arguments for worker jobs of run ``run_id``;
    with ``pool`` (``profile`` already shaped by it), that pool's worker jobs: named for
    it, and offering its Dask resource, which its tasks ask for.

    Raises :class:`ProfileError` for a backend without elastic support, or paths that
    dask-jobqueue cannot write safely into a job script.
    """
    if profile.backend not in CLUSTER_CLASSES:
        raise ProfileError(
            f"elastic mode needs a batch backend (slurm or pbs), not {profile.backend!r}",
            hint="use --profile slurm or --profile pbs, or drop --mode elastic",
        )
    _plain(str(run_dir), "the run directory")
    shape = _JobShape.of(profile)
    job_name = f"hpcflow-{run_id}-w" + (f"-{pool}" if pool else "")
    resources = _worker_resources(profile, shape, pool)
    kwargs: dict[str, Any] = {
        "cores": shape.cores,
        "processes": shape.per_job,
        "memory": f"{shape.memory_bytes}B" if shape.memory_bytes is not None else "1GiB",
        "job_name": job_name,
        "python": shlex.quote(profile.python_executable()),
        "protocol": "tls://" if profile.transport == "tls" else "tcp://",
        "worker_extra_args": _worker_extra_args(profile, resources, shape.memory_bytes),
        "job_script_prologue": prologue(profile, run_id, base_dir),
        "queue": profile.partition,
        "account": profile.account,
        "walltime": walltime_text(profile.walltime) if profile.walltime else None,
        "death_timeout": 120,
        "scheduler_options": _scheduler_options(profile),
    }
    if log_directory is not None:
        kwargs["log_directory"] = _plain(str(log_directory), "the worker log folder")
    if profile.interface:
        kwargs["interface"] = profile.interface
    if profile.local_directory:
        kwargs["local_directory"] = _plain(
            profile.local_directory, "local_directory", _PLAIN_OR_VARIABLE
        )
    kwargs.update(_batch_system_kwargs(profile, shape))
    skip = _skipped_directives(profile, shape.memory_bytes)
    if skip:
        kwargs["job_directives_skip"] = skip
    return ElasticPlan(
        cluster_class=CLUSTER_CLASSES[profile.backend],
        kwargs=kwargs,
        minimum=profile.min_workers,
        maximum=profile.max_workers,
        interval=profile.adapt_interval,
        wait_count=profile.adapt_wait_count,
        workers_per_job=shape.per_job,
        threads_per_worker=shape.threads,
        gpus_per_worker=shape.gpus_per_worker,
        memory_per_worker=shape.memory_bytes // shape.per_job if shape.memory_bytes else None,
        job_name=job_name,
        resources=resources,
    )


@dataclass(frozen=True)
class _JobShape:
    """What one worker job holds: its Dask workers, their threads, GPUs, memory, CPUs."""

    per_job: int
    threads: int
    gpus: int
    memory_bytes: int | None  # None: the batch system's default
    cpus_per_job: int | None

    @classmethod
    def of(cls, profile: Profile) -> _JobShape:
        """One node's worth of ``profile``, or one GPU's with ``workers_per_node:
        per-gpu``."""
        threads = profile.threads_of_each_worker() or 1
        if profile.workers_per_node == "per-gpu":
            # One worker job per GPU: the batch system then gives each worker its own
            # device (CUDA_VISIBLE_DEVICES), and the cluster grows and shrinks a GPU at a
            # time.
            memory = profile.memory_per_node
            return cls(
                per_job=1,
                threads=threads,
                gpus=1,
                memory_bytes=memory // profile.gpus_per_node if memory else None,
                cpus_per_job=threads,
            )
        return cls(
            per_job=profile.workers_on_each_node(),
            threads=threads,
            gpus=profile.gpus_per_node,
            memory_bytes=profile.memory_per_node,
            cpus_per_job=profile.cpus_per_node,
        )

    @property
    def gpus_per_worker(self) -> int:
        """The GPUs each Dask worker of the job offers its tasks."""
        return self.gpus // self.per_job if self.gpus else 0

    @property
    def cores(self) -> int:
        """The threads of all the job's workers (dask-jobqueue's ``cores``)."""
        return self.threads * self.per_job


def _worker_resources(profile: Profile, shape: _JobShape, pool: str | None) -> dict[str, float]:
    """The Dask resources each worker offers: its threads, GPUs, the profile's
    ``worker_resources`` and, for a pool's workers, the pool's own resource."""
    resources: dict[str, float] = {"cpus": float(shape.threads)}
    if shape.gpus_per_worker:
        resources["GPU"] = float(shape.gpus_per_worker)
    for name, amount in profile.worker_resources.items():
        resources.setdefault(name, float(amount))
    for name in resources:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ProfileError(
                f"worker resource name {name!r} cannot be passed to an elastic worker",
                hint="use letters, digits and '_' in worker_resources names",
            )
    if pool is not None:
        # A pool name is letters, digits, '_' and '-': one token too.
        resources[pool_resource(pool)] = POOL_CAPACITY
    return resources


def _worker_extra_args(
    profile: Profile, resources: dict[str, float], memory_bytes: int | None
) -> list[str]:
    """The ``dask worker`` flags dask-jobqueue adds to its own: resources, the HTTP
    server's place, the run-over preload, the memory limit and the lifetime."""
    # The worker CLI splits --resources on commas: one token, nothing to quote.
    resource_arg = ",".join(f"{k}={v:g}" for k, v in resources.items())
    # No worker dashboard, and Dask's HTTP server on loopback (it would bind 0.0.0.0).
    # The preload kills the worker's tasks as it closes (its driver, the scheduler, died).
    extra_args = ["--resources", resource_arg, *WORKER_CLI_ARGS, "--preload", run_over.__name__]
    limit = profile.worker_memory_limit
    if limit is not None or memory_bytes is None:
        # The worker CLI keeps the last --memory-limit given: this one wins.
        extra_args += ["--memory-limit", limit or "auto"]
    lifetime = profile.worker_lifetime
    if lifetime:
        stagger = profile.worker_lifetime_stagger
        extra_args += ["--lifetime", f"{lifetime:g}s", "--lifetime-stagger", f"{stagger:g}s"]
    return extra_args


def _skipped_directives(profile: Profile, memory_bytes: int | None) -> list[str]:
    """The directives dask-jobqueue always writes that the profile leaves to the batch
    system's defaults: the memory (it insists on a figure, sent as 1 GiB, and the worker
    measures) and the walltime (it would ask for 30 min)."""
    skip: list[str] = []
    if memory_bytes is None and profile.backend == "slurm":
        # (PBS: the resource_spec simply has no mem=.)
        skip.append("#SBATCH --mem=")
    if profile.walltime is None:
        skip.append("#SBATCH -t " if profile.backend == "slurm" else "#PBS -l walltime=")
    return skip


def _batch_system_kwargs(profile: Profile, shape: _JobShape) -> dict[str, Any]:
    """The backend's own arguments: SLURM's ``job_cpu`` and ``--qos``/``--constraint``/
    ``--gres`` directives, or PBS's ``resource_spec``; the profile's extra directives."""
    cpus = shape.cpus_per_job or shape.cores
    directives = list(profile.extra_directives)
    kwargs: dict[str, Any] = {}
    if profile.backend == "slurm":
        kwargs["job_cpu"] = cpus
        if profile.qos:
            directives.append(f"--qos={profile.qos}")
        if profile.constraint:
            directives.append(f"--constraint={profile.constraint}")
        if shape.gpus:
            kind = f"{profile.gpu_kind}:" if profile.gpu_kind else ""
            directives.append(f"--gres=gpu:{kind}{shape.gpus}")
    else:
        kwargs["resource_spec"] = _pbs_resources(
            profile.pbs_flavor, cpus, shape.gpus, shape.memory_bytes
        )
    kwargs["job_extra_directives"] = directives
    return kwargs


def _scheduler_options(profile: Profile) -> dict[str, Any]:
    """The scheduler runs in this process. Its dashboard is plain, unauthenticated HTTP:
    off unless the profile sets ``dashboard_address`` (dask-jobqueue would open :8787),
    and then on that ONE address (its host: the interface's or this node's by default)."""
    options: dict[str, Any]
    if profile.dashboard_address:
        address = dashboard_bind(profile.dashboard_address, interface=profile.interface)
        options = {"dashboard_address": address}
    else:
        # Its HTTP server still starts: /health only (http_settings), on loopback.
        options = {"dashboard": False, "dashboard_address": LOOPBACK_ANY_PORT}
    if profile.interface:
        options["interface"] = profile.interface
    return options


def _pbs_resources(flavor: str, cpus: int, gpus: int, memory: int | None) -> str:
    """One chunk of a node for PBS Pro (``select=``) or Torque (``nodes=1:ppn=``)."""
    mem = f"{-(-memory // 2**20)}mb" if memory else None
    if flavor == "torque":
        spec = f"nodes=1:ppn={cpus}" + (f":gpus={gpus}" if gpus else "")
        return spec + (f",mem={mem}" if mem else "")
    spec = f"select=1:ncpus={cpus}" + (f":ngpus={gpus}" if gpus else "")
    return spec + (f":mem={mem}" if mem else "")
