"""The mappings of a workflow file, as typed dictionaries for type checkers.

``wf.task(resources={"cpus": 4, "memory": "8GB"})`` is checked by mypy against
:class:`Resources`; at run time the same mapping is validated by the workflow file's
models (:mod:`hpcflow.spec.models`), whose fields these keys mirror (a unit test keeps
them in step). Durations are seconds, text such as ``"1h30m"``, or a ``timedelta``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal, TypedDict

#: Seconds, ``"90s"``, ``"10m"``, ``"1h30m"``, ``"2:00:00"``, or a timedelta.
Duration = float | str | timedelta
#: ``"512MB"``, ``"4GB"``; a bare number is megabytes.
Memory = int | str


class Resources(TypedDict, total=False):
    """What one attempt of a task needs (``resources:``)."""

    cpus: int
    memory: Memory
    gpus: float
    walltime: Duration
    ranks: int
    nodes: int
    pool: str
    gpu_kind: str


class Retries(TypedDict, total=False):
    """How often a failed task is tried again (``retries:``; or a plain number)."""

    attempts: int
    backoff: Duration
    factor: float
    max_backoff: Duration


class _CheckpointBefore(TypedDict):
    before: Duration


class Checkpoint(_CheckpointBefore, total=False):
    """The signal a task gets before its allocation's walltime (``checkpoint:``)."""

    signal: str


class _ContainerImage(TypedDict):
    image: str


class Container(_ContainerImage, total=False):
    """The container image a task runs in (``container:``; or the image alone)."""

    runtime: Literal["apptainer", "singularity", "charliecloud", "podman"]
    binds: list[str]
    options: list[str]
    python: str


class Modules(TypedDict, total=False):
    """Environment modules loaded before a task (``modules:``; or a list of names)."""

    load: list[str]
    purge: bool


#: ``as:`` of a value a python task receives.
ValueShape = Literal["auto", "value", "list", "dict"]


class Defaults(TypedDict, total=False):
    """Values every task inherits unless it sets its own (``defaults:``)."""

    container: str | Container
    modules: list[str] | Modules
    venv: str
    conda: str
    resources: Resources
    retries: int | Retries
    timeout: Duration
    checkpoint: Checkpoint
    env: dict[str, str]
    workdir: str
