"""The hpcflow side of one Snakemake run: a run directory and a Dask cluster to send jobs to.

A :class:`Session` owns both for the whole Snakemake run: it is started once (on the first
job), every job is one :class:`hpcflow.worker.calls.TaskCall` run by the same worker code
as hpcflow's own tasks (:func:`hpcflow.worker.chunk.run_chunk`), and it is closed once,
when Snakemake shuts the executor down, is interrupted, or the interpreter exits.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import socket
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcflow import __version__
from hpcflow.backends.base import AllocationState
from hpcflow.backends.poller import Poller
from hpcflow.engine.lifecycle import new_run_id
from hpcflow.errors import AllocationFailed, HpcflowError
from hpcflow.store.atomic import write_json_atomic
from hpcflow.store.paths import RunPaths, StateRoot
from hpcflow.worker.calls import TaskCall
from hpcflow.worker.chunk import run_chunk
from hpcflow.worker.groups import kill_running
from hpcflow.worker.local_cluster import LocalCapacity, LocalCluster
from snakemake_executor_plugin_hpcflow.record import Ended, RunRecord
from snakemake_executor_plugin_hpcflow.translate import TaskRequest

if TYPE_CHECKING:
    from hpcflow.backends.base import Backend
    from hpcflow.bootstrap.config import PilotConfig
    from hpcflow.modes.elastic_plan import ElasticPlan
    from hpcflow.modes.elastic_watch import SubmitFailures, WorkerWatch
    from hpcflow.settings.profile import Profile

log = logging.getLogger(__name__)

#: Seconds an allocation may go on after losing its Dask scheduler before the plugin
#: gives up on it (it normally ends within seconds: the scheduler is its batch script's).
LOST_SCHEDULER_GRACE = 120.0


class CapacityError(HpcflowError):
    """A job asks for more than any worker of the session's cluster offers."""


def create_run_dir(
    workdir: Path, mode: str, snakefile: str, backend: str
) -> tuple[str, RunPaths, RunRecord]:
    """A fresh run directory under ``WORKDIR/.hpcflow/runs/`` with its ``run.json`` and
    ``state.sqlite``, listed in the per-user index of runs (``hpcflow runs``)."""
    run_id = new_run_id()
    paths = RunPaths(StateRoot(workdir / ".hpcflow").runs / run_id)
    paths.run_dir.mkdir(parents=True, mode=0o700)
    workflow = str((workdir / snakefile).resolve())
    started = time.time()
    write_json_atomic(
        paths.run_info,
        {
            "run_id": run_id,
            "workflow": workflow,
            "engine": "snakemake",
            "mode": mode,
            "backend": backend,
            "started": started,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "hpcflow": __version__,
            "base_dir": str(workdir),
        },
    )
    record = RunRecord(paths)
    record.create(run_id, workflow, mode, backend, started)
    return run_id, paths, record


