"""Pilot allocations with this process as their Dask client (the Snakemake plugin's pilot mode).

Each allocation is pilot mode's own: planned by :func:`~hpcflow.modes.pilot.plan_pilot`,
submitted by :func:`~hpcflow.modes.pilot.submit_allocation`, asked about by pilot mode's
poller; the scheduler runs on rank 0 and the workers on ranks 2.., but rank 1, where
hpcflow's driver would run, only waits (``PilotConfig.external_client``): the process that
holds the allocation sends the work itself. When an allocation stops early, pilot mode's
rule (:func:`~hpcflow.modes.pilot.continuation_due`) decides whether a continuation
allocation follows; the work the first took with it is then sent again to the next.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from hpcflow.backends.base import AllocationState, AllocationStatus, Backend
from hpcflow.bootstrap.config import PilotConfig
from hpcflow.bootstrap.preflight import check_transport
from hpcflow.errors import AllocationFailed, HpcflowError
from hpcflow.modes.pilot import continuation_due, default_poller, submit_allocation
from hpcflow.modes.pilot_plan import plan_pilot
from hpcflow.modes.workers import WorkerSource
from hpcflow.settings.profile import Profile
from hpcflow.store import statedb as st
from hpcflow.store.lock import RunLock
from hpcflow.store.paths import RunPaths
from hpcflow.transport.certificates import create_credentials
from hpcflow.transport.security import check_choice, security_for

log = logging.getLogger(__name__)

#: Seconds an allocation may go on after losing its Dask scheduler before it is given up
#: (it normally ends within seconds: the scheduler is its batch script's).
LOST_SCHEDULER_GRACE = 120.0

#: What to do with work whose futures came back lost: see :meth:`PilotClientAllocation.lost`.
Verdict = Literal["failed", "wait", "resend"]


def check_pilot_client(profile: Profile, backend: Backend) -> None:
    """Refuse, before anything is created, a transport the allocation could not use."""
    check_choice(
        profile.transport,
        require_encryption=profile.require_encryption,
        shared_machine=backend.name != "local",
    )
    check_transport(profile.transport, profile.python)


class PilotClientAllocation(WorkerSource):
    """ONE allocation at a time for the run in ``paths``, this process its Dask client.

    With ``resubmit: true`` in the profile, an allocation that hits its walltime (or loses
    a node) is followed by a continuation allocation, up to ``max_resubmits`` of them.
    ``scheduler_timeout``: seconds to wait for an allocation's scheduler (None: as long as
    it is queued). ``lease``: the workflow's lease this process holds, which names each
    allocation as soon as it is submitted (it stays live while one is queued or running).
    """

    def __init__(
        self,
        profile: Profile,
        backend: Backend,
        paths: RunPaths,
        run_id: str,
        base_dir: Path,
        *,
        scheduler_timeout: float | None = None,
        lease: RunLock | None = None,
    ) -> None:
        super().__init__(profile, backend, paths, run_id, base_dir)
        self.scheduler_timeout = scheduler_timeout
        #: The workflow's lease the client holds: each allocation is named in it at once.
        self.lease = lease
        self._client: Any = None
        self.native_id: str | None = None
        #: The allocation's number in this run: 1, then 2, 3... for continuations.
        self.number = 1
        self.config: PilotConfig | None = None
        self._continuation: threading.Thread | None = None
        #: Set while a continuation allocation is being submitted and connected to.
        self._continuing = threading.Event()
        self._broken: str | None = None
        self._stopping = threading.Event()
        self._lost_since: float | None = None
        self._last_poll = 0.0
        #: submit.sqlite is written from the caller's threads and the continuation's.
        self._submit_lock = threading.Lock()

    def start(self) -> Any:
        """Submit the first allocation and connect to its scheduler; returns the client.
        Call :meth:`close` afterwards, also when this raises."""
        self._submit(1)
        self._connect()
        return self._client

    @property
    def client(self) -> Any:
        """The current allocation's Dask client while work can be sent to it: connected,
        and no continuation on its way (else None)."""
        client = self._client  # (the status thread may replace it meanwhile)
        if self._continuing.is_set() or self._broken is not None or client is None:
            return None
        return client if client.status == "running" else None

    def _submit(self, number: int) -> None:
        """Plan and submit allocation ``number`` (its ranks' configuration written first)."""
        paths = self.paths
        plan = plan_pilot(self.profile, paths, self.run_id, self.base_dir, number)
        config = replace(plan.config, external_client=True)
        plan = replace(plan, config=config)
        self.config = config
        if config.transport == "tls" and number == 1:
            # Every allocation of the run uses these (the files stay in the run folder).
            create_credentials(paths.run_dir, self.run_id)
        config.write(paths.pilot_config)
        retries = self.profile.submit_retries
        with self._submit_lock, st.SubmitDB(paths.submit_db) as submit:
            self.native_id = submit_allocation(
                self.backend, plan, paths, submit, number, retries=retries, lock=self.lease
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

        if self.config is None:
            raise RuntimeError("the allocation has not been submitted")
        address = self._wait_for_scheduler()
        self._client = Client(
            address,
            timeout=120,
            set_as_default=False,
            security=security_for(self.paths.run_dir, self.config.transport),
        )
        log.info("hpcflow run %s: connected to the scheduler at %s", self.run_id, address)

    def _wait_for_scheduler(self) -> str:
        """The scheduler's address once rank 0 has published it; the allocation's state
        is asked with pilot mode's ONE backing-off poller meanwhile (it may fail or stay
        queued)."""
        native_id, paths = self.native_id, self.paths
        if native_id is None:
            raise RuntimeError("the allocation has not been submitted")
        poller = default_poller(self.backend, self.profile)
        poller.track([native_id])
        address_file = paths.scheduler_address
        started = time.monotonic()
        while not self._stopping.is_set():
            address = published_address(address_file, native_id)
            if address is not None:
                return address
            poller.poll_once()
            status = poller.latest.get(native_id)
            if status is not None and status.state.final:
                raise AllocationFailed(
                    native_id,
                    status.native_state,
                    status.reason or "it ended before its Dask scheduler started",
                    [
                        str(paths.allocation_stdout(self.number)),
                        str(paths.allocation_stderr(self.number)),
                    ],
                )
            waited = time.monotonic() - started
            if self.scheduler_timeout is not None and waited > self.scheduler_timeout:
                raise AllocationFailed(
                    native_id,
                    status.native_state if status else "UNKNOWN",
                    f"no Dask scheduler within {self.scheduler_timeout:.0f}s",
                    [str(paths.allocation_stderr(self.number))],
                )
            time.sleep(0.2)
        raise AllocationFailed(native_id, "CANCELLED", "the plugin was shut down", [])

    # -- losing an allocation, and continuing it ------------------------------------------

    def failure(self) -> str | None:
        """Why no work will ever run here (the continuation allocation failed), or None."""
        return self._broken

    def lost(self) -> Verdict:
        """What to do with work whose futures came back lost (their worker or the whole
        cluster went away): ``"failed"`` (it failed), ``"wait"`` (not known yet: ask again
        later) or ``"resend"`` (a continuation allocation is coming: send it again once
        :attr:`client` takes it).

        A lost future while the client is still connected is a failure (Dask already
        retried it on other workers). A lost connection means the allocation is ending:
        its state then decides, asked at most once per poll interval.
        """
        if self._continuing.is_set():
            return "resend"
        if self._broken is not None:
            return "failed"
        client = self._client
        if client is not None and client.status == "running":
            self._lost_since = None
            return "failed"
        now = time.monotonic()
        if self._lost_since is None:
            self._lost_since = now
        if now - self._last_poll < min(self.profile.poll_interval, 5.0):
            return "wait"
        self._last_poll = now
        status = self._poll("poll after losing the scheduler")
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
        self._record_allocation(status.state.value, status.native_state)
        why = continuation_due(status, False, self.profile, self.number)
        if why is None:
            return "failed"
        log.warning(
            "allocation %s %s; submitting continuation %d and sending its unfinished jobs there",
            self.native_id,
            why,
            self.number + 1,
        )
        self._continuing.set()
        old, self._client = self._client, None
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
        except Exception as exc:  # any reason: the work waiting for it must fail
            if not self._stopping.is_set():
                log.error("continuation allocation failed: %s", exc)
            self._broken = f"the continuation allocation failed: {exc}"
        finally:
            self._continuing.clear()

    # -- the end ----------------------------------------------------------------------------

    def close(self) -> None:
        """Shut the allocation's Dask cluster down (the allocation then ends by itself);
        cancel the allocation if it is still there after a grace period."""
        self._stopping.set()
        if self._continuation is not None:
            self._continuation.join(timeout=60)
        client, self._client = self._client, None
        if client is not None:
            try:
                client.shutdown()
            except Exception as exc:  # the scheduler may be gone already
                log.debug("shutdown: %s", exc)
            _close_quietly(client)
        if self.native_id is None:
            return
        # After a shutdown the allocation ends by itself within seconds; one still queued
        # (Ctrl-C while waiting for it) is cancelled at once.
        deadline = time.monotonic() + (20.0 if client is not None else 0.0)
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

    def _poll(self, what: str) -> AllocationStatus | None:
        """The current allocation's state, or None (unknown, or the poll failed)."""
        if self.native_id is None:
            return None
        try:
            return self.backend.poll([self.native_id]).get(self.native_id)
        except HpcflowError as exc:
            log.debug("%s: %s", what, exc)
            return None

    def _end_allocation(self) -> None:
        """Cancel the current allocation (it is no use any more)."""
        if self.native_id is None:
            return
        status = self._poll("poll before cancelling")
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
        """The allocation's last state in submit.sqlite (for `hpcflow status`)."""
        if self.native_id is None:
            return
        try:
            with self._submit_lock, st.SubmitDB(self.paths.submit_db) as submit:
                submit.update_allocation(self.native_id, state, native_state, None)
        except Exception as exc:  # sqlite3 errors: nothing else depends on it
            log.debug("could not record allocation %s: %s", self.native_id, exc)

    def where_to_look(self) -> str:
        """The current allocation's logs (worth reading when work was lost)."""
        if self.native_id is None:
            return ""
        return (
            f"Allocation {self.native_id}'s logs: {self.paths.allocation_stdout(self.number)} "
            f"and {self.paths.allocation_stderr(self.number)}. "
        )

    def max_cpus(self) -> int:
        return self.config.threads_per_worker if self.config else 1

    def gpus(self) -> int:
        return self.config.gpus_per_worker if self.config else 0


def _close_quietly(client: Any) -> None:
    """Close a Dask client that may have lost its scheduler (never waits long, never raises)."""
    if client is None:
        return
    try:
        client.close(timeout=10)
    except Exception as exc:  # already closed, or closing after losing its scheduler
        log.debug("close: %s", exc)


def published_address(path: Path, native_id: str) -> str | None:
    """The address rank 0 wrote to ``scheduler.json`` for this allocation, if any yet."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if str(data.get("allocation")) != str(native_id):
        return None
    address = data.get("address")
    return str(address) if address else None
