"""The hpcflow side of one Snakemake run: a run directory and Dask workers to send jobs to.

A :class:`Session` owns both for the whole Snakemake run: started once (on the first job),
closed once (when Snakemake shuts the executor down, is interrupted, or the interpreter
exits). Every job is one call (:mod:`snakemake_executor_plugin_hpcflow.calls`). The workers
are started as ``hpcflow run`` starts them: the embedded local cluster, pilot allocations
with this process as their client (:class:`hpcflow.modes.pilot_client.PilotClientAllocation`)
or elastic worker jobs (:class:`hpcflow.modes.elastic_workers.ElasticWorkers`).

The session holds the workflow's lease (:mod:`snakemake_executor_plugin_hpcflow.lease`)
from before its run directory is made until its workers are released. This module has the
session itself and its local kind; the kinds whose workers are batch jobs (pilot,
elastic) are in :mod:`snakemake_executor_plugin_hpcflow.batch_sessions`.
"""

from __future__ import annotations

import atexit
import itertools
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcflow.store.lock import RunLock
from hpcflow.store.paths import RunPaths
from hpcflow.worker.calls import TaskCall
from hpcflow.worker.local_cluster import LocalCapacity
from snakemake_executor_plugin_hpcflow.calls import (
    cancel_calls,
    cap_to_worker,
    check_fits,
    send,
    task_call,
)
from snakemake_executor_plugin_hpcflow.jobcommand import JobCommand, read_job_command
from snakemake_executor_plugin_hpcflow.lease import take_lease
from snakemake_executor_plugin_hpcflow.record import RunRecord, create_run_dir
from snakemake_executor_plugin_hpcflow.translate import TaskRequest
from snakemake_executor_plugin_hpcflow.workers import LocalWorkers, Workers

if TYPE_CHECKING:
    from hpcflow.modes.pilot_client import Verdict


