"""What a pilot's own central processes cost: the CPU seconds of the driver and of the
Dask scheduler, recorded in the run's meta data (``overhead``) when the driver ends.

The tasks' own CPU is theirs; this is hpcflow's cost of running them, the figure that
decides how many tiny tasks a second one allocation can take as nodes are added
(bench/pilot.py reports it per task).
"""

from __future__ import annotations

import logging
import resource
from typing import Any

log = logging.getLogger(__name__)


def cpu_seconds() -> float:
    """User plus system CPU seconds of this process so far (all its threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def record_overhead(client: Any, db: Any) -> dict[str, float]:
    """Write ``overhead = {driver_cpu_s, scheduler_cpu_s}`` into the run's meta data (the
    scheduler's is left out where it cannot be asked); best effort: a report, not a
    reason to fail the run."""
    overhead = {"driver_cpu_s": round(cpu_seconds(), 3)}
    try:
        overhead["scheduler_cpu_s"] = round(float(client.run_on_scheduler(cpu_seconds)), 3)
    except Exception as exc:  # noqa: BLE001 - the scheduler may be gone already
        log.warning("could not ask the scheduler for its CPU time: %s", exc)
    try:
        db.set_meta(overhead=overhead)
    except Exception as exc:  # noqa: BLE001 - sqlite3 errors
        log.warning("could not record the driver's and scheduler's CPU time: %s", exc)
    return overhead
