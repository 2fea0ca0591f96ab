"""Jobs mode, on the submit host: every task becomes its own batch job, a sweep a job
array; this module plans, submits, follows and records.

* Plan: the instances to run are grouped by task definition into units
  (:mod:`hpcflow.modes.jobs_plan`); a unit of more than one instance is a job array,
  split at the profile's ``max_array_size``.
* Submit: in dependency order, gently (``submit_rate``; ``max_queued_jobs``; a refusal
  because a queue limit was reached means wait, not fail). With ``dependencies:
  scheduler`` a unit is submitted as soon as its upstream units are, held by
  ``afterok``; with ``driver`` it is submitted once its upstream tasks succeeded.
* Follow: each element runs ``python -m hpcflow.modes.jobtask`` and leaves a started
  and an outcome file (:class:`~hpcflow.store.paths.RunPaths`); the batch system is
  asked about every live job and element in ONE poll per interval, only to notice jobs
  that ended without an outcome (walltime, cancel, node failure).
* Record: this process is the single writer of the state database and the memo, as
  the Dask driver is in the other modes. A failed task skips its dependents; their
  queued jobs are cancelled (never left pending as DependencyNeverSatisfied), and
  instances of those jobs that do not depend on the failure are submitted again.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hpcflow.backends.base import AllocationRequest, AllocationState, AllocationStatus, Backend
from hpcflow.backends.poller import Poller
from hpcflow.dag.graph import TaskGraph
from hpcflow.dag.instances import TaskTemplate
from hpcflow.engine.fanout import plan_made
from hpcflow.engine.ledger import OutcomeLedger
from hpcflow.engine.lifecycle import RunLife, RunSummary
from hpcflow.engine.pools import assign_pools
from hpcflow.engine.prepare import PreparedRun, RunOptions
from hpcflow.envs.site import SiteEnvironment
from hpcflow.errors import RunError, SubmitError
from hpcflow.modes.follow import QUIETLY, Follow
from hpcflow.modes.jobs_plan import (
    JobUnit,
    LimitBackoff,
    SubmitThrottle,
    blocking_deps,
    blocking_deps_of,
    plan_units,
    scheduler_dependencies,
)
from hpcflow.modes.pilot import default_poller
from hpcflow.settings.profile import Profile
from hpcflow.store import statedb as st
from hpcflow.store.atomic import write_json_atomic
from hpcflow.store.paths import RunPaths
from hpcflow.store.states import RunStatus
from hpcflow.worker.calls import Outcome

log = logging.getLogger(__name__)

#: Least seconds a job or element may be reported ended before its missing outcome
#: file counts as missing (the file is written before the job exits; a shared file
#: system may show it a little later). Two poll intervals when those are longer.
OUTCOME_GRACE = 2.0
#: Least seconds an array may be reported ended before an element never seen starting
#: counts as never started. An array's status is not always all of its elements': SLURM's
#: qsub wrapper reports the array's id as its last element alone, which can end while an
#: element of the same wave is still starting on a busy node.
UNSTARTED_ELEMENT_GRACE = 30.0

#: Seconds between two rounds of the follow loop (file checks are cheap; the batch
#: system is asked only when the poller is due).
TICK = 0.2


@dataclass
class _Job:
    """A unit and what became of it on the batch system."""

    unit: JobUnit
    native_id: str | None = None
    done: bool = False
    first_attempts: list[int] = field(default_factory=list)
    after: list[str] = field(default_factory=list)  # afterok: native ids it waits for

    @property
    def batch_id(self) -> str:
        """The batch system's id of a submitted job (a RunError for one never submitted)."""
        if self.native_id is None:
            raise RunError(f"job {self.unit.number} has no batch id: it was never submitted")
        return self.native_id


