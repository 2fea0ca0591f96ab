"""The Snakemake executor: Snakemake jobs in, hpcflow task calls out, futures polled in memory.

``run_job`` translates the job (:func:`translate.task_for_job`), wraps Snakemake's own job
command (``format_job_exec``) into a :class:`~hpcflow.worker.calls.TaskCall` and hands it
to the session's Dask cluster; ``check_active_jobs`` reads the futures (no batch-system
query per job, ever); ``cancel_jobs`` cancels them and kills their processes; ``shutdown``
releases the cluster (and, in pilot mode, the allocation).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import AsyncGenerator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from snakemake_interface_common.exceptions import WorkflowError
from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo
from snakemake_interface_executor_plugins.executors.real import RealExecutor
from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor
from snakemake_interface_executor_plugins.jobs import JobExecutorInterface
from snakemake_interface_executor_plugins.settings import ExecMode

from hpcflow.errors import HpcflowError
from hpcflow.store.states import TaskState
from snakemake_executor_plugin_hpcflow.jobcommand import JobCommand, NotWarm
from snakemake_executor_plugin_hpcflow.settings import ExecutorSettings
from snakemake_executor_plugin_hpcflow.upstream import (
    job_command_extras,
    keep_restored_updates,
    without_option,
)

if TYPE_CHECKING:
    from hpcflow.worker.calls import Outcome
    from snakemake_executor_plugin_hpcflow.session import Session
    from snakemake_executor_plugin_hpcflow.translate import JobRequest, TaskRequest

# What runs jobs (sessions, the Dask calls, the run's record, the translation and its
# pydantic models) is imported where it is first used, not here: Snakemake imports this
# module in every process it starts (its plugin registry reads ``Executor``), the warm
# runners included, which only serve jobs: about 0.2 s of each runner's start.

log = logging.getLogger(__name__)


def job_request(job: JobExecutorInterface) -> JobRequest:
    """Read the translation's input from a live Snakemake job."""
    is_group = job.is_group()
    # Wildcards are not part of the executor interface; Snakemake's Job has them as
    # ``wildcards_dict``. Without them the task id falls back to the job id.
    wildcards = {} if is_group else dict(getattr(job, "wildcards_dict", None) or {})
    resources = job.resources
    items = resources.items() if hasattr(resources, "items") else []
    from snakemake_executor_plugin_hpcflow.translate import JobRequest

    return JobRequest(
        name=str(job.name),
        jobid=job.jobid,
        wildcards=tuple((str(k), str(v)) for k, v in wildcards.items()),
        threads=int(job.threads),
        resources={str(k): v for k, v in items},
        attempt=int(job.attempt),
        is_group=is_group,
    )


