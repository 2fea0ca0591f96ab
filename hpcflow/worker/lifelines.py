"""Which process a pid names, and a worker process that dies with the one it serves.

A pid alone names a process only while it lives: once it has ended, the number may be
given to another. A process is named here by its pid and its start time (in clock ticks
since boot, ``/proc/PID/stat``), which together are never reused. Linux only, as hpcflow
is.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import threading
import time

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1

#: How often a worker looks whether the process it serves still lives (seconds).
POLL_SECONDS = 0.2


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), or None if there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count after its end.
    fields = stat[stat.rfind(b")") + 2 :].split()
    if fields[0] == b"Z":  # a zombie has ended; only its exit status is left
        return None
    return int(fields[19])


def is_alive(pid: int, ticks: int) -> bool:
    """Whether the process that started at ``ticks`` with ``pid`` still runs."""
    return pid > 0 and start_ticks(pid) == ticks


def die_with_parent() -> None:
    """SIGKILL this process when its parent process dies (``PR_SET_PDEATHSIG``).

    The kernel sends the signal when the *thread* that forked this process ends, so it
    is only for processes whose parent forks them from its main thread (a fork server).
    A parent that died before the call is caught by the check that follows it."""
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        log.warning("cannot tie process %d to its parent's life", os.getpid())
    if os.getppid() != parent or parent == 1:
        os.kill(os.getpid(), signal.SIGKILL)


def die_with(pid: int, ticks: int | None) -> None:
    """A daemon thread that SIGKILLs this process once process ``pid`` (started at
    ``ticks``) has ended: for a worker whose parent is not the process it serves."""
    if ticks is None:
        return

    def watch() -> None:
        while is_alive(pid, ticks):
            time.sleep(POLL_SECONDS)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="hpcflow-lifeline", daemon=True).start()