def run_jobs(
    prepared: PreparedRun,
    options: RunOptions,
    profile: Profile,
    backend: Backend,
    follow: Follow = QUIETLY,
) -> RunSummary:
    """Create the run, submit its tasks as batch jobs, and follow them to the end."""
    with RunLife(
        prepared, options, backend=profile.backend, extra={"profile": profile.name, "mode": "jobs"}
    ) as life:
        follow.refuse_detach("jobs", "the submit host records every task's outcome")
        # Before anything is created: a task that names a missing pool, or fits none.
        pools = assign_pools(prepared.graph, profile, prepared.decision.run)
        prepared = life.create()
        if life.nothing_to_run:
            return life.all_cached()
        poller = (follow.poller_factory or default_poller)(backend, profile)
        # This process is the driver (state.sqlite) and the submitting side (submit.sqlite).
        with st.SubmitDB(life.paths.submit_db) as submit:
            follower = JobsFollower(
                prepared, profile, backend, life.db, submit, life.paths, life.run_id, poller,
                follow=follow, pools=pools,
            )  # fmt: skip
            life.db.set_meta(status=RunStatus.RUNNING)
            return life.follow(follower.run, on_stop=follower.cancel_all)


class JobsFollower:
    """Submits a run's units and records what their elements report, until every task
    to run has ended. Single writer of the run's state database."""

    def __init__(
        self,
        prepared: PreparedRun,
        profile: Profile,
        backend: Backend,
        db: st.StateDB,
        submit: st.SubmitDB,
        paths: RunPaths,
        run_id: str,
        poller: Poller,
        *,
        follow: Follow = QUIETLY,
        pools: dict[int, str | None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.prepared = prepared
        #: The pool of each task definition (by index) that runs; none without pools.
        self.pools = pools or {}
        self.graph: TaskGraph = prepared.graph
        self.profile = profile
        self.backend = backend
        self.db = db
        self.submit = submit
        self.paths = paths
        self.run_id = run_id
        self.poller = poller
        self.clock = clock
        self.sleep = sleep
        self.observer = follow.observer
        #: Told once, with the first job's native id (the CLI prints it).
        self.follow = follow
        rows = db.tasks()
        self.state = [r.state for r in rows]
        self.attempts = [r.attempts for r in rows]
        self.dependents = self.graph.dependents()
        self.ledger = OutcomeLedger(self.graph, prepared.factory, db, prepared.memo, run_id)
        self.remaining = sum(1 for s in self.state if s not in st.FINAL_STATES)
        self.chunk_size = profile.max_array_size
        if profile.max_queued_jobs is not None:
            self.chunk_size = min(self.chunk_size, profile.max_queued_jobs)
        self.jobs: dict[int, _Job] = {}
        self.waiting: list[int] = []
        self.unit_of: dict[int, int] = {}
        self.started_ids: dict[int, str | None] = {}  # instance → element's native id
        self.closed: set[int] = set()  # instances whose job element has been judged
        self.ended_since: dict[str, float] = {}  # native id → when first seen ended
        self.throttle = SubmitThrottle(profile.submit_rate, clock)
        # Waits after a refusal: as brisk as polling at first, never longer than its cap.
        self.limit_backoff = LimitBackoff(
            first=min(1.0, profile.poll_interval), cap=profile.max_poll_interval
        )
        self.hold_until = 0.0
        self.grace = max(OUTCOME_GRACE, 2 * profile.poll_interval)
        self.unstarted_grace = max(UNSTARTED_ELEMENT_GRACE, self.grace)
        self.transient_failures = 0
        self.announced = False
        pending = [i for i, s in enumerate(self.state) if s == st.PENDING]
        self._add_units(plan_units(self.graph, pending, self.chunk_size))

    # -- the loop -----------------------------------------------------------------------

    def run(self) -> None:
        self._follow()
        # A fan-out: tasks planned once the tasks they read files after have ended.
        while self._grow():
            self._follow()

    def _grow(self) -> bool:
        """Plan the tasks whose files are now made and queue their jobs (False: none)."""
        grown = plan_made(self.prepared, self.db)
        if grown is None:
            return False
        known = len(self.state)
        self.prepared, self.graph = grown, grown.graph
        self.pools = assign_pools(self.graph, self.profile, grown.decision.run)
        rows = self.db.tasks()
        self.state = [r.state for r in rows]
        self.attempts = [r.attempts for r in rows]
        self.dependents = self.graph.dependents()
        self.ledger = OutcomeLedger(self.graph, grown.factory, self.db, grown.memo, self.run_id)
        self.remaining = sum(1 for s in self.state if s not in st.FINAL_STATES)
        pending = [i for i in range(known, len(self.state)) if self.state[i] == st.PENDING]
        self._add_units(plan_units(self.graph, pending, self.chunk_size, self._next_number()))
        return True

    def _follow(self) -> None:
        last_progress = 0.0
        while self.remaining > 0:
            if self.paths.cancel_request.exists():
                log.warning("cancel requested (%s)", self.paths.cancel_request)
                raise KeyboardInterrupt
            self._submit_ready()
            self._collect()
            self._poll()
            self.db.flush_due()
            self.submit.flush_due()
            self.prepared.memo.flush_due()
            now = self.clock()
            if self.observer is not None and now - last_progress > 0.3:
                self.observer.update(self.db.counts())
                last_progress = now
            if self.remaining > 0 and not self.waiting and not self._live_jobs():
                raise RunError(f"jobs mode stalled with {self.remaining} tasks unfinished")
            if self.remaining > 0:
                self.sleep(TICK)
        if self.observer is not None:
            self.observer.update(self.db.counts())

    def _live_jobs(self) -> list[_Job]:
        return [j for j in self.jobs.values() if j.native_id is not None and not j.done]

    def _add_units(self, units: list[JobUnit]) -> None:
        for unit in units:
            self.jobs[unit.number] = _Job(unit)
            self.waiting.append(unit.number)
            for i in unit.indices:
                self.unit_of[i] = unit.number

    def _next_number(self) -> int:
        return max(self.jobs, default=0) + 1

    # -- submitting ---------------------------------------------------------------------

    def _queued(self) -> int:
        return sum(1 for job in self._live_jobs() for i in job.unit.indices if i not in self.closed)

    def _submit_ready(self) -> None:
        if not self.waiting:
            return
        queued = self._queued()
        healthy: dict[int, str] | None = None
        for number in list(self.waiting):
            job = self.jobs[number]
            live = [i for i in job.unit.indices if self.state[i] == st.PENDING]
            if not live:
                self.waiting.remove(number)
                job.done = True
                continue
            job.unit.indices = live
            blocking = blocking_deps(self.graph, job.unit, self.state)
            depends: list[str] = []
            if blocking:
                if self.profile.dependencies == "driver":
                    continue
                # A job with a failed element never satisfies afterok: wait for the
                # upstream instances themselves instead (submitted without afterok).
                if healthy is None:
                    tainted = self._tainted()
                    healthy = {
                        n: native for n, native in self._native_ids().items()
                        if n not in tainted
                    }  # fmt: skip
                found = scheduler_dependencies(blocking, self.unit_of, healthy)
                if found is None:
                    continue
                depends = found
            cap = self.profile.max_queued_jobs
            if cap is not None and queued + job.unit.size > cap:
                return  # wait for queued jobs to finish (keeps submission order)
            if self.clock() < self.hold_until or self.throttle.wait_time() > 0:
                return
            if not self._submit(job, depends):
                return
            queued += job.unit.size
            if healthy is not None and job.native_id is not None:
                healthy[number] = job.native_id

    def _tainted(self) -> set[int]:
        """Units with an instance that ended without success (afterok on them fails)."""
        return {
            self.unit_of[i]
            for i, state in enumerate(self.state)
            if state in (st.FAILED, st.CANCELLED) and i in self.unit_of
        }

    def _native_ids(self) -> dict[int, str]:
        return {
            n: job.native_id
            for n, job in self.jobs.items()
            if job.native_id is not None and not job.done
        }

    def _submit(self, job: _Job, depends: list[str]) -> bool:
        """Submit ``job``; False when the batch system asked us to wait."""
        unit = job.unit
        job.first_attempts = [self.attempts[i] + 1 for i in unit.indices]
        # Made here, once: the elements only write their files into it (made by many
        # elements at once through different shared-file-system clients, one of them was
        # refused and the element died before it could say it had started).
        self.paths.job_elements_dir(unit.number).mkdir(parents=True, exist_ok=True)
        if unit.size > 1:
            make_output_folders(self.graph, unit.indices)
        write_json_atomic(
            self.paths.job_manifest(unit.number),
            {
                "run_id": self.run_id,
                "task": self._name(unit),
                "indices": unit.indices,
                "ids": [self.graph.instances[i].id for i in unit.indices],
                "attempts": job.first_attempts,
                "mpi_launcher": self.profile.launcher,
                "mpi": self.profile.mpi,
                "software": SiteEnvironment.from_profile(
                    self.profile, commands_here=False
                ).to_dict(),
            },
        )
        request = self._request(unit, depends)
        script = self.paths.job_script(unit.number)
        script.write_text(self.backend.render(request), encoding="utf-8")
        self.throttle.note()
        try:
            native_id = self.backend.submit(script, request)
        except SubmitError as exc:
            return self._refused(job, exc, depends)
        self.transient_failures = 0
        self.limit_backoff.accepted()
        job.native_id = native_id
        # The lease names the job at once: a re-run stays out while it is queued or
        # running, even after this process (the run's driver) was killed.
        self.prepared.lock.note_allocations(self.backend.name, [native_id])
        job.after = list(depends)
        self.waiting.remove(unit.number)
        self.submit.add_allocation(
            st.AllocationRow(
                native_id=native_id,
                number=unit.number,
                backend=self.backend.name,
                state=AllocationState.QUEUED.value,
                native_state=None,
                reason=None,
                submitted=time.time(),
                updated=None,
                script=str(script),
                stdout=str(request.stdout),
                stderr=str(request.stderr),
                pool=self.pools.get(unit.spec_index),
            )
        )
        self.poller.track([native_id])
        log.info(
            "job %d (%s, %d instance%s) submitted as %s %s%s",
            unit.number, self._name(unit), unit.size, "" if unit.size == 1 else "s",
            self.backend.name, native_id, f" after {', '.join(depends)}" if depends else "",
        )  # fmt: skip
        if not self.announced:
            self.announced = True
            self.follow.submitted(native_id, self.paths)
        return True

    def _refused(self, job: _Job, exc: SubmitError, depends: list[str]) -> bool:
        if exc.limit and self._queued() > 0:
            wait = self.limit_backoff.refused()
            log.warning("queue limit reached (%s); waiting %.0fs", exc.message, wait)
            self.hold_until = self.clock() + wait
            return False
        if exc.transient and self.transient_failures < self.profile.submit_retries:
            self.transient_failures += 1
            wait = self.limit_backoff.refused()
            log.warning("submission failed (%s); retrying in %.0fs", exc.message, wait)
            self.hold_until = self.clock() + wait
            return False
        if depends and "depend" in exc.message.lower():
            # An upstream job ended (and was purged) between our look and the
            # submission: wait for its outcome files instead, then submit without it.
            log.warning("dependency refused (%s); waiting for the upstream outcome", exc)
            self.hold_until = self.clock() + self.grace
            return False
        raise exc

    def _name(self, unit: JobUnit) -> str:
        return self.graph.templates[unit.spec_index].spec.name

    def _request(self, unit: JobUnit, depends: list[str]) -> AllocationRequest:
        profile = self.profile.for_pool(self.pools.get(unit.spec_index))
        return job_request(self.graph, unit, profile, self.paths, self.run_id, depends)

    # -- collecting outcomes ------------------------------------------------------------

    def _collect(self) -> None:
        starts: list[tuple[int, int]] = []
        outcomes: list[tuple[int, list[Outcome]]] = []
        for job in self._live_jobs():
            # One listing per job, then only the files that appeared are read.
            try:
                names = set(os.listdir(self.paths.job_elements_dir(job.unit.number)))
            except FileNotFoundError:
                continue
            for k, i in enumerate(job.unit.indices):
                if i in self.closed:
                    continue
                if i not in self.started_ids:
                    started = self.paths.job_started(job.unit.number, k)
                    if started.name not in names:
                        continue
                    marker = _read_json(started)
                    if marker is None:
                        continue
                    element = marker.get("native_id") or None
                    self.started_ids[i] = element
                    if element:
                        self.poller.track([element])
                    starts.append((i, job.first_attempts[k]))
                outcome = self.paths.job_outcome(job.unit.number, k)
                if outcome.name not in names:
                    continue
                done = _read_json(outcome)
                if done is not None:
                    outcomes.append((i, [Outcome.from_dict(o) for o in done["outcomes"]]))
        if starts:
            self.db.start_attempts(starts)
            for i, _ in starts:
                self.state[i] = st.RUNNING
        if outcomes:
            self._record(outcomes)

    def _record(self, results: list[tuple[int, list[Outcome]]]) -> None:
        """Store attempts, new states and memo entries in one go, through the ledger."""
        new_states = self.ledger.record(results)
        for i, attempts in results:
            self.attempts[i] = attempts[-1].attempt
        self._ended(new_states)

    def _ended(self, new_states: dict[int, st.TaskState]) -> None:
        """Bookkeeping for instances that reached a final state; skips their dependents."""
        failed = []
        for i, state in new_states.items():
            self.state[i] = state
            self.closed.add(i)
            self.remaining -= 1
            if state != st.SUCCEEDED:
                failed.append(i)
        if failed:
            self._skip(failed)
        self._close_finished_jobs()

    def _skip(self, failed: list[int]) -> None:
        skipped = self.ledger.skip_downstream(
            self.dependents, failed, lambda i: self.state[i] in (st.PENDING, st.RUNNING)
        )
        for i in skipped:
            self.state[i] = st.SKIPPED
            self.closed.add(i)
        self.remaining -= len(skipped)
        # Queued jobs that wait (afterok) on a job with a failed element wait for a
        # dependency that can no longer be met: cancel them, and queue again their
        # instances that do not depend on the failure.
        tainted = {self.jobs[n].native_id for n in self._tainted()}
        doomed = [
            job
            for job in self._live_jobs()
            if (
                any(self.state[i] == st.SKIPPED for i in job.unit.indices)
                or tainted.intersection(job.after)
            )
            and not any(i in self.started_ids for i in job.unit.indices)
        ]
        if not doomed:
            return
        self.backend.cancel([job.native_id for job in doomed if job.native_id])
        again: list[int] = []
        for job in doomed:
            job.done = True
            job_id = job.batch_id
            self.submit.update_allocation(
                job_id, AllocationState.CANCELLED.value, None, "an upstream task failed"
            )
            self.poller.forget([job_id])
            again.extend(i for i in job.unit.indices if self.state[i] == st.PENDING)
        if again:
            units = plan_units(self.graph, again, self.chunk_size, self._next_number())
            self._add_units(units)
            log.info("%d task(s) queued again in %d new job(s)", len(again), len(units))

    def _close_finished_jobs(self) -> None:
        for job in self._live_jobs():
            if all(i in self.closed for i in job.unit.indices):
                job.done = True
                job_id = job.batch_id
                status = self.poller.latest.get(job_id)
                failed = any(self.state[i] != st.SUCCEEDED for i in job.unit.indices)
                state = AllocationState.FAILED if failed else AllocationState.COMPLETED
                if status is None or not status.state.final:
                    self.submit.update_allocation(job_id, state.value, None, None)
                elif failed and status.state is AllocationState.COMPLETED:
                    # PBS reports a finished array as completed (C/F) whatever its
                    # elements' exit codes: a job with a failed task has failed.
                    self.submit.update_allocation(
                        job_id, state.value, status.native_state, status.reason
                    )
                self.poller.forget(
                    [job_id, *(self.started_ids.get(i) or "" for i in job.unit.indices)]
                )

    # -- the batch system's view --------------------------------------------------------

    def _poll(self) -> None:
        changed = self.poller.poll_once()
        native_of = {job.native_id: job for job in self._live_jobs()}
        for native_id, status in changed.items():
            if native_id in native_of:
                self.submit.update_allocation(
                    native_id, status.state.value, status.native_state, status.reason
                )
        now = self.clock()
        lost: list[tuple[int, AllocationStatus, bool]] = []
        for job in self._live_jobs():
            job_id = job.batch_id
            for i in job.unit.indices:
                if i in self.closed:
                    continue
                started = i in self.started_ids
                watched = (self.started_ids.get(i) or job_id) if started else job_id
                seen = self.poller.latest.get(watched)
                if seen is None or not self.poller.settled([watched]):
                    continue
                first = self.ended_since.setdefault(watched, now)
                array = len(job.unit.indices) > 1
                grace = self.grace if started or not array else self.unstarted_grace
                if now - first >= grace:
                    lost.append((i, seen, started))
        if lost:
            self._collect()  # a last look for outcome files written meanwhile
            self._lost([(i, s, started) for i, s, started in lost if i not in self.closed])

    def _lost(self, lost: list[tuple[int, AllocationStatus, bool]]) -> None:
        """Instances whose job or element ended without an outcome file.

        A job that never started because an upstream task failed (SLURM's
        ``--kill-on-invalid-dep``) is judged after the failures it waited for, so its
        tasks end as skipped, not failed.
        """
        if not lost:
            return
        waited = [
            (i, status, started)
            for i, status, started in lost
            if not started and blocking_deps_of(self.graph, i, self.state)
        ]
        first = [item for item in lost if item not in waited]
        self._fail_lost(first)
        self._fail_lost([item for item in waited if item[0] not in self.closed])

    def _fail_lost(self, lost: list[tuple[int, AllocationStatus, bool]]) -> None:
        if not lost:
            return
        records = []
        new_states: dict[int, st.TaskState] = {}
        now = time.time()
        for i, status, started in lost:
            job = self.jobs[self.unit_of[i]]
            k = job.unit.indices.index(i)
            why = status.reason or status.native_state or status.state.value
            if started:
                message = (
                    f"batch job {self.started_ids.get(i) or job.native_id} ended "
                    f"({status.state.value}: {why}) before the task finished; its "
                    f"output is in {self.paths.jobs_dir} (job {job.unit.number})"
                )
            else:
                message = (
                    f"batch job {job.native_id} ended ({status.state.value}: {why}) "
                    "before the task started"
                )
            # Cancelled outside hpcflow (scancel, an operator) counts as a failure: the
            # task did not run to the end, and what depends on it cannot run.
            state = st.FAILED
            new_states[i] = state
            if started:
                records.append(
                    st.AttemptRecord(
                        task_idx=i,
                        attempt=job.first_attempts[k],
                        state=st.FAILED,
                        exit_code=status.exit_code,
                        started=None,
                        ended=now,
                        peak_rss=None,
                        host=None,
                        message=message,
                    )
                )
            else:
                self.db.set_states([(i, state)], message=message)
            log.warning("%s: %s", self.graph.instances[i].id, message)
        with_attempts = {r.task_idx: new_states[r.task_idx] for r in records}
        if records:
            self.db.record_attempts(records, with_attempts)
        self._ended(new_states)

    # -- stopping -----------------------------------------------------------------------

    def cancel_all(self, reason: str) -> None:
        """Cancel every live job (one call), e.g. on Ctrl-C."""
        live = [job for job in self._live_jobs() if job.native_id]
        if not live:
            return
        ids = [job.native_id for job in live if job.native_id]
        log.warning("cancelling jobs %s", ", ".join(ids))
        try:
            self.backend.cancel(ids)
        finally:
            for job in live:
                job.done = True
                job_id = job.batch_id
                self.submit.update_allocation(
                    job_id, AllocationState.CANCELLED.value, None, reason[:500]
                )


def job_request(
    graph: TaskGraph,
    unit: JobUnit,
    profile: Profile,
    paths: RunPaths,
    run_id: str,
    depends: list[str],
) -> AllocationRequest:
    """The batch job of ``unit``: its task's resources, an array when it has several
    instances, ``afterok`` on ``depends``; it runs :mod:`hpcflow.modes.jobtask`.
    ``profile`` is already shaped by the task's pool (partition, account, setup...)."""
    template = graph.templates[unit.spec_index]
    res = template.resources
    mpi = res.ranks > 1
    number = unit.number
    command = [
        profile.python or sys.executable,
        "-m",
        "hpcflow.modes.jobtask",
        str(paths.run_dir),
        str(number),
    ]
    return AllocationRequest(
        run_id=run_id,
        job_name=f"hpcflow-{run_id}-{template.spec.name}",
        run_dir=paths.run_dir,
        stdout=paths.job_stdout(number),
        stderr=paths.job_stderr(number),
        command=command,
        nodes=res.nodes or 1,
        # An MPI task: one batch task per rank, its cpus shared out over them.
        ntasks=res.ranks if mpi else 1,
        cpus_per_task=max(1, -(-res.cpus // res.ranks)) if mpi else res.cpus,
        # A share of a GPU (gpus: 0.5) is a whole one for a job of its own.
        gpus_per_node=math.ceil(res.gpus),
        gpu_kind=(res.gpu_kind or profile.gpu_kind) if res.gpus else None,
        memory_per_node=res.memory,
        walltime=job_walltime(template, profile),
        partition=profile.partition,
        account=profile.account,
        qos=profile.qos,
        constraint=profile.constraint,
        overcommit=False,
        extra_directives=tuple(profile.extra_directives),
        setup_lines=tuple(profile.module_lines() + list(profile.setup)),
        env={**profile.env, "HPCFLOW_RUN_ID": run_id, "HPCFLOW_JOB": str(number)},
        workdir=graph.loaded.base_dir,
        task_name=template.spec.name,
        array_size=unit.size if unit.size > 1 else 0,
        array_parallelism=profile.array_parallelism,
        depends_on=tuple(depends),
    )


def make_output_folders(graph: TaskGraph, indices: list[int]) -> None:
    """Make the folders of these instances' declared outputs once, here: the elements of
    an array start on many nodes at once, and a shared file system can answer their
    simultaneous ``mkdir`` of one folder through different clients with EEXIST or ENOENT
    (seen on GlusterFS). The nodes still make whatever is missing."""
    folders = set()
    for i in indices:
        inst = graph.instances[i]
        for output in inst.outputs:
            folders.add(os.path.dirname(os.path.join(inst.workdir, output)))
    for folder in sorted(folders):
        if not folder:
            continue
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as exc:
            log.debug("could not make output folder %s here: %s", folder, exc)


def render_all(
    graph: TaskGraph, profile: Profile, backend: Backend, paths: RunPaths, run_id: str
) -> list[tuple[JobUnit, str]]:
    """Every job a fresh run of ``graph`` would submit, with its script (``hpcflow
    render``). Dependencies name the upstream jobs as ``JOB<N>`` until they have ids."""
    units = plan_units(
        graph,
        graph.order,
        min(profile.max_array_size, profile.max_queued_jobs or profile.max_array_size),
    )
    unit_of = {i: u.number for u in units for i in u.indices}
    pools = assign_pools(graph, profile)
    out = []
    for unit in units:
        depends: list[str] = []
        if profile.dependencies == "scheduler":
            upstream = {unit_of[d] for i in unit.indices for d in graph.instances[i].deps}
            depends = [f"JOB{n}" for n in sorted(upstream)]
        shaped = profile.for_pool(pools.get(unit.spec_index))
        request = job_request(graph, unit, shaped, paths, run_id, depends)
        out.append((unit, backend.render(request)))
    return out


def job_walltime(template: TaskTemplate, profile: Profile) -> float | None:
    """A job's time limit: the task's own bound (``resources.walltime``, else its
    ``timeout``) for every attempt it may make, plus a minute; else the profile's."""
    per_attempt = template.resources.walltime or template.timeout
    if per_attempt is None:
        return profile.walltime
    retries = template.retries
    waits = sum(retries.delay(n) for n in range(1, retries.attempts + 1))
    return per_attempt * (1 + retries.attempts) + waits + 60.0


def _read_json(path: Path) -> dict | None:  # type: ignore[type-arg]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None
