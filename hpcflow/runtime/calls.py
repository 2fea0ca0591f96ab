"""What travels between driver and worker: a :class:`TaskCall` out, an :class:`Outcome` back.

Both are small, flat and picklable; a chunk of calls is one Dask task.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class TaskCall:
    """Everything a worker needs to run one attempt of one task."""

    index: int
    attempt: int
    kind: str  # "shell" | "argv" | "python"
    command: str | None
    argv: list[str] | None
    python: str | None
    kwargs: dict[str, object] | None
    workdir: str
    env: dict[str, str] | None
    timeout: float | None
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    stdout: str
    stderr: str
    result: str
    quarantine_dir: str


@dataclass(slots=True)
class Outcome:
    """What happened to one attempt."""

    index: int
    attempt: int
    state: str  # succeeded | failed | cancelled
    exit_code: int | None
    started: float
    ended: float
    peak_rss: int | None = None
    host: str | None = None
    message: str | None = None
    inputs_sig: dict[str, list[int]] = field(default_factory=dict)
    outputs_sig: dict[str, list[int]] = field(default_factory=dict)
