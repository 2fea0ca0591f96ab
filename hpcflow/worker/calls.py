"""What travels between driver and worker: a :class:`TaskCall` out, an :class:`Outcome` back.

Both are small, flat and picklable; a chunk of calls is one Dask task.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hpcflow.store.states import TaskState

if TYPE_CHECKING:  # the state database is the driver's; workers never load it
    from hpcflow.store.statedb import AttemptRecord


#: What a python call receives (``from:``), as files: argument name → (shape, [(key,
#: value file)]); shape is "value", "list" or "dict" (:mod:`hpcflow.worker.values`).
ValuesIn = dict[str, tuple[str, list[tuple[Any, str]]]]


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
    #: The driver expects this attempt to take a small fraction of a second: it may run
    #: in a shared shell even alone in its chunk (and its peak memory goes unmeasured).
    tiny: bool = False
    #: The task's id and the fingerprint of what it does, for the journal of successes.
    task_id: str = ""
    fingerprint: str = ""
    #: Where the run's journal files start (``…/journal/<workflow>/<run>``); "" keeps none.
    journal: str = ""
    #: Python calls: the upstream values the call receives (``from:``, as files), whether
    #: a task receives its own return value, and the file that value goes to ("" for none).
    values_in: ValuesIn | None = None
    received: bool = False
    value_out: str = ""
    #: The run folder's value key file, that value files are signed and checked with
    #: ("": the user's own; :func:`hpcflow.store.values.worker_key`).
    value_key: str = ""
    #: Python calls in a software environment (container, modules, venv): the argv that
    #: starts the call's process there, and the interpreter it runs (shell and argv
    #: tasks carry the same argv at the front of their own).
    wrap: list[str] | None = None
    python_exe: str = ""
    #: GPUs the attempt needs (a share of one below 1): the worker names the devices it
    #: gets in CUDA_VISIBLE_DEVICES (:mod:`hpcflow.worker.gpus`).
    gpus: float = 0
    #: ``checkpoint:``: the signal number it gets before the allocation ends (0: none),
    #: and how many seconds before (the driver sends it).
    checkpoint_signal: int = 0
    checkpoint_before: float = 0.0
    #: ``task_logs: per-worker``: the run's logs folder, where the worker appends the
    #: attempt's stdout/stderr as records (:mod:`hpcflow.worker.worker_logs`); "" writes
    #: them to :attr:`stdout` and :attr:`stderr`.
    logs: str = ""
    #: ``scratch: true``: the folder below which the attempt gets a fresh folder on the
    #: node to run in ($VARS expanded there; "" for the node's temporary folder); None
    #: runs it in :attr:`workdir` (:mod:`hpcflow.worker.scratch`).
    scratch: str | None = None
    #: Where its outputs may lie for hpcflow to remove a stale one or quarantine a failed
    #: one (:mod:`hpcflow.worker.confine`); () checks nothing.
    confine: tuple[str, ...] = ()


@dataclass(slots=True, kw_only=True)
class ValueStats:
    """What the values of one python attempt weighed (``from:``): the value it returned
    (its type and size, when known) and the values it received, with how many of those
    bytes came from another worker (Dask moved them; 0 for values read from files)."""

    type: str | None
    nbytes: int | None
    received: int = 0
    moved: int = 0


@dataclass(slots=True, kw_only=True)
class Outcome:
    """What happened to one attempt."""

    index: int
    attempt: int
    state: TaskState  # succeeded | failed | cancelled | interrupted
    exit_code: int | None
    started: float
    ended: float
    peak_rss: int | None = None
    host: str | None = None
    message: str | None = None
    inputs_sig: dict[str, list[int]] = field(default_factory=dict)
    outputs_sig: dict[str, list[int]] = field(default_factory=dict)
    values: ValueStats | None = None

    @classmethod
    def failed(
        cls, call: TaskCall, ended: float, message: str, *, started: float | None = None
    ) -> Outcome:
        """The outcome of ``call`` failed at ``ended`` without an exit code (it could not
        start, or what ran it was lost), started at ``started`` (else at ``ended``)."""
        return cls(
            index=call.index,
            attempt=call.attempt,
            state=TaskState.FAILED,
            exit_code=None,
            started=ended if started is None else started,
            ended=ended,
            message=message,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outcome:
        """The outcome ``dataclasses.asdict`` made ``data`` of (a job's outcome file)."""
        values = data.get("values")
        return cls(
            **{
                **data,
                "state": TaskState(data["state"]),
                "values": None if values is None else ValueStats(**values),
            }
        )

    def record(self, task_idx: int | None = None) -> AttemptRecord:
        """This outcome as the state database stores it."""
        from hpcflow.store.statedb import AttemptRecord, ValueRow

        idx = self.index if task_idx is None else task_idx
        v = self.values
        return AttemptRecord(
            task_idx=idx,
            attempt=self.attempt,
            state=self.state,
            exit_code=self.exit_code,
            started=self.started,
            ended=self.ended,
            peak_rss=self.peak_rss,
            host=self.host,
            message=self.message,
            values=None
            if v is None
            else ValueRow(
                task_idx=idx,
                attempt=self.attempt,
                type=v.type,
                nbytes=v.nbytes,
                received=v.received,
                moved=v.moved,
            ),
        )
