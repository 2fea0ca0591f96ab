"""The sessions whose Dask workers are batch jobs of a profile: one pilot allocation at a
time with this process as its client, or elastic worker jobs that come and go.

Both take what the base :class:`~snakemake_executor_plugin_hpcflow.session.Session` does
for every run (the lease, the run directory, jobs as calls) and say only where the
workers come from and what the batch mode adds: the allocation's verdict on jobs lost
with it, the elastic cluster's backlog. hpcflow's modes are imported when a session
starts its workers, not before.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcflow.store.paths import RunPaths
from hpcflow.worker.calls import TaskCall
from snakemake_executor_plugin_hpcflow.calls import PendingSlots
from snakemake_executor_plugin_hpcflow.jobcommand import JobCommand
from snakemake_executor_plugin_hpcflow.session import Session
from snakemake_executor_plugin_hpcflow.translate import TaskRequest
from snakemake_executor_plugin_hpcflow.workers import Workers

if TYPE_CHECKING:
    from hpcflow.backends.base import Backend
    from hpcflow.modes.elastic_workers import ElasticWorkers
    from hpcflow.modes.pilot_client import PilotClientAllocation, Verdict
    from hpcflow.settings.profile import Profile


class BatchSession(Session):
    """Workers in batch jobs of ``profile`` (``backend``: its batch system)."""

    mpi_as_step = True

    def __init__(self, workdir: Path, snakefile: str, profile: Profile, backend: Backend) -> None:
        super().__init__(workdir, snakefile, backend.name)
        self.profile = profile
        self.backend = backend


class PilotSession(BatchSession):
    """ONE pilot allocation at a time, this process its Dask client instead of hpcflow's
    driver (:class:`~hpcflow.modes.pilot_client.PilotClientAllocation`). With ``resubmit:
    true`` in the profile, the jobs an allocation took with it when it hit its walltime
    (or lost a node) are sent again, as the same attempt, to its continuation."""

    mode = "pilot"
    #: Seconds to wait for the allocation's scheduler (None: as long as it is queued).
    scheduler_timeout: float | None = None
    allocation: PilotClientAllocation | None = None

    def _check(self) -> None:
        from hpcflow.modes.pilot_client import check_pilot_client

        check_pilot_client(self.profile, self.backend)

    def _workers(self, paths: RunPaths) -> Workers:
        from hpcflow.modes.pilot_client import PilotClientAllocation

        self.allocation = PilotClientAllocation(
            self.profile, self.backend, paths, self.run_id, self.workdir,
            scheduler_timeout=self.scheduler_timeout, lease=self.lease,
        )  # fmt: skip
        return self.allocation

    def lost(self) -> Verdict:
        return self.allocation.lost() if self.allocation is not None else "failed"


class ElasticSession(BatchSession):
    """Dask workers that come and go as batch jobs: hpcflow's elastic mode
    (:class:`~hpcflow.modes.elastic_workers.ElasticWorkers`, its scheduler in this
    process), their number following the CPU slots of the jobs sent and not finished."""

    mode = "elastic"

    def __init__(self, workdir: Path, snakefile: str, profile: Profile, backend: Backend) -> None:
        super().__init__(workdir, snakefile, profile, backend)
        #: The jobs sent and not finished: the backlog the cluster grows for.
        self.pending = PendingSlots()
        self.elastic: ElasticWorkers | None = None

    def _check(self) -> None:
        from hpcflow.modes.elastic import check_elastic

        check_elastic(self.profile)

    def _workers(self, paths: RunPaths) -> Workers:
        from hpcflow.modes.elastic_workers import ElasticWorkers

        self.elastic = ElasticWorkers(
            self.profile, self.backend, paths, self.run_id, self.workdir, backlog=self.pending
        )
        return self.elastic

    def start(self) -> None:
        super().start()
        if self.elastic is not None:
            self.record.set_meta(**self.elastic.meta())

    def submit(self, task: TaskRequest, call: TaskCall, warm: JobCommand | None = None) -> Any:
        future = super().submit(task, call, warm)
        if future is not None:
            self.pending.add(future, task)
        return future
