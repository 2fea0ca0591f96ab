"""Fewer background wake-ups in a pilot's Dask scheduler and workers.

An idle Dask scheduler with 32 workers spent about 40 ms of CPU a second on this machine
(a 32-node pilot of 64 one-minute sleeps): worker heartbeats (one a second per worker at
that size), the event loop's tick measurement (50 a second in every process) and the system
monitor (psutil, twice a second in every process). Over a long run of tiny tasks that is
most of the scheduler's cost per task, and on the nodes it is CPU the tasks want. With the
settings below the same idle scheduler spent about 10 ms a second.

None of them feeds anything hpcflow uses: the dashboard's history is coarser, a worker's
death is still seen at once (its connection closes; the heartbeat time-to-live stays
Dask's 300 s), memory limits are enforced by each worker's own monitor, and an event loop
blocked for seconds is still reported.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

#: Dask settings of every process of a pilot (scheduler, workers and their nannies).
PILOT_DASK_CONFIG: dict[str, Any] = {
    "distributed.admin.tick.interval": "500ms",
    "distributed.admin.system-monitor.interval": "5s",
    # The statistical profiler (a sampling thread per worker, every 10 ms) only feeds
    # the dashboard's profile page.
    "distributed.worker.profile.enabled": False,
}

#: The longest interval between two heartbeats of a worker that the scheduler asks for.
HEARTBEAT_SECONDS = 5.0


def quiet_dask() -> None:
    """Apply :data:`PILOT_DASK_CONFIG` to this process (a nanny hands it to its worker)."""
    import dask

    dask.config.set(PILOT_DASK_CONFIG)


def slow_heartbeats(seconds: float = HEARTBEAT_SECONDS) -> None:
    """Make this process's Dask scheduler ask its workers for a heartbeat every
    ``seconds`` at most often (Dask asks for one every 0.5 s up to 10 workers, every
    second up to 50).

    Dask has no setting for it: the scheduler computes the interval with the module's
    ``heartbeat_interval(n)`` each time it answers a heartbeat, so that function is
    replaced. Where a Dask release no longer has it, Dask's own intervals stay.
    """
    import distributed.scheduler as dask_scheduler

    original = getattr(dask_scheduler, "heartbeat_interval", None)
    if not callable(original):
        log.info("this Dask has no heartbeat_interval(): keeping its heartbeats")
        return
    original = getattr(original, "__wrapped__", original)  # slowed already: from Dask's

    def slower(n: int) -> float:
        return max(float(original(n)), seconds)

    slower.__wrapped__ = original  # type: ignore[attr-defined]
    dask_scheduler.heartbeat_interval = slower
