"""Pilot mode with several pools: one allocation per pool, all under one scheduler.

The pool of the first task to run is the *head*: its allocation runs the scheduler and
the driver as in a one-pool run, and its workers. Every other pool gets an allocation of
its own shape (partition, nodes, GPUs...) that runs workers only: they read their pool's
``pilot-POOL.json``, join the head's scheduler through the address it published, and
offer the Dask resource of their pool, which that pool's tasks ask for. When the last
task of another pool has ended, the driver retires that pool's workers, and its
allocation ends while the rest of the run goes on.

On the submit side the head allocation is queued at once, and each other pool's when a
task of that pool is near ready (every task it depends on is running or done), so GPU
nodes are not held while the CPU work before them runs; all are followed by one poller.
A pool's allocation that ends while tasks of its pool are still to run (cancelled,
failed to start, a lost node) ends the run, with its logs named: those tasks could never
run, unless the profile allows continuations (``resubmit: true``) and it stopped early
(its walltime, a lost node): then that pool's allocation is queued again and its workers
join the same scheduler. When the head allocation is continued, the other pools'
allocations are queued again when due, and join the new head's scheduler.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from hpcflow.backends.base import AllocationStatus, Backend
from hpcflow.backends.poller import Poller
from hpcflow.dag.graph import TaskGraph
from hpcflow.engine.capacity import check_capacity
from hpcflow.engine.pools import POOL_VARIABLE, assign_pools
from hpcflow.errors import SchedulerCommandError
from hpcflow.modes.pilot_plan import PilotPlan, plan_pilot, renumbered
from hpcflow.settings.profile import Profile
from hpcflow.store import statedb as st
from hpcflow.store.paths import RunPaths

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PoolAllocations:
    """A run's pools and the allocation each one asks for (the head's first)."""

    head: str
    plans: dict[str, PilotPlan]
    #: The pool of every task definition that runs (by its index).
    of_template: dict[int, str]

    def number(self, pool: str) -> int:
        """The pool's allocation number (its script and logs: allocations/N.*)."""
        return list(self.plans).index(pool) + 1

    def others(self) -> list[str]:
        return [pool for pool in self.plans if pool != self.head]

    def write_configs(self, paths: RunPaths) -> None:
        """What the ranks read: the head allocation's pilot.json, each other pool's own."""
        for pool, plan in self.plans.items():
            plan.config.write(
                paths.pilot_config if pool == self.head else paths.pilot_pool_config(pool)
            )


def pools_needed(
    graph: TaskGraph, profile: Profile, run: list[bool]
) -> tuple[str, dict[int, str]] | None:
    """(the head pool, each task definition's pool) when the tasks to run need more than
    one of the profile's pools; None when they need one (or the profile has none)."""
    chosen = assign_pools(graph, profile, run)
    names = {pool for pool in chosen.values() if pool is not None}
    if len(names) <= 1:
        return None
    of_template = {index: pool for index, pool in chosen.items() if pool is not None}
    # With pools, every task definition that runs has one: the first task's is the head.
    first = next(i for i in graph.order if run[i])
    return of_template[graph.instances[first].spec_index], of_template


def plan_pools(
    profile: Profile,
    paths: RunPaths,
    run_id: str,
    base_dir: Path,
    head: str,
    of_template: dict[int, str],
) -> PoolAllocations:
    """Every pool's allocation: the head's with the scheduler and driver (told each task's
    pool, each pool's slots, and which pools to release), the others' workers only."""
    order = [head] + [pool for pool in profile.pools if pool in set(of_template.values())]
    order = list(dict.fromkeys(order))
    plans: dict[str, PilotPlan] = {}
    for number, pool in enumerate(order, start=1):
        shaped = profile.for_pool(pool)
        plan = plan_pilot(shaped, paths, run_id, base_dir, number, head=pool == head)
        request = plan.request
        if pool != head:
            request = replace(
                request,
                job_name=f"hpcflow-{run_id}-{pool}",
                env={**request.env, POOL_VARIABLE: pool},
            )
        plans[pool] = PilotPlan(request, replace(plan.config, pool=pool))
    slots = {pool: plan.config.slots for pool, plan in plans.items()}
    head_plan = plans[head]
    plans[head] = PilotPlan(
        head_plan.request,
        replace(
            head_plan.config,
            task_pools={str(index): pool for index, pool in of_template.items()},
            pool_slots=slots,
            releasable=[pool for pool in order if pool != head],
        ),
    )
    return PoolAllocations(head, plans, of_template)