class Session:
    """A run directory plus a connected Dask client; subclasses say where the workers are."""

    #: True where an MPI job's launcher starts its ranks as a separate step (allocations).
    mpi_as_step = False

    def __init__(self, workdir: Path, snakefile: str) -> None:
        self.workdir = workdir
        self.snakefile = snakefile
        self.run_id = ""
        self.paths: RunPaths | None = None
        self.client: Any = None
        #: The run's state.sqlite (what `hpcflow runs` and `hpcflow status` read).
        self.record: RunRecord | None = None
        #: True once Snakemake cancelled running jobs (Ctrl-C, or it gave up after a failure).
        self.cancelled = False
        self._closed = False
        self._lock = threading.Lock()
        self._counter = 0

    # -- the life cycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Create the run directory and connect to (or start) the cluster."""
        raise NotImplementedError

    def close(self) -> None:
        """Release everything the session holds; safe to call more than once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        atexit.unregister(self.close)
        try:
            self._release()
        finally:
            self._finish_record()

    def _finish_record(self) -> None:
        """Jobs still running were killed with the cluster; then the run's final status."""
        if self.record is None:
            return
        try:
            self.record.cancel_running()
            status = self.record.finish(self.cancelled)
            log.info("hpcflow run %s %s", self.run_id, status)
        except Exception as exc:  # sqlite3 errors: the run's result stands without them
            log.warning("could not record the end of run %s: %s", self.run_id, exc)

    def _release(self) -> None:
        raise NotImplementedError

    def where_to_look(self) -> str:
        """Extra logs worth reading when a job was lost (its worker or cluster went away)."""
        return ""

    def failure(self) -> str | None:
        """Why the cluster will never run the jobs sent to it, or None while it can."""
        return None

    def lost(self) -> str:
        """What to do with jobs whose futures came back lost (their worker or the whole
        cluster went away): ``"failed"`` (report them to Snakemake), ``"wait"`` (not
        known yet: ask again on the next check) or ``"resend"`` (a continuation cluster
        is coming: send them again, same attempt, once :meth:`submit` takes them)."""
        return "failed"

    # -- capacity ---------------------------------------------------------------------------

    def max_cpus(self) -> int:
        """The most CPU slots one job can hold on one worker."""
        raise NotImplementedError

    def gpus(self) -> int:
        """GPUs one worker offers."""
        return 0

    def check_fits(self, task: TaskRequest) -> None:
        """Refuse a job no worker could ever run (Dask would keep it waiting forever)."""
        cpus = int(task.dask_resources.get("cpus", 1))
        if cpus > self.max_cpus():
            raise CapacityError(
                f"{task.task_id} asks for {cpus} cpus but a worker of this hpcflow cluster "
                f"has {self.max_cpus()}",
                hint="lower the rule's threads (or --set-threads), or use --hpcflow-mode "
                "pilot with a profile whose workers are bigger",
            )
        gpus = int(task.dask_resources.get("GPU", 0))
        if gpus > self.gpus():
            raise CapacityError(
                f"{task.task_id} asks for {gpus} GPUs but a worker of this hpcflow cluster "
                f"has {self.gpus()}",
                hint="use --hpcflow-mode pilot with a GPU profile, e.g. --hpcflow-profile "
                "slurm-gpu",
            )

    # -- jobs -------------------------------------------------------------------------------

    def record_started(self, task: TaskRequest) -> int:
        """Record that ``task`` is sent to the cluster; returns its row in state.sqlite."""
        if self.record is None:
            raise RuntimeError("the session has not been started")
        return self.record.started(task)

    def record_ended(self, finished: list[Ended]) -> None:
        """Record finished attempts (a failure to write is logged, not raised)."""
        if self.record is None or not finished:
            return
        try:
            self.record.ended(finished)
        except Exception as exc:  # sqlite3 errors must not fail the Snakemake run
            log.warning("could not record %d finished jobs: %s", len(finished), exc)

    def record_error(self, message: str) -> None:
        """Record why the run fails although no job failed (e.g. a job no worker fits)."""
        if self.record is not None:
            self.record.error(message)

    def call_for(self, task: TaskRequest, command: str) -> TaskCall:
        """The call that runs ``command`` for ``task``, its logs in ``RUN_DIR/tasks/SLUG/``."""
        if self.paths is None:
            raise RuntimeError("the session has not been started")
        with self._lock:
            self._counter += 1
            index = self._counter
        stdout, stderr, result = self.paths.attempt_files(task.slug, task.attempt)
        return TaskCall(
            index=index,
            attempt=task.attempt,
            kind="shell",
            command=command,
            argv=None,
            python=None,
            kwargs=None,
            workdir=str(self.workdir),
            env=None,
            timeout=task.timeout,
            # Snakemake checks inputs and outputs itself (and keeps its own incomplete
            # markers); hpcflow must not move a failed job's outputs out of its way.
            inputs=(),
            outputs=(),
            stdout=stdout,
            stderr=stderr,
            result=result,
            quarantine_dir=self.paths.quarantine(task.slug, task.attempt),
        )

    def submit(self, task: TaskRequest, call: TaskCall) -> Any:
        """Send one call to the cluster; the Dask future resolves to ``[Outcome]``.

        None while there is no cluster to send it to (a continuation allocation is on
        its way): the caller keeps the call and tries again later.
        """
        if self.client is None:
            raise RuntimeError("the session has not been started")
        return self.client.submit(
            run_chunk,
            [call],
            key=job_key(task, call),
            resources=task.dask_resources,
            pure=False,
        )

    def cancel(self, futures: list[Any]) -> None:
        """Cancel ``futures`` and kill every task process the workers are running."""
        if self.client is None or not futures:
            return
        try:
            self.client.cancel(futures, force=True)
            self.client.run(kill_running, wait=True)
        except Exception as exc:  # workers may already be gone; closing follows anyway
            log.debug("cancelling on the workers failed: %s", exc)


