"""Adaptive scaling that also counts the driver's backlog.

Dask's own target (``Scheduler.adaptive_target``) sees only the chunks the driver has
handed it — at most about two per slot, each sized to run for a fraction of a second — so
a sweep of hundreds of short tasks looks like a few seconds of work and never asks for a
second worker. The driver knows the whole backlog: the tasks that are ready or in flight,
in CPU slots. The target is the larger of the two, in workers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from distributed.deploy.adaptive import Adaptive


class BacklogAdaptive(Adaptive):
    """``Adaptive`` whose target is at least ``backlog() / slots_per_worker`` workers.

    ``minimum``/``maximum``/``wait_count`` keep their Dask meaning (the cap and the idle
    checks before a worker is retired are Dask's).
    """

    def __init__(
        self,
        cluster: Any,
        *,
        backlog: Callable[[], int],
        slots_per_worker: int,
        **kwargs: Any,
    ) -> None:
        super().__init__(cluster, **kwargs)
        self.backlog = backlog
        self.slots_per_worker = max(1, slots_per_worker)

    async def target(self) -> int:
        dask_target = int(await super().target())
        return max(dask_target, math.ceil(self.backlog() / self.slots_per_worker))


class Backlog:
    """The driver's backlog once it exists (0 before the driver starts)."""

    def __init__(self) -> None:
        self.driver: Any = None

    def attach(self, driver: Any) -> None:
        self.driver = driver

    def __call__(self) -> int:
        return self.of(None)

    def of(self, pool: str | None) -> int:
        """The backlog of ``pool``'s tasks (all tasks for None)."""
        return int(self.driver.backlog_slots(pool)) if self.driver is not None else 0

    def for_pool(self, pool: str) -> Callable[[], int]:
        """A callable giving ``pool``'s backlog, for that pool's :class:`PoolAdaptive`."""
        return lambda: self.of(pool)
