"""What every batch backend speaks: an allocation request in, a native id and states out.

A backend is argv builders, output parsers and one template; the rules of submitting,
polling and cancelling are written once (:class:`hpcflow.backends.batch.BatchBackend`),
and so is the loop that drives them (modes/pilot.py with backends/poller.py).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from hpcflow.errors import ProfileError


class AllocationState(str, enum.Enum):
    """Our vocabulary for an allocation's state, whatever the batch system calls it."""

    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"
    UNKNOWN = "unknown"

    @property
    def final(self) -> bool:
        return self in (
            AllocationState.COMPLETED,
            AllocationState.FAILED,
            AllocationState.CANCELLED,
            AllocationState.TIMEOUT,
        )


@dataclass(frozen=True)
class AllocationRequest:
    """One batch job that runs ``command`` on every rank of ``nodes`` × ranks."""

    run_id: str
    job_name: str
    run_dir: Path
    stdout: Path
    stderr: Path
    command: Sequence[
        str
    ]  # argv run by the batch script, e.g. srun ... python -m hpcflow.bootstrap RUN_DIR
    nodes: int = 1
    ntasks: int = 1
    #: Tasks on every node (SLURM --ntasks-per-node, PBS mpiprocs); None: ntasks spread.
    ntasks_per_node: int | None = None
    cpus_per_task: int = 1
    gpus_per_node: int = 0
    gpu_kind: str | None = None  # SLURM's gres type (a100); None: any
    memory_per_node: int | None = None  # bytes
    walltime: float | None = None  # seconds
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    overcommit: bool = False
    extra_directives: Sequence[str] = ()  # raw, validated: no newlines
    setup_lines: Sequence[str] = ()  # trusted shell lines from the profile (module load ...)
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: Path | None = None
    # -- jobs mode: one task's batch job (None/0/() for a pilot allocation) --
    task_name: str | None = None  # set: rendered from the per-task job template
    array_size: int = 0  # > 1: a job array of elements 0..array_size-1
    array_parallelism: int | None = None  # most elements running at once (the % cap)
    depends_on: Sequence[str] = ()  # native ids that must end successfully first (afterok)

    @property
    def is_array(self) -> bool:
        """Whether this request is a job array (more than one element)."""
        return self.array_size > 1

    def check(self) -> None:
        """Refuse counts and sizes no batch system could honour, naming the setting."""
        for setting, value, least in (
            ("nodes", self.nodes, 1),
            ("ntasks", self.ntasks, 1),
            ("cpus_per_task", self.cpus_per_task, 1),
            ("gpus_per_node", self.gpus_per_node, 0),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ProfileError(
                    f"{setting} must be a whole number of at least {least}, not {value!r}",
                    hint=f"fix the {setting} setting",
                )
        if self.ntasks_per_node is not None and (
            not isinstance(self.ntasks_per_node, int)
            or isinstance(self.ntasks_per_node, bool)
            or self.ntasks_per_node < 1
            or self.ntasks_per_node * self.nodes < self.ntasks
        ):
            raise ProfileError(
                f"ntasks_per_node must be a whole number of at least 1 that holds ntasks "
                f"({self.ntasks}) on {self.nodes} node(s), not {self.ntasks_per_node!r}",
                hint="fix the workers_per_node setting",
            )
        if self.memory_per_node is not None and self.memory_per_node <= 0:
            raise ProfileError(
                f"memory_per_node must be positive, not {self.memory_per_node!r}",
                hint="fix the memory_per_node setting",
            )
        if self.array_parallelism is not None and self.array_parallelism < 1:
            raise ProfileError(
                f"array_parallelism must be at least 1, not {self.array_parallelism!r}",
                hint="fix the array_parallelism setting",
            )
        for native_id in self.depends_on:
            if not native_id or any(c.isspace() or c in ":,;'\"\\" for c in native_id):
                raise ValueError(f"not a batch job id: {native_id!r}")
        if self.walltime is not None and not self.walltime > 0:
            raise ProfileError(
                f"walltime must be positive, not {self.walltime!r}",
                hint="fix the walltime setting",
            )


@dataclass(frozen=True)
class AllocationStatus:
    """What the batch system says about one allocation, in our words."""

    native_id: str
    state: AllocationState
    native_state: str
    reason: str | None = None  # a plain sentence (e.g. why it is pending)
    exit_code: int | None = None
    nodes: str | None = None


class Backend(Protocol):
    """A batch system: render, submit, poll many at once, cancel."""

    name: str

    def render(self, request: AllocationRequest) -> str:
        """The exact batch script that :meth:`submit` would send."""
        ...

    def submit(self, script: Path, request: AllocationRequest) -> str:
        """Submit ``script``; return the native id. Raises SubmitError."""
        ...

    def poll(self, native_ids: Sequence[str]) -> dict[str, AllocationStatus]:
        """The status of every id in ONE scheduler query (ids it no longer knows are omitted)."""
        ...

    def cancel(self, native_ids: Sequence[str]) -> None: ...