def job_key(task: TaskRequest, call: TaskCall) -> str:
    """The Dask key of a job's call (also what Snakemake shows as its external id)."""
    return f"snakemake-{task.slug}-{task.attempt}-{call.index}"


class LocalSession(Session):
    """An hpcflow-owned ``LocalCluster`` on this machine (hpcflow's embedded default)."""

    def __init__(self, workdir: Path, snakefile: str, capacity: LocalCapacity) -> None:
        super().__init__(workdir, snakefile)
        self.capacity = capacity
        self._cluster: LocalCluster | None = None

    def start(self) -> None:
        self.run_id, self.paths, self.record = create_run_dir(
            self.workdir, "local", self.snakefile, "local"
        )
        atexit.register(self.close)
        cluster = LocalCluster(self.capacity, str(self.workdir))
        cluster.__enter__()
        self._cluster = cluster
        self.client = cluster.client
        log.info(
            "hpcflow run %s: local Dask cluster with %d slots; logs in %s",
            self.run_id,
            self.capacity.slots,
            self.paths.tasks_dir,
        )

    def _release(self) -> None:
        if self._cluster is not None:
            self._cluster.__exit__(None, None, None)
            self._cluster = None
            self.client = None

    def max_cpus(self) -> int:
        return self.capacity.max_cpus_per_task

    def gpus(self) -> int:
        return self.capacity.gpus