class Session:
    """A run directory plus a connected Dask client; subclasses say where the workers are."""

    #: The run's mode (``run.json``, ``state.sqlite``).
    mode = "local"
    #: True where an MPI job's launcher starts its ranks as a separate step (allocations).
    mpi_as_step = False

    def __init__(self, workdir: Path, snakefile: str, backend: str = "local") -> None:
        self.workdir = workdir
        self.snakefile = snakefile
        self.backend_name = backend
        self.run_id = ""
        self.paths: RunPaths | None = None
        self._record: RunRecord | None = None
        self.workers: Workers | None = None
        #: True once Snakemake cancelled running jobs (Ctrl-C, or it gave up after a failure).
        self.cancelled = False
        self._closed = False
        self._lock = threading.Lock()
        self._calls = itertools.count(1)  # the run's call numbers (next() is atomic)
        #: Jobs run through warm runners where their command allows (else as commands).
        self.warm_runner = True
        #: The workflow's lease, held from :meth:`start` to :meth:`close`.
        self.lease: RunLock | None = None
        #: Why the lease was lost to another run (then this run must stop driving).
        self.lease_lost: str | None = None

    @property
    def client(self) -> Any:
        return self.workers.client if self.workers is not None else None

    def start(self) -> None:
        """Take the workflow's lease, create the run directory and start the workers (or
        connect to them). Raises :class:`~hpcflow.errors.RunLockedError` while another run
        of the workflow lives. Call :meth:`close` afterwards, also when this raises."""
        self._check()
        self.lease = take_lease(self.workdir, self.snakefile, self._lost_lease)
        self.run_id, self.paths, self._record = create_run_dir(
            self.workdir, self.mode, self.snakefile, self.backend_name
        )
        self.lease.set_run(self.run_id)
        atexit.register(self.close)
        self.workers = self._workers(self.paths)
        self.workers.start()

    def _check(self) -> None:
        """Refuse, before anything is created, what the workers cannot do."""

    def _lost_lease(self, why: str) -> None:
        self.lease_lost = why

    def _workers(self, paths: RunPaths) -> Workers:
        raise NotImplementedError

    def close(self) -> None:
        """Release the workers, then record how the run ended; safe to call more than once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        atexit.unregister(self.close)
        try:
            if self.workers is not None:
                self.workers.close()
        finally:
            try:
                if self._record is not None:
                    self._record.conclude(self.cancelled)
            finally:
                if self.lease is not None:  # after the workers (and allocations) are gone
                    self.lease.release()

    @property
    def record(self) -> RunRecord:
        """The run's state.sqlite (what `hpcflow runs` and `hpcflow status` read)."""
        if self._record is None:
            raise RuntimeError("the session has not been started")
        return self._record

    def where_to_look(self) -> str:
        return self.workers.where_to_look() if self.workers is not None else ""

    def failure(self) -> str | None:
        """Why no job of this run can go on (None while they can)."""
        if self.lease_lost is not None:
            return (
                f"hpcflow run {self.run_id} lost the workflow's lease ({self.lease_lost}): "
                "another run of this workflow drives it now"
            )
        return self.workers.failure() if self.workers is not None else None

    def lost(self) -> Verdict:
        """What to do with jobs lost with their futures (see ``PilotClientAllocation.lost``)."""
        return "failed"  # Dask has already retried them on other workers

    def max_cpus(self) -> int:
        return self.workers.max_cpus() if self.workers is not None else 1

    def gpus(self) -> int:
        return self.workers.gpus() if self.workers is not None else 0

    def check_fits(self, task: TaskRequest) -> None:
        """Refuse a job no worker could ever run (Dask would keep it waiting forever)."""
        check_fits(task, self.max_cpus(), self.gpus())

    def fit(self, task: TaskRequest) -> tuple[TaskRequest, str]:
        """``task`` as the workers will hold it, and what was cut to get there ("").
        Batch sessions refuse what no worker can hold (:meth:`check_fits`)."""
        self.check_fits(task)
        return task, ""

    # -- jobs -------------------------------------------------------------------------------

    def call_for(self, task: TaskRequest, command: str) -> TaskCall:
        """The call that runs ``command`` for ``task``, its logs in ``RUN_DIR/tasks/SLUG/``."""
        if self.paths is None:
            raise RuntimeError("the session has not been started")
        return task_call(task, command, self.paths, self.workdir, next(self._calls))

    def warm_command(self, command: str) -> JobCommand | None:
        """``command`` as a warm runner runs it, or None when the warm runner is off.

        Raises :class:`~snakemake_executor_plugin_hpcflow.jobcommand.NotWarm` for a
        command the warm runner does not honour (it runs as it is).
        """
        if not self.warm_runner:
            return None
        return read_job_command(command, str(self.workdir))

    @property
    def warm_logs(self) -> str:
        """Where the warm runners of this run write their logs (one file each)."""
        return str(self.paths.run_dir / "warm") if self.paths is not None else ""

    def submit(self, task: TaskRequest, call: TaskCall, warm: JobCommand | None = None) -> Any:
        """Send one call to the cluster (through a warm runner when ``warm`` is given);
        the Dask future resolves to ``[Outcome]``.

        None while there is no cluster to send it to (a continuation allocation is on
        its way): the caller keeps the call and tries again later.
        """
        if self.client is None:
            return None
        return send(self.client, task, call, warm, self.warm_logs)

    def cancel(self, futures: list[Any]) -> None:
        """Cancel ``futures`` and kill every task process the workers are running."""
        if self.client is not None and futures:
            cancel_calls(self.client, futures)


class LocalSession(Session):
    """An hpcflow-owned ``LocalCluster`` on this machine (hpcflow's embedded default)."""

    def __init__(self, workdir: Path, snakefile: str, capacity: LocalCapacity) -> None:
        super().__init__(workdir, snakefile)
        self.capacity = capacity

    def _workers(self, paths: RunPaths) -> Workers:
        return LocalWorkers(self.capacity, str(self.workdir))

    def fit(self, task: TaskRequest) -> tuple[TaskRequest, str]:
        """Hold at most what the local worker has, as Snakemake's local executor runs a
        job that wants more than ``--cores`` (the job's own Snakemake still runs it with
        its threads capped at ``--cores``)."""
        return cap_to_worker(task, self.max_cpus(), self.gpus())
