"""One batched, backing-off, error-tolerant poller per run.

The scheduler is a shared service: a run asks about all of its allocations in ONE
``backend.poll`` call, waits ``initial_delay`` before the first, doubles the interval
(up to ``max_interval``) while nothing changes, returns to ``interval`` on any change,
and spreads its calls with jitter. A failing status command is tolerated (the last
known states stay, the poller backs off) until ``max_failures`` failures in a row.

The poller owns no thread: the caller's loop calls :meth:`Poller.poll_once` with the
current time (cheap when nothing is due) and sleeps until :attr:`Poller.next_due`.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping

from hpcflow.backends.base import AllocationState, AllocationStatus, Backend
from hpcflow.errors import SchedulerCommandError

log = logging.getLogger(__name__)

#: What an allocation that the scheduler stopped reporting is marked as.
LOST_REASON = (
    "The batch system no longer reports this allocation (purged from its memory, and "
    "no accounting database to ask)."
)


class Poller:
    """Tracks a run's allocations and polls their states gently.

    Parameters
    ----------
    backend
        Answers ``poll(ids)`` for many ids at once.
    interval
        Seconds between polls while states change.
    initial_delay
        Seconds from the first tracked id to the first poll.
    max_interval
        Cap for the doubled interval.
    jitter
        Each wait is scaled by a random factor in ``[1 - jitter, 1 + jitter]``.
    max_failures
        Consecutive failed polls after which the error is raised.
    lost_after
        Consecutive polls that omit an id before it is marked lost (state UNKNOWN with
        :data:`LOST_REASON`, reported as a change, no longer polled).
    clock, sleep, rng
        Injectable time source, sleep and random source (tests use fakes).

    Attributes
    ----------
    queries
        How many times ``backend.poll`` was called.
    latest
        The last known status of every tracked id that has one.
    failures
        Consecutive failed polls so far.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        interval: float = 2.0,
        initial_delay: float = 1.0,
        max_interval: float = 60.0,
        jitter: float = 0.1,
        max_failures: int = 5,
        lost_after: int = 3,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if interval <= 0 or max_interval < interval or initial_delay < 0:
            raise ValueError("need 0 < interval <= max_interval and initial_delay >= 0")
        if not 0 <= jitter < 1:
            raise ValueError("jitter must be in [0, 1)")
        if max_failures < 1 or lost_after < 1:
            raise ValueError("max_failures and lost_after must be at least 1")
        self.backend = backend
        self.interval = interval
        self.initial_delay = initial_delay
        self.max_interval = max_interval
        self.jitter = jitter
        self.max_failures = max_failures
        self.lost_after = lost_after
        self.clock = clock
        self.sleep = sleep
        self.rng = rng or random.Random()  # for jitter only
        self.queries = 0
        self.failures = 0
        self.latest: dict[str, AllocationStatus] = {}
        self.next_due: float | None = None
        self._current_interval = interval
        self._tracked: set[str] = set()
        self._missing: dict[str, int] = {}

    # -- what is tracked --------------------------------------------------------

    def track(self, native_ids: Iterable[str], now: float | None = None) -> None:
        """Start watching ``native_ids``; the next poll comes ``initial_delay`` from now
        at the latest, and the backoff restarts (something new is happening)."""
        new = {str(i) for i in native_ids} - self._tracked
        if not new:
            return
        self._tracked |= new
        for native_id in new:
            self._missing.setdefault(native_id, 0)
        now = self.clock() if now is None else now
        self._current_interval = self.interval
        first = now + self.initial_delay
        self.next_due = first if self.next_due is None else min(self.next_due, first)

    def forget(self, native_ids: Iterable[str]) -> None:
        """Stop watching ``native_ids`` and drop what is known about them."""
        for native_id in native_ids:
            self._tracked.discard(str(native_id))
            self.latest.pop(str(native_id), None)
            self._missing.pop(str(native_id), None)

    @property
    def tracked(self) -> frozenset[str]:
        return frozenset(self._tracked)

    @property
    def active(self) -> list[str]:
        """Tracked ids still worth asking about: not final and not lost."""
        return sorted(i for i in self._tracked if not self._settled(i))

    def _settled(self, native_id: str) -> bool:
        status = self.latest.get(native_id)
        lost = self._missing.get(native_id, 0) >= self.lost_after
        return status is not None and (status.state.final or lost)

    def settled(self, native_ids: Iterable[str]) -> bool:
        """True when every id in ``native_ids`` is final or lost."""
        return all(self._settled(str(i)) for i in native_ids)

    # -- polling ----------------------------------------------------------------

    def due(self, now: float | None = None) -> bool:
        now = self.clock() if now is None else now
        return bool(self.active) and self.next_due is not None and now >= self.next_due

    def poll_once(self, now: float | None = None) -> dict[str, AllocationStatus]:
        """Poll if due; return the statuses that changed (empty when nothing was due).

        Raises
        ------
        SchedulerCommandError
            The status command failed ``max_failures`` times in a row.
        """
        now = self.clock() if now is None else now
        if not self.due(now):
            return {}
        ids = self.active
        self.queries += 1
        try:
            answer = self.backend.poll(ids)
        except SchedulerCommandError as exc:
            self.failures += 1
            if self.failures >= self.max_failures:
                log.error("status query failed %d times in a row; giving up", self.failures)
                raise
            log.warning(
                "status query failed (%d of %d tolerated): %s",
                self.failures, self.max_failures - 1, exc,
            )  # fmt: skip
            self._schedule(now, changed=False)
            return {}
        self.failures = 0
        changed = self._merge(ids, answer)
        self._schedule(now, changed=bool(changed))
        return changed

    def _merge(
        self, ids: list[str], answer: Mapping[str, AllocationStatus]
    ) -> dict[str, AllocationStatus]:
        changed: dict[str, AllocationStatus] = {}
        for native_id in ids:
            status = answer.get(native_id)
            if status is None:
                status = self._note_missing(native_id)
                if status is None:
                    continue
            else:
                self._missing[native_id] = 0
            if self.latest.get(native_id) != status:
                self.latest[native_id] = status
                changed[native_id] = status
        return changed

    def _note_missing(self, native_id: str) -> AllocationStatus | None:
        """Count one more poll without ``native_id``; its lost status once that is enough."""
        self._missing[native_id] = self._missing.get(native_id, 0) + 1
        if self._missing[native_id] < self.lost_after:
            return None
        log.warning("allocation %s is no longer reported by the batch system", native_id)
        previous = self.latest.get(native_id)
        return AllocationStatus(
            native_id=native_id,
            state=AllocationState.UNKNOWN,
            native_state=previous.native_state if previous else "",
            reason=LOST_REASON,
        )

    def hurry(self, now: float | None = None) -> None:
        """A change is coming soon (the run's driver has said the run is over, so its
        allocation ends within seconds): poll again one base ``interval`` from now at the
        latest, and restart the backoff, instead of sleeping out a long backed-off wait."""
        now = self.clock() if now is None else now
        self._current_interval = self.interval
        due = now + self.interval
        self.next_due = due if self.next_due is None else min(self.next_due, due)

    def _schedule(self, now: float, *, changed: bool) -> None:
        if changed:
            self._current_interval = self.interval
        else:
            self._current_interval = min(self._current_interval * 2, self.max_interval)
        spread = 1 + self.jitter * (2 * self.rng.random() - 1)
        self.next_due = now + self._current_interval * spread

    # -- convenience ------------------------------------------------------------

    def wait_until_final(
        self, native_ids: Iterable[str], timeout: float
    ) -> dict[str, AllocationStatus]:
        """Track ``native_ids`` and poll until each is final or lost; return their statuses.

        Raises TimeoutError after ``timeout`` seconds (by ``clock``).
        """
        ids = [str(i) for i in native_ids]
        start = self.clock()
        self.track(ids, start)
        deadline = start + timeout
        while not self.settled(ids):
            now = self.clock()
            if now >= deadline:
                states = {i: s.native_state for i, s in self.latest.items() if i in ids}
                raise TimeoutError(
                    f"allocations {', '.join(ids)} not finished after {timeout:g} s: {states}"
                )
            self.poll_once(now)
            if self.settled(ids):
                break
            wake = min(self.next_due if self.next_due is not None else now, deadline)
            self.sleep(max(0.0, wake - self.clock()))
        return {i: self.latest[i] for i in ids}
