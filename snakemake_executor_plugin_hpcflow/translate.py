"""Snakemake job → hpcflow task: a pure translation, tested without Snakemake.

Snakemake describes what a job needs with ``threads`` and a free-form ``resources``
mapping (``mem_mb``, ``runtime`` in minutes, ``gpu``/``gres``, ``slurm_partition``,
``tasks`` for MPI jobs, …). hpcflow describes it with :class:`hpcflow.spec.models.Resources`
plus the Dask resources a worker slot must offer. :func:`task_for_job` maps the first onto
the second and nothing else: it reads plain data (:class:`JobRequest`), so the adapter that
reads a live Snakemake job (:func:`job_request`, in the executor) stays a few lines.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hpcflow.errors import HpcflowError
from hpcflow.spec.models import Resources
from hpcflow.spec.units import parse_memory
from hpcflow.store.paths import task_slug


class JobTranslationError(HpcflowError):
    """A Snakemake job's resources cannot be expressed as an hpcflow task."""


@dataclass(frozen=True)
class JobRequest:
    """The parts of a Snakemake job that decide where and how it runs (plain data)."""

    #: The rule's name, or the group's id for a group job.
    name: str
    #: Snakemake's job id (an int for single jobs; groups use a uuid-like string).
    jobid: int | str
    #: ``name=value`` pairs of the job's wildcards, in order (empty for group jobs).
    wildcards: tuple[tuple[str, str], ...] = ()
    threads: int = 1
    resources: Mapping[str, Any] = field(default_factory=dict)
    attempt: int = 1
    is_group: bool = False


@dataclass(frozen=True)
class TaskRequest:
    """One Snakemake job as hpcflow sees it: an id, a folder for its logs, what it needs."""

    #: Readable, unique within a Snakemake run: ``rule[key=value,...]`` or ``group:ID``.
    task_id: str
    #: What ``hpcflow status`` counts jobs by: the rule, or ``group:NAME`` for a group job.
    name: str
    #: The folder name under ``RUN_DIR/tasks/`` (file-system safe, see ``task_slug``).
    slug: str
    attempt: int
    resources: Resources
    #: What a Dask worker slot must offer (``cpus``, and ``GPU`` when GPUs are asked for).
    dask_resources: dict[str, float]
    #: Seconds after which the attempt is killed (Snakemake's ``runtime``), or None.
    timeout: float | None = None
    partition: str | None = None
    account: str | None = None
    constraint: str | None = None
    qos: str | None = None


def task_for_job(
    request: JobRequest, *, mpi_as_step: bool = False, group_cpus_cap: int | None = None
) -> TaskRequest:
    """Translate one Snakemake job into an hpcflow task description.

    Parameters
    ----------
    request
        The job's name, wildcards, threads and resources.
    mpi_as_step
        True inside an allocation, where an MPI job's own launcher (``{resources.mpi}``,
        e.g. ``srun``) starts its ranks as a separate step, so the Dask slot holds only the
        job's cpus; False locally, where the ranks run on the slot's own cores.
    group_cpus_cap
        The most cpus a group job may hold. Snakemake sizes a group for all of its jobs
        running at once (50 one-thread jobs: 50 threads); the group's own Snakemake runs
        them with whatever cores it gets, so a group never needs more than one worker.

    Raises
    ------
    JobTranslationError
        A resource has a value hpcflow cannot interpret (the message names it).
    """
    res = request.resources
    where = f"job {request.name!r} (Snakemake job {request.jobid})"
    # ``threads: 0`` is Snakemake's "holds no core": the job's slot holds none either
    # (its own Snakemake runs it with 0 threads); the task record says 1.
    threads = _nonnegative_int(request.threads, "threads", where)
    cpus_per_task = _optional_positive_int(res.get("cpus_per_task"), "cpus_per_task", where)
    slot = max(threads, cpus_per_task or 0)
    cpus = max(1, slot)
    if request.is_group and group_cpus_cap is not None:
        cpus = max(1, min(cpus, group_cpus_cap))
    ranks = _optional_positive_int(res.get("tasks"), "tasks", where) or 1
    nodes = _optional_positive_int(res.get("nodes"), "nodes", where)
    gpus = _gpus(res, where)
    memory = _memory(res, where)
    runtime = _runtime(res, where)
    fields: dict[str, Any] = {"cpus": cpus, "gpus": gpus, "ranks": ranks}
    if runtime is not None:
        fields["walltime"] = runtime
    if nodes is not None and ranks > 1:
        fields["nodes"] = nodes
    resources = Resources.model_validate(fields)
    if memory is not None:
        # Bytes already: validating would read a bare number as megabytes.
        resources = resources.model_copy(update={"memory": memory})
    if slot == 0 and not request.is_group:
        slot_cpus = 0
    else:
        slot_cpus = cpus if (mpi_as_step or ranks == 1) else max(cpus, ranks)
    dask_resources: dict[str, float] = {"cpus": float(slot_cpus)}
    if gpus:
        dask_resources["GPU"] = float(gpus)
    task_id = task_id_of(request)
    return TaskRequest(
        task_id=task_id,
        name=f"group:{request.name}" if request.is_group else request.name,
        slug=task_slug(task_id),
        attempt=_positive_int(request.attempt, "attempt", where),
        resources=resources,
        dask_resources=dask_resources,
        timeout=runtime,
        partition=_optional_text(res.get("slurm_partition")),
        account=_optional_text(res.get("slurm_account")),
        constraint=_optional_text(res.get("constraint")),
        qos=_optional_text(res.get("qos")),
    )