class PilotSession(Session):
    """ONE allocation for the whole Snakemake run: hpcflow's pilot allocation (scheduler on
    rank 0, workers on ranks 2..), with this process as its Dask client instead of
    hpcflow's driver (``PilotConfig.external_client``: rank 1 only waits).

    With ``resubmit: true`` in the profile, an allocation that hits its walltime (or loses
    a node) is followed by a continuation allocation, up to ``max_resubmits`` of them: the
    jobs it took with it are sent again to the new one, as the same attempt.
    """

    mpi_as_step = True

    def __init__(
        self,
        workdir: Path,
        snakefile: str,
        profile: Profile,
        backend: Backend,
        *,
        scheduler_timeout: float | None = None,
    ) -> None:
        super().__init__(workdir, snakefile)
        self.profile = profile
        self.backend = backend
        #: Seconds to wait for the allocation's scheduler (None: as long as it is queued).
        self.scheduler_timeout = scheduler_timeout
        self.native_id: str | None = None
        #: The allocation's number in this run: 1, then 2, 3... for continuations.
        self.number = 1
        self._config: PilotConfig | None = None
        self._continuation: threading.Thread | None = None
        #: Set while a continuation allocation is being submitted and connected to.
        self._continuing = threading.Event()
        self._broken: str | None = None
        self._stopping = threading.Event()
        self._lost_since: float | None = None
        self._last_poll = 0.0

    def start(self) -> None:
        from hpcflow.bootstrap.preflight import check_transport
        from hpcflow.transport.security import check_choice

        profile = self.profile
        check_choice(
            profile.transport, require_encryption=profile.require_encryption, shared_machine=True
        )
        check_transport(profile.transport, profile.python)
        self.run_id, self.paths, self.record = create_run_dir(
            self.workdir, "pilot", self.snakefile, self.backend.name
        )
        atexit.register(self.close)
        self._submit(1)
        self._connect()

    def _submit(self, number: int) -> None:
        """Plan and submit allocation ``number`` (its ranks' configuration written first)."""
        from hpcflow.modes.pilot import plan_pilot, submit_allocation
        from hpcflow.store.statedb import SubmitDB
        from hpcflow.transport.certificates import create_credentials

        if self.paths is None:
            raise RuntimeError("the session has not been started")
        plan = plan_pilot(self.profile, self.paths, self.run_id, self.workdir, number)
        config = replace(plan.config, external_client=True)
        plan = replace(plan, config=config)
        self._config = config
        if config.transport == "tls" and number == 1:
            # Every allocation of the run uses these (the files stay in the run folder).
            create_credentials(self.paths.run_dir, self.run_id)
        config.write(self.paths.pilot_config)
        with SubmitDB(self.paths.submit_db) as submit:
            self.native_id = submit_allocation(
                self.backend, plan, self.paths, submit, number, retries=self.profile.submit_retries
            )
        self.number = number
        log.info(
            "hpcflow run %s: allocation %s submitted (%d workers × %d threads)",
            self.run_id,
            self.native_id,
            config.workers_expected,
            config.threads_per_worker,
        )

    def _connect(self) -> None:
        """Wait for the allocation's scheduler and connect to it."""
        from distributed import Client

        from hpcflow.transport.security import security_for

        if self.paths is None or self._config is None:
            raise RuntimeError("the allocation has not been submitted")
        address = self._wait_for_scheduler()
        self.client = Client(
            address,
            timeout=120,
            set_as_default=False,
            security=security_for(self.paths.run_dir, self._config.transport),
        )
        log.info("hpcflow run %s: connected to the scheduler at %s", self.run_id, address)

    def _wait_for_scheduler(self) -> str:
        """The scheduler's address once rank 0 has published it; the allocation's state
        is asked with ONE backing-off poller meanwhile (it may fail or stay queued)."""
        if self.paths is None or self.native_id is None:
            raise RuntimeError("the allocation has not been submitted")
        poller = Poller(
            self.backend,
            interval=self.profile.poll_interval,
            initial_delay=min(1.0, self.profile.poll_interval),
            max_interval=max(self.profile.max_poll_interval, self.profile.poll_interval),
            max_failures=1_000_000,
        )
        poller.track([self.native_id])
        address_file = self.paths.run_dir / "scheduler.json"
        started = time.monotonic()
        while not self._stopping.is_set():
            address = _published_address(address_file, self.native_id)
            if address is not None:
                return address
            poller.poll_once()
            status = poller.latest.get(self.native_id)
            if status is not None and status.state.final:
                raise AllocationFailed(
                    self.native_id,
                    status.native_state,
                    status.reason or "it ended before its Dask scheduler started",
                    [
                        str(self.paths.allocation_stdout(self.number)),
                        str(self.paths.allocation_stderr(self.number)),
                    ],
                )
            if (
                self.scheduler_timeout is not None
                and time.monotonic() - started > self.scheduler_timeout
            ):
                raise AllocationFailed(
                    self.native_id,
                    status.native_state if status else "UNKNOWN",
                    f"no Dask scheduler within {self.scheduler_timeout:.0f}s",
                    [str(self.paths.allocation_stderr(self.number))],
                )
            time.sleep(0.2)
        raise AllocationFailed(self.native_id, "CANCELLED", "the plugin was shut down", [])

    # -- continuation -----------------------------------------------------------------------

    def submit(self, task: TaskRequest, call: TaskCall) -> Any:
        client = self.client
        if self._continuing.is_set() or self._broken is not None:
            return None  # the next allocation is not there yet (or failure() says why)
        if client is None:
            raise RuntimeError("the session has not been started")
        if client.status != "running":
            return None  # the scheduler is gone: lost() decides what comes next
        return super().submit(task, call)

    def failure(self) -> str | None:
        return self._broken

    def lost(self) -> str:
        """Decide about jobs lost with their futures (see :meth:`Session.lost`).

        A lost job while the client is still connected is a job failure (Dask already
        retried it on other workers). A lost connection means the allocation is ending:
        its state then decides, asked at most once per poll interval.
        """
        if self._continuing.is_set():
            return "resend"
        if self._broken is not None:
            return "failed"
        client = self.client
        if client is not None and client.status == "running":
            self._lost_since = None
            return "failed"
        now = time.monotonic()
        if self._lost_since is None:
            self._lost_since = now
        if now - self._last_poll < min(self.profile.poll_interval, 5.0):
            return "wait"
        self._last_poll = now
        try:
            status = (
                self.backend.poll([self.native_id]).get(self.native_id) if self.native_id else None
            )
        except HpcflowError as exc:
            log.debug("poll after losing the scheduler: %s", exc)
            status = None
        if status is None or not status.state.final:
            if now - self._lost_since > LOST_SCHEDULER_GRACE:
                log.warning(
                    "allocation %s lost its Dask scheduler %.0fs ago but did not end; "
                    "cancelling it",
                    self.native_id,
                    now - self._lost_since,
                )
                self._end_allocation()
                return "failed"
            return "wait"
        from hpcflow.modes.pilot import NODE_FAIL

        self._record_allocation(status.state.value, status.native_state)
        stopped_early = status.state is AllocationState.TIMEOUT or status.native_state == NODE_FAIL
        if not stopped_early or not self.profile.resubmit:
            return "failed"
        if self.number > self.profile.max_resubmits:
            log.warning(
                "allocation %s ended (%s) and the profile allows no more than %d "
                "continuation allocations",
                self.native_id,
                status.native_state,
                self.profile.max_resubmits,
            )
            return "failed"
        log.warning(
            "allocation %s %s; submitting continuation %d and sending its unfinished jobs there",
            self.native_id,
            "lost a node" if status.native_state == NODE_FAIL else "hit its walltime",
            self.number + 1,
        )
        self._continuing.set()
        old, self.client = self.client, None
        self._lost_since = None
        self._continuation = threading.Thread(
            target=self._continue, args=(old,), name="hpcflow-continuation", daemon=True
        )
        self._continuation.start()
        return "resend"

    def _continue(self, old_client: Any) -> None:
        """Close the lost cluster's client, submit the next allocation and connect to it
        (a thread: the allocation may stay queued for long)."""
        _close_quietly(old_client)
        try:
            self._submit(self.number + 1)
            self._connect()
        except Exception as exc:  # any reason: the jobs waiting for it must fail
            if not self._stopping.is_set():
                log.error("continuation allocation failed: %s", exc)
            self._broken = f"the continuation allocation failed: {exc}"
        finally:
            self._continuing.clear()

    def _close_client(self) -> None:
        client, self.client = self.client, None
        _close_quietly(client)

    # -- release ----------------------------------------------------------------------------

    def _release(self) -> None:
        """Shut the allocation's Dask cluster down (the allocation then ends by itself);
        cancel the allocation if it is still there after a grace period."""
        self._stopping.set()
        if self._continuation is not None:
            self._continuation.join(timeout=60)
        shut_down = self.client is not None
        if self.client is not None:
            try:
                self.client.shutdown()
            except Exception as exc:  # the scheduler may be gone already
                log.debug("shutdown: %s", exc)
        self._close_client()
        if self.native_id is None:
            return
        # After a shutdown the allocation ends by itself within seconds; one still queued
        # (Ctrl-C while waiting for it) is cancelled at once.
        deadline = time.monotonic() + (20.0 if shut_down else 0.0)
        while time.monotonic() < deadline:
            try:
                status = self.backend.poll([self.native_id]).get(self.native_id)
            except HpcflowError as exc:
                log.debug("poll after shutdown: %s", exc)
                break
            if status is None or status.state.final:
                self._record_allocation(
                    status.state.value if status else AllocationState.COMPLETED.value,
                    status.native_state if status else "left the queue",
                )
                return
            time.sleep(0.5)
        self._end_allocation()

    def _end_allocation(self) -> None:
        """Cancel the current allocation (it is no use any more)."""
        if self.native_id is None:
            return
        try:
            status = self.backend.poll([self.native_id]).get(self.native_id)
        except HpcflowError:
            status = None
        if status is not None and status.state.final:
            self._record_allocation(status.state.value, status.native_state)
            return
        log.info("cancelling allocation %s", self.native_id)
        try:
            self.backend.cancel([self.native_id])
        except HpcflowError as exc:
            log.warning("could not cancel allocation %s: %s", self.native_id, exc)
            return
        self._record_allocation(AllocationState.CANCELLED.value, "cancelled by the plugin")

    def _record_allocation(self, state: str, native_state: str | None) -> None:
        """The allocation's last state in state.sqlite (for `hpcflow status`)."""
        if self.record is None or self.native_id is None:
            return
        try:
            self.record.update_allocation(self.native_id, state, native_state)
        except Exception as exc:  # sqlite3 errors: nothing else depends on it
            log.debug("could not record allocation %s: %s", self.native_id, exc)

    def where_to_look(self) -> str:
        if self.paths is None or self.native_id is None:
            return ""
        return (
            f"Allocation {self.native_id}'s logs: {self.paths.allocation_stdout(self.number)} "
            f"and {self.paths.allocation_stderr(self.number)}. "
        )

    def max_cpus(self) -> int:
        return self._config.threads_per_worker if self._config else 1

    def gpus(self) -> int:
        return self._config.gpus_per_worker if self._config else 0


