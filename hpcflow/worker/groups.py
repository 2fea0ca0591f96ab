"""The process groups a worker process has started, so that a cancel can kill them all.

Every task attempt runs in a process group of its own (a shell batch's tasks too, and the
shell itself); each is registered in :data:`LIVE` while it runs. Standard library only:
Dask workers import it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class LiveProcesses:
    """Process groups started by this worker process, so a cancel can kill them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: set[int] = set()
        self._on_cancel: list[Callable[[], None]] = []
        self.cancelled = False

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when a cancel begins, after :attr:`cancelled` is set and
        before any group is signalled: what starts tasks (a shell running a chunk) stops
        starting them before the running one's end could let it start the next."""
        with self._lock:
            self._on_cancel.append(callback)

    def add(self, pgid: int) -> None:
        with self._lock:
            self._groups.add(pgid)
            late = self.cancelled
        if late:  # started while a cancel was under way: it missed the kill
            signal_group(pgid, signal.SIGKILL)

    def discard(self, pgid: int) -> None:
        with self._lock:
            self._groups.discard(pgid)

    def kill_all(self, grace: float = 1.0) -> int:
        """SIGTERM every live group, then SIGKILL what is left after ``grace`` seconds."""
        with self._lock:
            self.cancelled = True
            callbacks = list(self._on_cancel)
        for callback in callbacks:
            try:
                callback()
            except Exception:  # noqa: BLE001 - the kill goes on whatever a callback did
                log.exception("a cancel callback failed")
        with self._lock:
            groups = list(self._groups)
        for pgid in groups:
            signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(group_alive(g) for g in groups):
            time.sleep(0.05)
        for pgid in groups:
            signal_group(pgid, signal.SIGKILL)
        return len(groups)


LIVE = LiveProcesses()


def kill_running() -> int:
    """Kill every task process this worker started (run on each worker by the driver)."""
    return LIVE.kill_all()


#: Seconds a cancellation waits for the workers to kill what they run.
KILL_SECONDS = 20.0


def kill_on_workers(client: Any) -> None:
    """Have every worker of a Dask (or pool) ``client`` kill the task processes it runs.

    A worker whose node hangs must not hang the cancellation: after
    :data:`KILL_SECONDS` its tasks are left to die with it, when the run closes its
    cluster or its allocation ends.
    """
    try:
        client.run(kill_running, wait=True, callback_timeout=KILL_SECONDS)
    except TimeoutError:
        log.warning("workers did not confirm killing their tasks in %.0fs", KILL_SECONDS)
    except Exception as exc:  # workers may already be gone
        log.debug("kill_running failed: %s", exc)


class Deadline:
    """Ends a process group that runs past its time: SIGTERM after ``seconds`` (None:
    never), SIGKILL one second later. ``expired`` is set once it fired; :meth:`cancel`
    it when the group has ended."""

    def __init__(self, pgid: int, seconds: float | None) -> None:
        self.expired = threading.Event()
        self._timer: threading.Timer | None = None
        if seconds is not None:
            self._timer = threading.Timer(seconds, self._expire, (pgid,))
            self._timer.daemon = True
            self._timer.start()

    def _expire(self, pgid: int) -> None:
        self.expired.set()
        signal_group(pgid, signal.SIGTERM)
        time.sleep(1.0)
        signal_group(pgid, signal.SIGKILL)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def signal_group(pgid: int, sig: int) -> None:
    """Send ``sig`` to group ``pgid``; a group that is gone already is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True