def check_pools_capacity(
    graph: TaskGraph, run: list[bool], pools: PoolAllocations, profile: Profile
) -> None:
    """Refuse, before anything is submitted, a task that does not fit its pool's workers."""
    for pool, plan in pools.plans.items():
        mine = [
            run[inst.index] and pools.of_template.get(inst.spec_index) == pool
            for inst in graph.instances
        ]
        check_capacity(
            graph,
            mine,
            plan.config.threads_per_worker,
            plan.config.gpus_per_worker,
            where=f"pool {pool!r} of profile {profile.name!r}",
            mpi_wrapped=profile.launcher != "single",
        )


#: Seconds between two looks at whether another pool's allocation is due.
DUE_CHECK_SECONDS = 1.0
#: Seconds a pool's allocation must have been seen ended, with tasks of its pool still to
#: run, before that ends the run: the driver's record of the pool's last tasks (state.sqlite,
#: committed about once a second, read through another shared-file-system client) may
#: reach this side after the batch system's word that the released allocation ended.
ENDED_EARLY_GRACE = 10.0
#: Seconds the end of a run waits for the batch system to report the pools' allocations
#: that it cancelled as ended (SLURM: within a poll or two), so the record says how they ended.
SETTLE_SECONDS = 20.0


class PoolCompanions:
    """The allocations of a run's other pools: queued when due, followed beside the head
    allocation. ``submit_pool`` queues a pool's allocation and returns its native id."""

    def __init__(
        self,
        pools: PoolAllocations,
        graph: TaskGraph,
        paths: RunPaths,
        submit_pool: Callable[[str], str],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pools = pools
        #: The pools whose allocation was queued, and its native id.
        self.native_ids: dict[str, str] = {}
        self.graph = graph
        self._pool_by_name: dict[str, str] | None = None
        self.paths = paths
        self.submit_pool = submit_pool
        self.clock = clock
        self._seen: dict[str, AllocationStatus] = {}
        self._next_check = 0.0
        self._ended_with_tasks: dict[str, float] = {}  # pool → when first seen so
        #: Earlier allocations of the pools (a continuation's, or one queued again) that
        #: were still live when replaced: followed until the batch system's last word on
        #: them is recorded.
        self._retired: list[str] = []
        #: The highest allocation number taken: the first allocations of the pools take
        #: 1..P (the head's is 1), continuations the numbers after.
        self.last_number = len(pools.plans)
        self._numbered: set[str] = set()  # pools whose first number is taken

    def allocation_for(self, pool: str) -> tuple[PilotPlan, int]:
        """The plan and number of ``pool``'s next allocation: its own number the first
        time, a new one for a continuation."""
        plan = self.pools.plans[pool]
        if pool not in self._numbered:
            self._numbered.add(pool)
            return plan, self.pools.number(pool)
        number = self.new_number()
        return renumbered(plan, self.paths, number), number

    def new_number(self) -> int:
        """A new allocation number (a continuation's)."""
        self.last_number += 1
        return self.last_number

    def restart(self) -> None:
        """The head allocation is continued: every other pool's allocation is queued again
        when a task of it is near ready (the old ones ended with the old scheduler)."""
        self._numbered.add(self.pools.head)
        self._numbered.update(self.native_ids)
        self._retired.extend(self.native_ids.values())
        self.native_ids.clear()
        self._ended_with_tasks.clear()
        self._next_check = 0.0

    def resubmit(self, pool: str) -> str:
        """Queue ``pool``'s allocation again (its last one stopped early with tasks of the
        pool left: they run on the new one's workers, under the same scheduler)."""
        self._ended_with_tasks.pop(pool, None)
        if pool in self.native_ids:
            self._retired.append(self.native_ids[pool])
        self.native_ids[pool] = self.submit_pool(pool)
        return self.native_ids[pool]

    def unsubmitted(self) -> list[str]:
        return [pool for pool in self.pools.others() if pool not in self.native_ids]

    def submit_all(self) -> None:
        """Queue every pool's allocation now (a detached run: nobody follows it)."""
        for pool in self.unsubmitted():
            self.native_ids[pool] = self.submit_pool(pool)

    def submit_due(self, db: st.StateDB, poller: Poller | None = None) -> list[str]:
        """Queue the allocation of every pool a task of which is near ready: not ended,
        with every task it depends on running or done (the driver marks a task running as
        soon as it hands it to Dask, where it may wait for its pool's workers). Returns
        the pools queued now."""
        waiting = self.unsubmitted()
        if not waiting or self.clock() < self._next_check:
            return []
        self._next_check = self.clock() + DUE_CHECK_SECONDS
        rows = db.tasks()
        state = {row.idx: row.state for row in rows}
        under_way = {st.RUNNING, st.SUCCEEDED, st.CACHED}
        due: list[str] = []
        for row in rows:
            if row.state not in (st.PENDING, st.RUNNING):
                continue
            pool = self._pool_of(row)
            if pool in waiting and pool not in due:
                if all(state.get(dep) in under_way for dep in row.deps):
                    due.append(pool)
        for pool in due:
            self.native_ids[pool] = self.submit_pool(pool)
            log.info("pool %s: a task is near ready; allocation %s", pool, self.native_ids[pool])
            if poller is not None:
                poller.track([self.native_ids[pool]])
        return due

    def ids(self) -> list[str]:
        return list(self.native_ids.values())

    def update(self, poller: Poller, submit: st.SubmitDB) -> None:
        """Record what the batch system says of each pool's allocation, the current ones
        and the earlier ones not yet seen final."""
        for native_id in [*self.native_ids.values(), *self._retired]:
            status = poller.latest.get(native_id)
            if status is not None and status != self._seen.get(native_id):
                submit.update_allocation(
                    native_id, status.state.value, status.native_state, status.reason
                )
                self._seen[native_id] = status
        self._retired = [i for i in self._retired if not poller.settled([i])]

    def ended_early(self, poller: Poller, db: st.StateDB) -> tuple[str, str, str] | None:
        """(pool, allocation id, why) of a pool's allocation that ended while tasks of its
        pool are still to run (and still were :data:`ENDED_EARLY_GRACE` seconds later);
        None while every ended one had nothing left."""
        left: dict[str, int] | None = None
        for pool, native_id in self.native_ids.items():
            status = poller.latest.get(native_id)
            if status is None or not poller.settled([native_id]):
                continue
            if left is None:
                left = self._tasks_left(db)
            if not left.get(pool, 0):
                self._ended_with_tasks.pop(pool, None)
                continue
            first = self._ended_with_tasks.setdefault(pool, self.clock())
            if self.clock() - first >= ENDED_EARLY_GRACE:
                state = status.native_state or status.state.value
                why = (
                    f"the allocation of pool {pool} ended ({state}"
                    f"{': ' + status.reason if status.reason else ''}) with "
                    f"{left[pool]} of its task(s) still to run"
                )
                return pool, native_id, why
        return None

    def live(self, poller: Poller) -> list[str]:
        return [i for i in self.native_ids.values() if not poller.settled([i])]

    def cancel_live(self, backend: Backend, poller: Poller) -> None:
        live = self.live(poller)
        if live:
            log.warning("cancelling the allocations of the other pools: %s", ", ".join(live))
            backend.cancel(live)
            poller.hurry()

    def settle(self, poller: Poller, submit: st.SubmitDB, timeout: float = SETTLE_SECONDS) -> None:
        """At the run's end: wait (at most ``timeout`` seconds) for the batch system to
        report every pool allocation final, the cancelled ones included, and record it.
        One still not final then keeps its last recorded state, with a warning."""
        ids = [*self.native_ids.values(), *self._retired]
        try:
            poller.wait_until_final(ids, timeout)
        except (TimeoutError, SchedulerCommandError) as exc:
            log.warning("the other pools' allocations were not all seen ended: %s", exc)
        self.update(poller, submit)

    def logs(self, pool: str) -> list[str]:
        plan = self.pools.plans[pool]
        return [str(plan.request.stdout), str(plan.request.stderr)]

    def _pool_of(self, row: st.TaskRow) -> str | None:
        """A task's pool, by its task's name: the run's driver may have planned tasks
        this side's graph does not have (a fan-out)."""
        if self._pool_by_name is None:
            self._pool_by_name = {
                self.graph.templates[i].spec.name: pool
                for i, pool in self.pools.of_template.items()
            }
        return self._pool_by_name.get(row.name)

    def _tasks_left(self, db: st.StateDB) -> dict[str, int]:
        left: dict[str, int] = {}
        for row in db.tasks(states=(st.PENDING, st.RUNNING)):
            pool = self._pool_of(row)
            if pool is not None:
                left[pool] = left.get(pool, 0) + 1
        return left
