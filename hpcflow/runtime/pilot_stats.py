"""Numbers about a pilot run, from its run directory: for benchmarks and reports."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PilotTimings:
    """Submit time of the first allocation and start/end of the first and last attempts."""

    submitted: float
    first_task_started: float | None
    last_task_ended: float | None

    @property
    def submit_to_first_task(self) -> float | None:
        if self.first_task_started is None:
            return None
        return self.first_task_started - self.submitted


def pilot_timings(state_db: Path) -> PilotTimings:
    conn = sqlite3.connect(f"file:{state_db}?mode=ro", uri=True)
    try:
        (submitted,) = conn.execute("SELECT MIN(submitted) FROM allocations").fetchone()
        first, last = conn.execute("SELECT MIN(started), MAX(ended) FROM attempts").fetchone()
    finally:
        conn.close()
    return PilotTimings(float(submitted), first, last)