def task_id_of(request: JobRequest) -> str:
    """``rule[key=value,...]`` (hpcflow's sweep notation), ``rule#JOBID`` without
    wildcards, or ``group:ID`` for a group job; unique within one Snakemake run."""
    if request.is_group:
        return f"group:{request.name}:{request.jobid}"
    if not request.wildcards:
        return f"{request.name}#{request.jobid}"
    pairs = ",".join(f"{key}={value}" for key, value in request.wildcards)
    return f"{request.name}[{pairs}]"


# -- the individual resources -------------------------------------------------------------

_GRES_GPU = re.compile(r"^gpu(?::(?P<type>[A-Za-z_][A-Za-z0-9_.-]*))?(?::(?P<count>\d+))?$")


def _gpus(res: Mapping[str, Any], where: str) -> int:
    """GPUs from ``gpu``/``gpus`` (a count) or a ``gres`` string such as ``gpu:a100:2``."""
    count = _optional_nonnegative_int(res.get("gpu", res.get("gpus")), "gpu", where)
    gres = res.get("gres")
    from_gres: int | None = None
    if gres not in (None, ""):
        from_gres = 0
        for item in str(gres).split(","):
            item = item.strip()
            if not item.startswith("gpu"):
                continue  # other generic resources do not change the Dask slot
            match = _GRES_GPU.match(item)
            if match is None:
                raise JobTranslationError(
                    f"{where}: cannot read gres {gres!r}",
                    hint="write it as 'gpu', 'gpu:N' or 'gpu:TYPE:N'",
                )
            from_gres += int(match.group("count") or 1)
    if count is not None and from_gres is not None and count != from_gres:
        raise JobTranslationError(
            f"{where}: gpu={count} and gres={gres!r} disagree",
            hint="give the GPU count in one of the two resources only",
        )
    return count if count is not None else (from_gres or 0)


def _memory(res: Mapping[str, Any], where: str) -> int | None:
    """Bytes from ``mem_mb`` (10^6 bytes, as Snakemake defines it), ``mem_mib`` or ``mem``."""
    if res.get("mem_mb") is not None:
        return _megabytes(res["mem_mb"], 1_000_000, "mem_mb", where)
    if res.get("mem_mib") is not None:
        return _megabytes(res["mem_mib"], 1 << 20, "mem_mib", where)
    if res.get("mem") not in (None, ""):
        try:
            return parse_memory(res["mem"])
        except ValueError as exc:
            raise JobTranslationError(
                f"{where}: mem={res['mem']!r}: {exc}", hint="write it as e.g. '4GB'"
            ) from None
    return None


def _megabytes(value: Any, unit: int, name: str, where: str) -> int:
    number = _number(value, name, where)
    if number < 0:
        raise JobTranslationError(f"{where}: {name} cannot be negative ({value!r})")
    return int(math.ceil(number * unit))


def _runtime(res: Mapping[str, Any], where: str) -> float | None:
    """Seconds from Snakemake's ``runtime`` (minutes once Snakemake has parsed it)."""
    value = res.get("runtime", res.get("walltime"))
    if value in (None, ""):
        return None
    minutes = _number(value, "runtime", where)
    if minutes <= 0:
        raise JobTranslationError(
            f"{where}: runtime must be positive ({value!r})",
            hint="runtime is in minutes, or a string such as '2h'",
        )
    return minutes * 60.0


def _number(value: Any, name: str, where: str) -> float:
    if isinstance(value, bool):
        raise JobTranslationError(f"{where}: {name} must be a number, not {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise JobTranslationError(
            f"{where}: {name} must be a number, not {value!r}",
            hint=f"set resources {name}=<number> in the rule or with --set-resources",
        ) from None
    if not math.isfinite(number):
        raise JobTranslationError(f"{where}: {name} must be finite, not {value!r}")
    return number


def _positive_int(value: Any, name: str, where: str) -> int:
    number = _number(value, name, where)
    if number < 1 or number != int(number):
        raise JobTranslationError(f"{where}: {name} must be a whole number ≥ 1, not {value!r}")
    return int(number)


def _optional_positive_int(value: Any, name: str, where: str) -> int | None:
    if value in (None, ""):
        return None
    return _positive_int(value, name, where)


def _optional_nonnegative_int(value: Any, name: str, where: str) -> int | None:
    if value in (None, ""):
        return None
    return _nonnegative_int(value, name, where)


def _nonnegative_int(value: Any, name: str, where: str) -> int:
    number = _number(value, name, where)
    if number < 0 or number != int(number):
        raise JobTranslationError(f"{where}: {name} must be a whole number ≥ 0, not {value!r}")
    return int(number)


def _optional_text(value: Any) -> str | None:
    if value in (None, ""):
        return None
    return str(value)
