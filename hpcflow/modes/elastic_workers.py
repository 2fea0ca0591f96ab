"""One run's elastic worker jobs: an adaptive dask-jobqueue cluster and a client on it.

``hpcflow run --mode elastic`` (:func:`hpcflow.modes.elastic.run_elastic`) and the
Snakemake plugin's elastic mode both start their workers with one :class:`ElasticWorkers`:
the run's credentials, the cluster (its scheduler in this process) whose worker jobs are
shaped by the profile and counted as they are submitted, ``workers/job.sh``, the
``elastic.jsonl`` watch, ``adapt`` over a backlog, and on close the jobs it leaves behind
cancelled through hpcflow's own backend. They differ only in what the backlog is (the
driver's, or the Snakemake jobs sent and not finished).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hpcflow.backends.base import Backend
from hpcflow.errors import HpcflowError, SubmitError
from hpcflow.modes.elastic_cluster import (
    ClusterFactory,
    close_cluster,
    cluster_job_ids,
    counted_failures_quiet,
    start_cluster,
)
from hpcflow.modes.elastic_plan import ElasticPlan, plan_elastic
from hpcflow.modes.elastic_watch import SubmitFailures, WorkerWatch
from hpcflow.modes.workers import WorkerSource
from hpcflow.settings.profile import Profile
from hpcflow.store.paths import RunPaths
from hpcflow.transport.certificates import create_credentials
from hpcflow.transport.http_servers import http_settings
from hpcflow.transport.security import security_for

log = logging.getLogger(__name__)


class ElasticWorkers(WorkerSource):
    """The worker jobs of the run in ``paths``, from :meth:`start` to :meth:`close`.

    ``backlog`` gives the CPU slots of the work waiting or running: the cluster grows
    towards it (between the profile's ``min_workers`` and ``max_workers``). ``on_fatal``
    is called once, from the watch's thread, when worker jobs cannot be submitted
    (:attr:`failures`); :meth:`failure` says the same when asked.
    """

    def __init__(
        self,
        profile: Profile,
        backend: Backend,
        paths: RunPaths,
        run_id: str,
        base_dir: Path,
        *,
        backlog: Callable[[], int],
        on_fatal: Callable[[], None] | None = None,
        factory: ClusterFactory | None = None,
        pools: Sequence[str] = (),
        pool_backlog: Callable[[str], Callable[[], int]] | None = None,
    ) -> None:
        super().__init__(profile, backend, paths, run_id, base_dir)
        #: With several ``pools``: each one's worker jobs (pure: nothing starts). Each pool
        #: is scaled on its own backlog, ``pool_backlog(pool)``.
        self.pool_plans = {
            pool: plan_elastic(
                profile.for_pool(pool),
                paths.run_dir,
                run_id,
                base_dir,
                log_directory=paths.workers_dir,
                pool=pool,
            )
            for pool in (pools if len(pools) > 1 else ())
        }
        #: The jobqueue arguments and the shape of one worker; with pools, the first
        #: pool's (the cluster and its scheduler are made from it).
        self.plan = next(iter(self.pool_plans.values()), None) or plan_elastic(
            profile, paths.run_dir, run_id, base_dir, log_directory=paths.workers_dir
        )
        self._pool_backlog = pool_backlog
        self._adaptives: list[Any] = []
        self.failures = SubmitFailures(profile.submit_retries + 1)
        #: The connected Dask client once :meth:`start` has returned.
        self.client: Any = None
        self._backlog = backlog
        self._on_fatal = on_fatal
        self._factory = factory or start_cluster
        self._cluster: Any = None
        self._watch: WorkerWatch | None = None
        self._quiet = contextlib.ExitStack()

    def start(self) -> Any:
        """Start the cluster and connect to it; returns the client. No worker need exist
        yet: tasks wait in the scheduler until jobs start. Call :meth:`close` afterwards,
        also when this raises."""
        import dask
        from distributed import Client

        from hpcflow.modes.elastic_adapt import BacklogAdaptive

        plan, paths = self.plan, self.paths
        if self.profile.transport == "tls":
            create_credentials(paths.run_dir, self.run_id)
        security = security_for(paths.run_dir, self.profile.transport)
        paths.workers_dir.mkdir(mode=0o700, exist_ok=True)
        # Failed worker submissions are logged once each, not with Dask's tracebacks.
        self._quiet.enter_context(counted_failures_quiet())
        # The scheduler's HTTP server (it starts even without the dashboard): /health only.
        self._quiet.enter_context(dask.config.set(http_settings(dashboard=plan.dashboard)))
        cluster = self._cluster = self._factory(plan, security, self.failures)
        if not self.pool_plans:
            # What every worker job runs, for `cat` when a worker misbehaves.
            paths.worker_job_script.write_text(cluster.job_script(), encoding="utf-8")
        log.info(
            "run %s: elastic cluster at %s (dashboard %s)",
            self.run_id,
            cluster.scheduler_address,
            cluster.dashboard_link if plan.dashboard else "off",
        )
        self._watch = WorkerWatch(
            cluster,
            paths.elastic_log,
            interval=min(1.0, plan.interval),
            failures=self.failures,
            on_fatal=self._on_fatal,
            pools=list(self.pool_plans),
        )
        self._watch.start()
        if self.pool_plans:
            self._adapt_pools(cluster)
        else:
            _log_shape(self.run_id, None, plan)
            cluster.adapt(
                Adaptive=BacklogAdaptive,
                backlog=self._backlog,
                slots_per_worker=plan.threads_per_worker,
                minimum_jobs=plan.minimum,
                maximum_jobs=plan.maximum,
                interval=f"{plan.interval:g}s",
                wait_count=plan.wait_count,
            )
        self.client = Client(cluster, security=security, set_as_default=False)
        return self.client

    def _adapt_pools(self, cluster: Any) -> None:
        """Each pool's worker jobs, scaled on the pool's own backlog."""
        from hpcflow.modes.elastic_pools import PoolAdaptive, pool_job_script

        for pool, plan in self.pool_plans.items():
            script = pool_job_script(cluster, plan)
            self.paths.pool_worker_job_script(pool).write_text(script, encoding="utf-8")
            _log_shape(self.run_id, pool, plan)
            backlog = self._pool_backlog(pool) if self._pool_backlog else self._backlog
            self._adaptives.append(
                PoolAdaptive(
                    cluster,
                    pool=pool,
                    plan=plan,
                    backlog=backlog,
                    minimum=plan.minimum * plan.workers_per_job,
                    maximum=plan.maximum * plan.workers_per_job,
                    interval=f"{plan.interval:g}s",
                    wait_count=plan.wait_count,
                )
            )

    @property
    def max_slots(self) -> int:
        """CPU slots when every allowed worker job of every pool runs."""
        plans = self.pool_plans.values() or [self.plan]
        return sum(plan.max_slots for plan in plans)

    def meta(self) -> dict[str, object]:
        """What the run's state records of the cluster (for ``hpcflow status``)."""
        cluster = self._cluster
        return {
            "scheduler_address": cluster.scheduler_address if cluster else None,
            "dashboard": cluster.dashboard_link if cluster and self.plan.dashboard else None,
            "worker_job_name": self.plan.job_name,
        }

    @property
    def gave_up(self) -> bool:
        """Whether the watch found that worker jobs cannot be submitted."""
        return self._watch is not None and self._watch.gave_up

    def submission_error(self) -> SubmitError:
        """Why no worker job could be submitted: the batch system's own words."""
        failures = self.failures
        return SubmitError(
            f"elastic worker jobs could not be submitted ({failures.in_a_row} tries): "
            f"{failures.last or 'unknown error'}",
            transient=False,
            hint=f"check the profile's partition, account and sizes; the job script is "
            f"{self.paths.worker_job_script}",
        )

    def failure(self) -> str | None:
        """Why no worker will ever come (its jobs cannot be submitted), or None."""
        if not self.failures.fatal:
            return None
        error = self.submission_error()
        hint = error.hint or ""
        return f"{error.message}. {hint[:1].upper()}{hint[1:]}"

    def where_to_look(self) -> str:
        return f"Worker jobs' logs: {self.paths.workers_dir}. "

    def max_cpus(self) -> int:
        return self.plan.threads_per_worker

    def gpus(self) -> int:
        return self.plan.gpus_per_worker

    def close(self) -> None:
        """Close the client and the cluster (dask-jobqueue cancels its jobs), then cancel
        any job still there; safe to call more than once, and after a failed start."""
        cluster, self._cluster = self._cluster, None
        if cluster is not None:
            job_ids: set[str] = set()
            if self._watch is not None:
                self._watch.disarm()  # no interrupt while the cluster closes
                job_ids = self._watch.job_ids()
            for adaptive in self._adaptives:
                # (On the cluster's loop, where it runs.)
                cluster.loop.add_callback(adaptive.stop, "the run is ending")
            self._adaptives = []
            close_cluster(cluster, self.client)
            if self._watch is not None:
                self._watch.stop()
            cancel_leftovers(self.backend, job_ids | cluster_job_ids(cluster))
        self.client = None
        self._quiet.close()


def _log_shape(run_id: str, pool: str | None, plan: ElasticPlan) -> None:
    log.info(
        "run %s: %s%d to %d worker jobs of %d worker(s) x %d thread(s)",
        run_id,
        f"pool {pool}: " if pool else "",
        plan.minimum,
        plan.maximum,
        plan.workers_per_job,
        plan.threads_per_worker,
    )


def cancel_leftovers(
    backend: Backend,
    job_ids: set[str],
    *,
    grace: float = 10.0,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Cancel worker jobs still queued or running ``grace`` seconds after the cluster closed.

    dask-jobqueue has already sent ``scancel``/``qdel``; the batch system takes a moment
    (COMPLETING) to finish them, so wait for that before cancelling again.
    """
    if not job_ids:
        return
    deadline = time.monotonic() + grace
    delay = 0.25
    try:
        while True:
            statuses = backend.poll(sorted(job_ids))
            alive = sorted(i for i, s in statuses.items() if not s.state.final)
            if not alive:
                return
            if time.monotonic() >= deadline:
                break
            sleep(delay)
            delay = min(2 * delay, 2.0)
        log.warning("cancelling worker jobs left behind: %s", ", ".join(alive))
        backend.cancel(alive)
    except HpcflowError as exc:
        log.warning("could not check for leftover worker jobs %s: %s", sorted(job_ids), exc)
