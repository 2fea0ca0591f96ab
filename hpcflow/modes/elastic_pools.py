"""Elastic mode with several pools: one scheduler, worker jobs of each pool's shape.

The run's dask-jobqueue cluster runs the one scheduler in this process. Each pool adds
worker jobs of its own shape to it (its partition, cores, GPUs, walltime...: the pool's
:class:`hpcflow.modes.elastic_plan.ElasticPlan`), named ``POOL.N`` (a pool name has no
dot), and scales them on its own: a :class:`PoolAdaptive` per pool, whose target is that
pool's backlog of tasks and whose idle workers it retires, between the pool's
``min_workers`` and ``max_workers``. Its workers offer the pool's Dask resource, which the
pool's tasks ask for, so a GPU pool's jobs are queued only when GPU tasks wait, and are
retired when none is left while the CPU pool goes on.

Imports distributed: import it where a cluster is started, not at module import.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from hpcflow.modes.elastic_adapt import BacklogAdaptive
from hpcflow.modes.elastic_plan import ElasticPlan

#: Arguments of a jobqueue cluster that are the cluster's (its scheduler's), not a job's.
_CLUSTER_ONLY = frozenset({"scheduler_options", "security", "protocol", "interface"})


def pool_job_options(cluster: Any, plan: ElasticPlan) -> dict[str, Any]:
    """The job-class arguments of ``plan``'s worker jobs in ``cluster``: the cluster's own
    (security, interface...) with the pool's shape over them."""
    options = dict(cluster._job_kwargs)
    options.update({k: v for k, v in plan.kwargs.items() if k not in _CLUSTER_ONLY})
    return options


def pool_job_script(cluster: Any, plan: ElasticPlan) -> str:
    """The batch script each of ``plan``'s worker jobs runs (for ``workers/job-POOL.sh``)."""
    options = pool_job_options(cluster, plan)
    job = cluster.job_cls(cluster.scheduler.address, name="dummy-name", **options)
    return str(job.job_script())


class PoolAdaptive(BacklogAdaptive):
    """Scales one pool's worker jobs in a jobqueue cluster that several pools share.

    ``minimum``/``maximum`` are Dask workers, as for ``Adaptive``. Its plan, requested and
    observed workers are the pool's only; its target is the pool's backlog alone (Dask's
    own target counts every pool's tasks); it closes whole jobs whose workers are idle.
    """

    def __init__(
        self,
        cluster: Any,
        *,
        pool: str,
        plan: ElasticPlan,
        backlog: Callable[[], int],
        **kwargs: Any,
    ) -> None:
        self.pool = pool
        self._processes = max(1, plan.workers_per_job)
        self._spec: dict[str, Any] = {
            "cls": cluster.job_cls,
            "options": pool_job_options(cluster, plan),
        }
        if self._processes > 1:
            self._spec["group"] = [f"-{i}" for i in range(self._processes)]
        self._next = 0
        super().__init__(
            cluster, backlog=backlog, slots_per_worker=plan.threads_per_worker, **kwargs
        )

    @property
    def _jq(self) -> Any:
        """The shared jobqueue cluster (``Adaptive`` types it as any Dask cluster)."""
        return self.cluster

    def owns(self, name: object) -> bool:
        """Whether a job or worker name is one of this pool's."""
        return str(name).startswith(f"{self.pool}.")

    def _jobs(self, names: Iterable[Any]) -> list[str]:
        return [str(name) for name in list(names) if self.owns(name)]

    def _workers_of(self, jobs: Iterable[str]) -> set[str]:
        out: set[str] = set()
        for job in jobs:
            spec = self._jq.worker_spec.get(job)
            if spec is not None and "group" in spec:
                out.update(f"{job}{suffix}" for suffix in spec["group"])
            else:
                out.add(job)
        return out

    @property
    def plan(self) -> set[Any]:
        return self._workers_of(self._jobs(self._jq.worker_spec))

    @property
    def requested(self) -> set[Any]:
        launched = self._jobs(self._jq.workers)
        return self._workers_of(job for job in launched if job in self._jq.worker_spec)

    @property
    def observed(self) -> set[Any]:
        return {str(name) for name in self._jq.observed if self.owns(name)}

    async def target(self) -> int:
        return math.ceil(self.backlog() / self.slots_per_worker)

    async def workers_to_close(self, target: int) -> list[str]:
        """Workers of jobs of this pool that run nothing, a whole job at a time, until
        the pool is down to ``target`` workers."""
        excess = len(self.plan) - target
        busy = {
            str(ws.name)
            for ws in list(self._jq.scheduler.workers.values())
            if self.owns(ws.name) and ws.processing
        }
        observed = self.observed
        chosen: list[str] = []
        for job in sorted(self._jobs(self._jq.worker_spec)):
            if len(chosen) >= excess:
                break
            workers = self._workers_of([job])
            if workers <= observed and not workers & busy:
                chosen.extend(sorted(workers))
        return chosen

    async def scale_up(self, n: Any) -> None:  # (distributed types it loosely)
        """Queue this pool's jobs until it has ``n`` workers planned."""
        from distributed.core import Status

        cluster = self._jq
        if cluster.status in (Status.closing, Status.closed):
            return
        jobs = math.ceil(int(n) / self._processes)
        have = len(self._jobs(cluster.worker_spec))
        for _ in range(jobs - have):
            while f"{self.pool}.{self._next}" in cluster.worker_spec:
                self._next += 1
            cluster.worker_spec[f"{self.pool}.{self._next}"] = self._spec
        cluster.loop.add_callback(cluster._correct_state)