def dag_links(workflow: Any, job: JobExecutorInterface) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Where ``job`` sits in Snakemake's DAG, for the run's record: the Snakemake job ids
    it runs (itself, or a group job's members) and the ids of the jobs they depend on
    outside it (sorted). ``workflow.dag`` is not part of the executor interface: without
    one of the shape Snakemake 9 has (``dag.dependencies``: job -> its upstream jobs),
    the job has no upstream jobs."""
    members = list(getattr(job, "jobs", ())) if job.is_group() else [job]
    own = tuple(int(member.jobid) for member in members)
    dependencies = getattr(getattr(workflow, "dag", None), "dependencies", None)
    if not isinstance(dependencies, Mapping):
        return own, ()
    inside = set(own)
    upstream: set[int] = set()
    for member in members:
        # .get: the mapping is a defaultdict that indexing would add to.
        for dep in dependencies.get(member) or ():
            dep_id = getattr(dep, "jobid", None)
            if isinstance(dep_id, int) and dep_id not in inside:
                upstream.add(dep_id)
    return own, tuple(sorted(upstream))


def failure_message(
    task: TaskRequest, stdout: str, stderr: str, outcome: Outcome | None, more: str = ""
) -> str:
    """What Snakemake prints for a failed job: what happened and where its logs are
    (``more``: where else to look, e.g. the allocation's logs)."""
    if outcome is None:
        what = "was lost (its Dask worker died or the cluster went away)"
    elif outcome.state == TaskState.CANCELLED:
        what = "was cancelled"
    else:
        what = f"failed: {outcome.message or f'exit code {outcome.exit_code}'}"
        if outcome.host:
            what += f" on {outcome.host}"
    return (
        f"hpcflow task {task.task_id} (attempt {task.attempt}) {what}. "
        f"Its output is in {stdout} and {stderr} (each written only if not empty). "
        + (more if outcome is None else "")
    )


class Executor(RemoteExecutor):
    """Runs every Snakemake job of one Snakemake run on one hpcflow-owned Dask cluster."""

    def __init__(self, workflow: Any, logger: Any) -> None:
        #: Set when a job's future has ended, or Snakemake shuts the executor down: the
        #: status thread then checks at once instead of sleeping out ``poll_interval``
        #: (a tiny workflow would otherwise wait up to that long per job, and once more
        #: in ``shutdown``). Made before Snakemake's ``__init__`` starts that thread.
        self._wakeup = threading.Event()
        #: The status thread's event loop and the asyncio event it waits on, while it
        #: sleeps (no helper thread: one left waiting would outlive a run whose executor
        #: Snakemake never shuts down, e.g. "Nothing to be done").
        self._sleeping: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        super().__init__(workflow, logger)

    def __post_init__(self) -> None:
        # What Snakemake took the plugin for in this run (common_settings, read before
        # the executor exists): a local executor in local mode only.
        local = bool(self.workflow.local_exec)
        settings = self.workflow.executor_settings
        self.settings: ExecutorSettings = (
            settings if isinstance(settings, ExecutorSettings) else ExecutorSettings()
        )
        if self.settings.local_exec != local:
            raise WorkflowError(
                f"hpcflow's {self.settings.mode} mode"
                f"{' with local_groups' if self.settings.local_groups else ''}, but Snakemake "
                "prepared this run for "
                f"{'a local' if local else 'a non-local'} executor: the ExecutorSettings made "
                "last in this process decide which (settings.common_settings); make the run's "
                "ExecutorSettings right before the run, and pass them"
            )
        self.session: Session | None = None
        self._noted: set[tuple[str, str]] = set()
        self._general: str | None = None
        # The futures live in this process: checking them is free, so check often.
        self.next_seconds_between_status_checks = self.settings.poll_interval

    # -- the session ------------------------------------------------------------------------

    def _session(self) -> Session:
        """The session, started on the first job (a dry run or an empty run starts none)."""
        if self.session is None:
            try:
                session = make_session(self.settings, Path(os.getcwd()), self.workflow)
                session.warm_runner = self.settings.runner != "command"
                self.session = session
                session.start()
            except HpcflowError as exc:
                raise WorkflowError(str(exc)) from None
            self.logger.info(
                f"hpcflow run {session.run_id} ({self.settings.mode} mode): job logs in "
                f"{session.paths.tasks_dir if session.paths else '?'}"
            )
        return self.session

    # -- the executor interface -------------------------------------------------------------

    def run_job(self, job: JobExecutorInterface) -> None:
        """Translate ``job``, send its command to the cluster, and register the submission."""
        from snakemake_executor_plugin_hpcflow import outputcache
        from snakemake_executor_plugin_hpcflow.calls import job_key
        from snakemake_executor_plugin_hpcflow.translate import task_for_job

        cached = outputcache.kept_by_main(self.workflow, job)
        if cached and self._fetched(job):
            return
        session = self._session()
        try:
            task = task_for_job(
                job_request(job),
                mpi_as_step=session.mpi_as_step,
                group_cpus_cap=session.max_cpus(),
            )
            task, cut = session.fit(task)
        except HpcflowError as exc:
            session.record.error(str(exc))
            raise WorkflowError(str(exc)) from None
        if cut and ("cut", cut) not in self._noted:
            self._noted.add(("cut", cut))
            self.logger.info(
                f"{task.task_id} (and jobs like it) asks for {cut}; its own Snakemake runs "
                "it with its threads capped at --cores, as Snakemake's local executor does"
            )
        self._note_placement(session, task)
        command = self.format_job_exec(job)
        if cached:
            stripped = outputcache.without_cache(command, self._general_args())
            cached = stripped is not None
            command = stripped or command
        call = session.call_for(task, command)
        warm = self._warm(session, task, command)
        row = session.record.started(task, *dag_links(self.workflow, job))
        # None while a continuation allocation is on its way: sent by check_active_jobs.
        future = self._watch(session.submit(task, call, warm))
        self.report_job_submission(
            SubmittedJobInfo(
                job=job,
                external_jobid=job_key(task, call),
                aux={
                    "future": future,
                    "task": task,
                    "call": call,
                    "warm": warm,
                    "row": row,
                    "cache": cached,
                    "stdout": call.stdout,
                    "stderr": call.stderr,
                },
            )
        )

    def _fetched(self, job: JobExecutorInterface) -> bool:
        """Whether ``job``'s outputs came from the output cache (then it is done, as with
        the local executor: nothing runs). A cache that cannot be read fails the job."""
        from snakemake_executor_plugin_hpcflow import outputcache

        try:
            hit = outputcache.fetch(self.workflow, job)
        except Exception as exc:
            info = SubmittedJobInfo(job=job)
            RealExecutor.report_job_submission(self, info)  # registered, never watched
            self.report_job_error(info, msg=f"the output cache: {exc}")
            return True
        if hit:
            info = SubmittedJobInfo(job=job)
            RealExecutor.report_job_submission(self, info)
            self.report_job_success(info)
        return hit

    def _general_args(self) -> str:
        """Snakemake's general arguments of every job command (the same for each job)."""
        if self._general is None:
            self._general = self.workflow.spawned_job_args_factory.general_args(
                executor_common_settings=self.common_settings
            )
        return self._general

    def _warm(self, session: Session, task: TaskRequest, command: str) -> JobCommand | None:
        """The job's command for a warm runner, or None: it runs as it is (said once
        per reason)."""
        try:
            return session.warm_command(command)
        except NotWarm as exc:
            if ("warm", str(exc)) not in self._noted:
                self._noted.add(("warm", str(exc)))
                self.logger.info(
                    f"{task.task_id} (and jobs like it) runs Snakemake's own job command, "
                    f"not a warm runner: {exc}"
                )
            return None

    def _note_placement(self, session: Session, task: TaskRequest) -> None:
        """Say once per value when a job asks for a partition or account other than the
        allocation's: every job runs in the one allocation, shaped by the profile/flags."""
        from snakemake_executor_plugin_hpcflow.batch_sessions import BatchSession

        if not isinstance(session, BatchSession):
            return
        for what, wanted, actual in (
            ("partition", task.partition, session.profile.partition),
            ("account", task.account, session.profile.account),
        ):
            if wanted is None or wanted == actual or (what, wanted) in self._noted:
                continue
            self._noted.add((what, wanted))
            self.logger.warning(
                f"{task.task_id} asks for slurm_{what} {wanted!r}; it runs on the hpcflow "
                f"cluster's batch jobs ({what} {actual or 'default'}). Use --hpcflow-{what} "
                "to choose theirs."
            )

    def get_exec_mode(self) -> ExecMode:
        """How a job's own Snakemake runs: as the local executor's job processes
        (``--mode subprocess``) where Snakemake takes the plugin for a local executor
        (local mode), else as a remote job (``--mode remote``)."""
        return ExecMode.SUBPROCESS if self.workflow.local_exec else ExecMode.REMOTE

    @property
    def job_specific_local_groupid(self) -> bool:
        """Local mode passes the run's ``--local-groupid`` (``local``), as the local
        executor does; a remote job gets its group's id."""
        return not self.workflow.local_exec

    def get_job_args(self, job: JobExecutorInterface, **kwargs: Any) -> str:
        """Snakemake's per-job arguments without ``--unneeded-temp-files``: the job keeps
        its temp outputs, and the main process, which sees the same files, checks them
        and removes them when no job needs them any more, as with the local executor.
        (Removed in the job, a temp output that no other job needs is gone before the
        main process checks that the job made it: ``MissingOutputException``.)"""
        return without_option(super().get_job_args(job, **kwargs), "--unneeded-temp-files")

    def additional_general_args(self) -> str:  # type: ignore[override]
        """What every job's command needs and Snakemake's job-command builder drops
        (Snakemake joins the result as one string, whatever the interface says)."""
        return " ".join(job_command_extras(self.workflow))

    def _watch(self, future: Any) -> Any:
        """``future``, the status thread woken when it ends (None: nothing to watch)."""
        if future is not None:
            future.add_done_callback(lambda _: self._wake())
        return future

    def _wake(self) -> None:
        """Have the status thread check now (from any thread)."""
        self._wakeup.set()  # seen by the next sleep if the thread is not sleeping yet
        sleeping = self._sleeping
        if sleeping is not None:
            loop, event = sleeping
            with contextlib.suppress(RuntimeError):  # its loop has ended meanwhile
                loop.call_soon_threadsafe(event.set)

    async def sleep(self) -> None:
        """Wait until the next check of the running jobs: ``poll_interval`` at most, and
        no longer than until a job's future ends or :meth:`shutdown` is called."""
        seconds = self.next_seconds_between_status_checks
        if seconds is None:  # before __post_init__: Snakemake's own default
            seconds = self.workflow.remote_execution_settings.seconds_between_status_checks
        if not self._wakeup.is_set():
            event = asyncio.Event()
            self._sleeping = (asyncio.get_running_loop(), event)
            if not self._wakeup.is_set():  # a wake between the two checks is not lost
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(event.wait(), seconds)
            self._sleeping = None
        self._wakeup.clear()
        while self.wait and not threading.main_thread().is_alive():
            # The interpreter is exiting without a shutdown (Snakemake found nothing to
            # do): the next check's lock would need a thread pool that no longer takes
            # work, and Snakemake's status thread prints that error on stdout.
            await asyncio.sleep(60)

    async def check_active_jobs(
        self, active_jobs: list[SubmittedJobInfo]
    ) -> AsyncGenerator[SubmittedJobInfo, None]:
        """Record and report finished jobs; yield those still running."""
        # Snakemake starts its status thread before __post_init__ has run.
        session: Session | None = getattr(self, "session", None)
        if session is not None and session.paths is not None:
            session.record.flush()  # the jobs started since the last check, at once
        broken = session.failure() if session is not None and active_jobs else None
        if broken is not None:
            # No job will ever run (e.g. no worker job can be submitted): fail them all.
            for job_info in active_jobs:
                self.report_job_error(job_info, msg=broken)
            return
        running: list[SubmittedJobInfo] = []
        finished: list[tuple[SubmittedJobInfo, Outcome | None]] = []
        lost: list[SubmittedJobInfo] = []
        unsent: list[SubmittedJobInfo] = []
        for job_info in active_jobs:
            future = (job_info.aux or {})["future"]
            if future is None:
                unsent.append(job_info)
            elif not future.done():
                running.append(job_info)
            else:
                outcome = _outcome(future)
                if outcome is None:
                    lost.append(job_info)
                else:
                    finished.append((job_info, outcome))
        if lost and session is not None:
            verdict = session.lost()
            if verdict == "resend":
                for job_info in lost:
                    (job_info.aux or {})["future"] = None
                unsent += lost
            elif verdict == "wait":
                running += lost
            else:
                finished += [(job_info, None) for job_info in lost]
        elif lost:
            finished += [(job_info, None) for job_info in lost]
        for job_info in unsent:
            # Waiting for a continuation allocation: sent once its cluster takes them.
            aux = job_info.aux or {}
            try:
                future = (
                    session.submit(aux["task"], aux["call"], aux.get("warm")) if session else None
                )
            except Exception as exc:  # e.g. the new client closing again: next check
                log.debug("could not send %s yet: %s", job_info.external_jobid, exc)
                future = None
            aux["future"] = self._watch(future)
            running.append(job_info)
        if finished and session is not None:
            from snakemake_executor_plugin_hpcflow.record import Ended

            # One transaction for all of them, before Snakemake hears of any.
            ended = []
            for info, outcome in finished:
                aux = info.aux or {}
                ended.append(Ended(aux["row"], aux["task"].attempt, outcome))
            session.record.ended(ended)
        for job_info, outcome in finished:
            aux = job_info.aux or {}
            if outcome is not None and outcome.state == TaskState.SUCCEEDED:
                stored = await self._stored(job_info) if aux.get("cache") else None
                if stored is None:
                    self.report_job_success(job_info)
                else:
                    self.report_job_error(job_info, msg=stored)
                continue
            keep_restored_updates(job_info.job, self.workflow)
            self.report_job_error(
                job_info,
                msg=failure_message(
                    aux["task"],
                    aux["stdout"],
                    aux["stderr"],
                    outcome,
                    session.where_to_look() if session else "",
                ),
            )
        for job_info in running:
            yield job_info

    async def _stored(self, job_info: SubmittedJobInfo) -> str | None:
        """Store a finished job's outputs in the output cache, as the local executor does
        after a job; what went wrong, or None."""
        from snakemake_executor_plugin_hpcflow import outputcache

        try:
            await outputcache.store(job_info.job)
        except Exception as exc:
            return f"the output cache: {exc}"
        return None

    def print_job_error(self, job_info: SubmittedJobInfo, msg: Any = None, **kwargs: Any) -> None:
        """Snakemake's error report, with the job's log files under ``log:``. A group job's
        report drops ``msg`` (each member says ``message: None``): say it first."""
        aux = job_info.aux or {}
        logs = [str(aux[key]) for key in ("stdout", "stderr") if aux.get(key)]
        if job_info.job.is_group() and msg:
            self.logger.error(msg)
        super().print_job_error(job_info, msg, aux_logs=logs, **kwargs)

    def cancel_jobs(self, active_jobs: list[SubmittedJobInfo]) -> None:
        """Cancel the jobs' futures and kill their processes (Ctrl-C, or a failed run)."""
        if self.session is None:
            return
        futures = [info.aux["future"] for info in active_jobs if info.aux and info.aux["future"]]
        if active_jobs:
            self.session.cancelled = True
        self.session.cancel(futures)

    def shutdown(self) -> None:
        """Stop the status thread, then release the cluster (also after a failure)."""
        try:
            with self.lock:
                self.wait = False  # what Snakemake's shutdown sets, before waking the thread
            self._wake()
            super().shutdown()
        finally:
            if self.session is not None:
                self.session.close()


def make_session(settings: ExecutorSettings, workdir: Path, workflow: Any) -> Session:
    """The session for ``settings.mode``: a local cluster, one pilot allocation, or an
    elastic cluster of worker jobs."""
    from hpcflow.worker.local_cluster import LocalCapacity
    from snakemake_executor_plugin_hpcflow.batch_sessions import ElasticSession, PilotSession
    from snakemake_executor_plugin_hpcflow.session import LocalSession

    snakefile = str(workflow.main_snakefile)
    if settings.mode == "local":
        return LocalSession(workdir, snakefile, LocalCapacity.detect(None, None))
    from hpcflow.backends.registry import get_backend
    from hpcflow.settings import resolve_profile

    name = settings.profile or os.environ.get("HPCFLOW_PROFILE") or "slurm"
    overrides = {
        "nodes": settings.nodes,
        "walltime": settings.walltime,
        "transport": settings.transport,
        "partition": settings.partition,
        "account": settings.account,
    }
    flags = {key: f"--hpcflow-{key}" for key in overrides}
    profile = resolve_profile(name, overrides=overrides, flags=flags).profile
    if profile.backend == "local":
        raise HpcflowError(
            f"--hpcflow-mode {settings.mode} needs a batch profile; {profile.name!r} is local",
            hint="pass --hpcflow-profile slurm (or pbs, or your site's profile), or use "
            "--hpcflow-mode local",
        )
    backend = get_backend(profile.backend, profile=profile)
    if settings.mode == "elastic":
        return ElasticSession(workdir, snakefile, profile, backend)
    return PilotSession(workdir, snakefile, profile, backend)


def _outcome(future: Any) -> Outcome | None:
    """The single outcome a finished future carries, or None if the chunk itself was lost."""
    if future.status != "finished":
        return None
    try:
        outcomes = future.result(timeout=30)
    except Exception as exc:  # a lost worker, a cancelled future: the job failed
        log.warning("hpcflow future %s failed: %s", future.key, exc)
        return None
    return outcomes[0] if outcomes else None
