"""What a report shows, read from a run directory (state DB, plan, run info, logs)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcflow.store import statedb as st
from hpcflow.store.paths import RunPaths
from hpcflow.store.tasklogs import LogIndex, attempt_log_tail, locate_attempt_log

#: Failures whose log tail the report includes (the table lists them all).
MAX_FAILURE_EXCERPTS = 50
EXCERPT_LINES = 30


@dataclass(frozen=True)
class TaskDefinition:
    """One task of the workflow (a sweep makes many instances) with its totals."""

    name: str
    instances: int
    states: dict[str, int]
    cpus: int
    gpus: int
    memory: int | None  # bytes requested per instance
    peak_rss: int | None  # largest measured
    busy_seconds: float  # summed over attempts

    @property
    def core_hours(self) -> float:
        return self.busy_seconds * self.cpus / 3600

    @property
    def gpu_hours(self) -> float:
        return self.busy_seconds * self.gpus / 3600


@dataclass(frozen=True)
class ValueTotals:
    """The values one task (all its instances) made and received (``from:``)."""

    name: str
    types: str  # the type names of its return values, "?" where a child process made it
    made: int  # bytes of its return values
    received: int  # bytes of the values it received
    moved: int  # of those, bytes another worker sent over the run's transport


@dataclass(frozen=True)
class Failure:
    task_id: str
    attempts: int
    exit_code: int | None
    message: str | None
    #: Where its stderr is: its ``.err`` file, or with per-worker logs the ``hpcflow
    #: logs`` command that prints it and the worker's file holding it.
    stderr_place: str
    excerpt: str


@dataclass
class ReportData:
    run_id: str
    workflow: str
    status: str
    started: float | None
    ended: float | None
    tasks: list[st.TaskRow]
    attempts: list[st.AttemptRecord]
    allocations: list[st.AllocationRow]
    definitions: list[TaskDefinition]
    edges: set[tuple[str, str]]
    failures: list[Failure] = field(default_factory=list)
    values: list[ValueTotals] = field(default_factory=list)
    #: The pool of each task definition (by name) in a pilot run with several pools.
    pools: dict[str, str] = field(default_factory=dict)

    @property
    def moved(self) -> int:
        """Bytes of values moved between workers in the whole run."""
        return sum(v.moved for v in self.values)

    @property
    def core_hours(self) -> float:
        return sum(d.core_hours for d in self.definitions)

    @property
    def gpu_hours(self) -> float:
        return sum(d.gpu_hours for d in self.definitions)


def collect(paths: RunPaths) -> ReportData:
    """Read everything the report needs; the run may still be going."""
    with st.StateDB(paths.state_db, readonly=True) as db:
        meta = db.meta()
        tasks = db.tasks()
        attempts = db.all_attempts()
        allocations = db.allocations()
        order = db.names_in_order()
        value_rows = db.value_rows()
    plan = _read_json(paths.plan)
    info = _read_json(paths.run_info)
    requested = {t["name"]: t.get("resources", {}) for t in plan.get("tasks", [])}
    names = [t["name"] for t in plan.get("tasks", [])]
    task_pools = _read_json(paths.pilot_config).get("task_pools") or {}
    pools = {
        names[int(index)]: str(pool)
        for index, pool in task_pools.items()
        if str(index).isdigit() and int(index) < len(names)
    }
    by_idx = {t.idx: t for t in tasks}
    edges = {
        (by_idx[d].name, t.name)
        for t in tasks
        for d in t.deps
        if d in by_idx and by_idx[d].name != t.name
    }
    states: dict[str, Counter[str]] = {name: Counter() for name in order}
    peaks: dict[str, int] = {}
    for t in tasks:
        states.setdefault(t.name, Counter())[t.state] += 1
    busy: dict[str, float] = {}
    for a in attempts:
        name = by_idx[a.task_idx].name if a.task_idx in by_idx else None
        if name is None:
            continue
        if a.started is not None and a.ended is not None:
            busy[name] = busy.get(name, 0.0) + max(0.0, a.ended - a.started)
        if a.peak_rss:
            peaks[name] = max(peaks.get(name, 0), a.peak_rss)
    definitions = [
        TaskDefinition(
            name=name,
            instances=sum(states[name].values()),
            states=dict(states[name]),
            cpus=int(requested.get(name, {}).get("cpus") or 1),
            gpus=int(requested.get(name, {}).get("gpus") or 0),
            memory=requested.get(name, {}).get("memory"),
            peak_rss=peaks.get(name),
            busy_seconds=busy.get(name, 0.0),
        )
        for name in states
    ]
    failures = []
    run_id = str(meta.get("run_id", paths.run_dir.name))
    index = LogIndex(paths.logs_dir) if paths.logs_dir.is_dir() else None  # per-worker
    for t in [t for t in tasks if t.state == st.FAILED][:MAX_FAILURE_EXCERPTS]:
        stderr = paths.stderr(t.slug, max(1, t.attempts))
        where = locate_attempt_log(paths, run_id, t.id, stderr, index).describe()
        failures.append(
            Failure(
                task_id=t.id,
                attempts=t.attempts,
                exit_code=t.exit_code,
                message=t.message,
                stderr_place=where,
                excerpt=_tail(stderr, index=index),
            )
        )
    return ReportData(
        run_id=run_id,
        workflow=str(
            info.get("workflow_name") or meta.get("workflow_name") or meta.get("workflow") or "?"
        ),
        status=str(meta.get("status", "unknown")),
        started=meta.get("started"),
        ended=meta.get("ended"),
        tasks=tasks,
        attempts=attempts,
        allocations=allocations,
        definitions=definitions,
        edges=edges,
        failures=failures,
        values=_value_totals(value_rows, by_idx, order),
        pools=pools,
    )


def _value_totals(
    rows: list[st.ValueRow], by_idx: dict[int, st.TaskRow], order: list[str]
) -> list[ValueTotals]:
    """Per task name, the values of each instance's latest attempt that recorded any."""
    latest: dict[int, st.ValueRow] = {}
    for row in rows:
        if row.task_idx in by_idx and row.attempt >= latest.get(row.task_idx, row).attempt:
            latest[row.task_idx] = row
    grouped: dict[str, list[st.ValueRow]] = {}
    for idx, row in latest.items():
        grouped.setdefault(by_idx[idx].name, []).append(row)
    rank = {name: i for i, name in enumerate(order)}
    return [
        ValueTotals(
            name=name,
            types=", ".join(sorted({r.type or "?" for r in group})),
            made=sum(r.nbytes or 0 for r in group),
            received=sum(r.received for r in group),
            moved=sum(r.moved for r in group),
        )
        for name, group in sorted(grouped.items(), key=lambda kv: rank.get(kv[0], len(rank)))
    ]


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _tail(path: Path, lines: int = EXCERPT_LINES, index: LogIndex | None = None) -> str:
    found = attempt_log_tail(path, lines, index=index)
    return "(no stderr was written)" if found is None else "\n".join(found)