def _close_quietly(client: Any) -> None:
    """Close a Dask client that may have lost its scheduler (never waits long, never raises)."""
    if client is None:
        return
    try:
        client.close(timeout=10)
    except Exception as exc:  # already closed, or closing after losing its scheduler
        log.debug("close: %s", exc)


def _published_address(path: Path, native_id: str) -> str | None:
    """The address rank 0 wrote to ``scheduler.json`` for this allocation, if any yet."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if str(data.get("allocation")) != str(native_id):
        return None
    address = data.get("address")
    return str(address) if address else None


class ElasticSession(Session):
    """Dask workers that come and go as batch jobs (dask-jobqueue, hpcflow's elastic mode):
    the scheduler runs in this process, worker jobs are shaped by the profile
    (:func:`hpcflow.modes.elastic_plan.plan_elastic`) and their number follows the
    backlog of Snakemake jobs sent and not yet finished, between the profile's
    ``min_workers`` and ``max_workers``."""

    mpi_as_step = True

    def __init__(self, workdir: Path, snakefile: str, profile: Profile, backend: Backend) -> None:
        super().__init__(workdir, snakefile)
        self.profile = profile
        self.backend = backend
        self._plan: ElasticPlan | None = None
        self._cluster: Any = None
        self._watch: WorkerWatch | None = None
        self._failures: SubmitFailures | None = None
        self._pending: dict[str, float] = {}
        self._quiet: Any = None

    def start(self) -> None:
        from distributed import Client

        from hpcflow.modes.elastic import check_elastic
        from hpcflow.modes.elastic_adapt import BacklogAdaptive
        from hpcflow.modes.elastic_cluster import counted_failures_quiet, start_cluster
        from hpcflow.modes.elastic_plan import plan_elastic
        from hpcflow.modes.elastic_watch import SubmitFailures, WorkerWatch
        from hpcflow.transport.certificates import create_credentials
        from hpcflow.transport.security import security_for

        profile = self.profile
        check_elastic(profile)
        self.run_id, self.paths, self.record = create_run_dir(
            self.workdir, "elastic", self.snakefile, self.backend.name
        )
        atexit.register(self.close)
        plan = plan_elastic(
            profile, self.paths.run_dir, self.run_id, self.workdir,
            log_directory=self.paths.workers_dir,
        )  # fmt: skip
        self._plan = plan
        if profile.transport == "tls":
            create_credentials(self.paths.run_dir, self.run_id)
        security = security_for(self.paths.run_dir, profile.transport)
        self.paths.workers_dir.mkdir(mode=0o700, exist_ok=True)
        self._failures = SubmitFailures(profile.submit_retries + 1)
        # Failed worker submissions are logged once each, not with Dask's tracebacks.
        self._quiet = counted_failures_quiet()
        self._quiet.__enter__()
        cluster = start_cluster(plan, security, self._failures)
        self._cluster = cluster
        (self.paths.workers_dir / "job.sh").write_text(cluster.job_script(), encoding="utf-8")
        self._watch = WorkerWatch(
            cluster, self.paths.elastic_log, interval=min(1.0, plan.interval),
            failures=self._failures,
        )  # fmt: skip
        self._watch.start()
        cluster.adapt(
            Adaptive=BacklogAdaptive,
            backlog=self.backlog_slots,
            slots_per_worker=plan.threads_per_worker,
            minimum_jobs=plan.minimum,
            maximum_jobs=plan.maximum,
            interval=f"{plan.interval:g}s",
            wait_count=plan.wait_count,
        )
        self.client = Client(cluster, security=security, set_as_default=False)
        if self.record is not None:
            self.record.set_meta(
                scheduler_address=cluster.scheduler_address,
                dashboard=cluster.dashboard_link if plan.dashboard else None,
                worker_job_name=plan.job_name,
            )
        log.info(
            "hpcflow run %s: elastic cluster at %s; %d to %d worker jobs of %d worker(s) x "
            "%d thread(s)",
            self.run_id,
            cluster.scheduler_address,
            plan.minimum,
            plan.maximum,
            plan.workers_per_job,
            plan.threads_per_worker,
        )

    def backlog_slots(self) -> int:
        """CPU slots of the jobs sent and not finished: what the cluster grows for."""
        with self._lock:
            return int(sum(self._pending.values()))

    def submit(self, task: TaskRequest, call: TaskCall) -> Any:
        future = super().submit(task, call)
        key = str(future.key)
        with self._lock:
            self._pending[key] = task.dask_resources.get("cpus", 1.0)

        def done(_: Any) -> None:
            with self._lock:
                self._pending.pop(key, None)

        future.add_done_callback(done)
        return future

    def failure(self) -> str | None:
        """Why no worker will ever come (its jobs cannot be submitted), or None."""
        if self._failures is None or not self._failures.fatal:
            return None
        where = self.paths.workers_dir / "job.sh" if self.paths else "workers/job.sh"
        return (
            f"elastic worker jobs could not be submitted ({self._failures.in_a_row} tries): "
            f"{self._failures.last or 'unknown error'}. Check the profile's partition, "
            f"account and sizes; the job script is {where}"
        )

    def _release(self) -> None:
        from hpcflow.modes.elastic import cancel_leftovers
        from hpcflow.modes.elastic_cluster import close_cluster, cluster_job_ids

        if self._cluster is None:
            return
        job_ids: set[str] = set()
        if self._watch is not None:
            self._watch.disarm()
            job_ids = self._watch.job_ids()
        close_cluster(self._cluster, self.client)
        self.client = None
        if self._watch is not None:
            self._watch.stop()
        cancel_leftovers(self.backend, job_ids | cluster_job_ids(self._cluster))
        self._cluster = None
        if self._quiet is not None:
            self._quiet.__exit__(None, None, None)
            self._quiet = None

    def where_to_look(self) -> str:
        if self.paths is None:
            return ""
        return f"Worker jobs' logs: {self.paths.workers_dir}. "

    def max_cpus(self) -> int:
        return self._plan.threads_per_worker if self._plan else 1

    def gpus(self) -> int:
        return self._plan.gpus_per_worker if self._plan else 0
