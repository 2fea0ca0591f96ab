"""One live driver per workflow: the workflow's lease (:mod:`hpcflow.store.lease`), held
by whichever process drives its run, on this host or inside an allocation.

The process that plans a run takes the lease before it writes anything (:meth:`RunLock.
acquire`) and renews it from a thread every few seconds. A run submitted to a batch
system names its allocations in the lease before anything else can happen
(:meth:`RunLock.note_allocations`), so that the lease stays live while they are queued
even when the submitting command has returned (``--detach``) or was killed; the driver
inside the allocation then takes the lease over for the same run (:meth:`RunLock.adopt`)
and renews it itself. Anyone else is refused with the run that holds it and how to
cancel it, until the lease is stale: then it is taken over, and the taker says so.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from hpcflow.errors import RunLockedError
from hpcflow.store import lease as ls
from hpcflow.store.private import private_dir

log = logging.getLogger(__name__)


class RunLock:
    """The workflow's lease, whose file is ``path`` with the suffix ``.lease``.

    ``ask`` tells which of a lease's allocations are still queued or running
    (:func:`hpcflow.backends.registry.allocations_live`); without it a lease naming
    allocations stays live once its holder is gone."""

    def __init__(
        self,
        path: Path,
        *,
        ask: ls.AllocationsLive | None = None,
        period: float = ls.LEASE_PERIOD,
        ttl: float = ls.LEASE_TTL,
        on_lost: Callable[[str], None] | None = None,
        adopt_patience: float = ls.ADOPT_PATIENCE,
    ) -> None:
        self.path = path.with_suffix(".lease")
        self.ask = ask
        self.period = period
        self.ttl = ttl
        self.adopt_patience = adopt_patience
        #: Called (from the renewal thread) when another run took the lease: stop driving.
        #: (A run that learns its folder later sets it then: ``lease_lost(paths)``.)
        self.on_lost = on_lost
        self._record: ls.LeaseRecord | None = None
        self._kept = False  # handed to the driver of an allocation: leave the file
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()

    @property
    def held(self) -> bool:
        return self._record is not None

    def acquire(self, info: dict[str, Any]) -> None:
        """Take the lease for run ``info["run_id"]`` (``starting`` before it has an id),
        or raise :class:`RunLockedError` naming the run that holds it."""
        self._take(str(info.get("run_id", "starting")), adopt=False, workflow=str(info.get(
            "workflow", "")))  # fmt: skip

    def adopt(self, run_id: str, allocation: str | None = None) -> None:
        """The driver of run ``run_id`` inside its allocation (``allocation``, its batch
        id): hold the lease its submitter took for that run (or take it as any run
        would). Raises :class:`RunLockedError` when another run holds it: this run must
        not drive."""
        self._take(run_id, adopt=True, allocation=allocation)

    def _take(
        self, run_id: str, *, adopt: bool, workflow: str = "", allocation: str | None = None
    ) -> None:
        private_dir(self.path.parent, top=self.path.parent.parent)
        for _ in range(20):
            mine = ls.LeaseRecord.new(run_id, workflow, self.ttl)
            mine = replace(mine, holder_allocation=allocation)
            if ls.create(self.path, mine):
                return self._hold(mine)
            current = ls.read_lease(self.path)
            if current is None:
                continue  # released meanwhile
            if adopt and current.run_id != run_id:
                current = self._ours_yet(run_id, current)
                if current is None:
                    continue  # released meanwhile
            if adopt and current.run_id == run_id:
                submitter = current.submitter or current.holder
                mine = replace(current, token=mine.token, holder=mine.holder,
                               expires=mine.expires, renewed=mine.renewed,
                               submitter=submitter, holder_allocation=allocation)  # fmt: skip
                ls.rewrite(self.path, mine)
                return self._hold(mine)
            verdict = ls.judge(current, self.ask)
            if verdict.live:
                raise _locked(current, verdict)
            if ls.break_stale(self.path, current, replace(mine, workflow=current.workflow)):
                log.warning(
                    "took over the workflow's lease from run %s: %s (%s)",
                    current.run_id, verdict.why, self.path,
                )  # fmt: skip
                return self._hold(mine)
        raise RunLockedError(
            f"the workflow's lease {self.path} keeps changing hands",
            hint="another `hpcflow run` of this workflow is starting; try again",
        )

    def _ours_yet(self, run_id: str, current: ls.LeaseRecord) -> ls.LeaseRecord | None:
        """The lease as read again until it names ``run_id`` or :attr:`adopt_patience`
        has passed (None once it is released): the submitter named this run before
        submitting it, so another run's name may be a node's stale view of the file."""
        deadline = time.monotonic() + self.adopt_patience
        while current.run_id != run_id and time.monotonic() < deadline:
            time.sleep(min(0.5, self.adopt_patience))
            again = ls.read_lease(self.path)
            if again is None:
                return None
            current = again
        if current.run_id != run_id:
            log.info("the workflow's lease names run %s, not this run %s", current.run_id, run_id)
        return current

    def _hold(self, record: ls.LeaseRecord) -> None:
        self._record = record
        self._stop.clear()
        self._thread = threading.Thread(target=self._renew_loop, name="hpcflow-lease",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def set_run(self, run_id: str) -> None:
        """The run now has its id: the lease names it."""
        self._update(run_id=run_id)

    def note_allocations(self, backend: str, ids: Sequence[str]) -> None:
        """Allocations were submitted for the run: the lease is live while they are queued
        or running, whoever holds it. Call right after each submission."""
        with self._guard:
            current = ls.read_lease(self.path)
            if current is None or self._record is None or current.run_id != self._record.run_id:
                return
            known = tuple(dict.fromkeys([*current.allocations, *ids]))
            updated = replace(current, backend=backend, allocations=known)
            ls.rewrite(self.path, updated)
            if current.token == self._record.token:
                self._record = updated

    def hand_over(self) -> None:
        """This process stops renewing but leaves the lease: the run's allocations (and
        the driver inside) hold it from now on (``--detach``; a driver that drained for a
        continuation)."""
        self._kept = True
        self._stop_thread()

    def release(self) -> None:
        """Stop renewing and remove the lease if it is still this process's (idempotent)."""
        self._stop_thread()
        with self._guard:
            record, self._record = self._record, None
        if record is not None and not self._kept:
            ls.remove(self.path, record.token)

    # -- renewal -------------------------------------------------------------------

    def _update(self, **changes: Any) -> None:
        with self._guard:
            if self._record is None:
                return
            current = ls.read_lease(self.path)
            if current is None or current.token != self._record.token:
                return
            self._record = replace(current, **changes).renewed_now(self.ttl)
            ls.rewrite(self.path, self._record)

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.period):
            try:
                if not self._renew_once():
                    return
            except OSError as exc:  # a shared file system hiccup: try again next period
                log.warning("cannot renew the workflow's lease %s: %s", self.path, exc)

    def _renew_once(self) -> bool:
        """Renew; False when this process no longer holds the lease (stop renewing)."""
        with self._guard:
            record = self._record
            if record is None:
                return False
            current = ls.read_lease(self.path)
            if current is not None and current.token == record.token:
                self._record = replace(current).renewed_now(self.ttl)
                ls.rewrite(self.path, self._record)
                return True
            if current is not None and current.run_id == record.run_id:
                # The driver inside the run's allocation holds it now.
                log.info("the driver of run %s holds the workflow's lease now", record.run_id)
                self._kept = True
                return False
            if current is None and record.allocations:
                # The driver inside the run's allocation took it over and has already
                # released it (its run ended between two renewals here).
                log.info("the driver of run %s took the lease and released it", record.run_id)
                self._kept = True
                return False
        why = "the lease is gone" if current is None else f"run {current.run_id} holds it now"
        log.error("run %s lost the workflow's lease %s: %s", record.run_id, self.path, why)
        if self.on_lost is not None:
            self.on_lost(why)
        return False

    def _stop_thread(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)


def _locked(record: ls.LeaseRecord, verdict: ls.Verdict) -> RunLockedError:
    run = record.run_id
    if run in ("starting", "?"):
        what = "starting" if run == "starting" else "holding its lease"
        return RunLockedError(
            f"another run of this workflow is active: a run {what} ({verdict.why})",
            hint="wait for it to start, then see `hpcflow runs`",
        )
    why = verdict.why
    if record.allocations and "allocation" not in why:
        # Say where it runs too: cancelling it cancels these.
        why += f"; its {record.backend or 'batch'} allocation(s) {', '.join(record.allocations)}"
    return RunLockedError(
        f"another run of this workflow is active: run {run} ({why})",
        hint=f"wait for it (`hpcflow status {run}`), or stop it with `hpcflow cancel {run}`",
    )
