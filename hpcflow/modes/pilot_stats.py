"""Numbers about a pilot run, from its run directory: for benchmarks and reports."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PilotTimings:
    """Submit time of the first allocation, start/end of the first and last attempts, and
    the CPU seconds of the driver and the scheduler (None where the run did not record
    them: see :mod:`hpcflow.bootstrap.overhead`)."""

    submitted: float
    first_task_started: float | None
    last_task_ended: float | None
    driver_cpu_s: float | None = None
    scheduler_cpu_s: float | None = None

    @property
    def submit_to_first_task(self) -> float | None:
        if self.first_task_started is None:
            return None
        return self.first_task_started - self.submitted


def pilot_timings(state_db: Path) -> PilotTimings:
    """Read from the run's files (read-only: the allocations are the submitting side's)."""
    from hpcflow.store.statedb import StateDB

    with StateDB(state_db, readonly=True) as db:
        submitted = min(a.submitted for a in db.allocations())
        attempts = db.all_attempts()
        overhead = db.meta().get("overhead") or {}
    starts = [a.started for a in attempts if a.started is not None]
    ends = [a.ended for a in attempts if a.ended is not None]
    return PilotTimings(
        float(submitted),
        min(starts) if starts else None,
        max(ends) if ends else None,
        overhead.get("driver_cpu_s"),
        overhead.get("scheduler_cpu_s"),
    )
