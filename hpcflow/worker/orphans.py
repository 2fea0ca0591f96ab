"""Tasks outlive a killed worker unless someone reaps them: the nanny does.

A task runs in its own session (so its whole process group can be signalled), which
also means that when its worker process is SIGKILLed (by a user, or the kernel's OOM
killer) the task's processes are re-parented and run on, still writing the outputs
that the retried attempt is writing too. :class:`OrphanReaper` makes each worker's
nanny a *child subreaper* (Linux ``PR_SET_CHILD_SUBREAPER``): orphans of its worker
become its children, and every half second it kills their process groups and reaps them.

Orphans are recognised without any bookkeeping in the task path: task processes live in
sessions of their own, while the nanny's worker process shares the nanny's session.

Where there is no nanny (the pool engine's driver, a killed driver whose workers die with
it, a nanny killed together with its worker), each process that starts tasks has a
guardian that kills them when it dies (:mod:`hpcflow.worker.guardian`).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
from typing import Any

from distributed.diagnostics.plugin import NannyPlugin

log = logging.getLogger(__name__)

PR_SET_CHILD_SUBREAPER = 36
SWEEP_MS = 500


def become_subreaper() -> bool:
    """Make this process adopt its descendants' orphans (Linux only; False elsewhere)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def kill_orphans() -> int:
    """Kill and reap this process's children that live in other sessions; how many."""
    import psutil

    own_session = os.getsid(0)
    own_group = os.getpgrp()
    killed = 0
    try:
        children = psutil.Process().children(recursive=False)
    except psutil.Error:
        return 0
    for child in children:
        try:
            if os.getsid(child.pid) == own_session:
                continue  # the worker process itself (or one being started)
            group = os.getpgid(child.pid)
            if group != own_group:
                os.killpg(group, signal.SIGKILL)
            else:
                os.kill(child.pid, signal.SIGKILL)
            killed += 1
        except (ProcessLookupError, PermissionError):
            pass
        try:
            os.waitpid(child.pid, os.WNOHANG)  # a zombie orphan is ours to reap
        except ChildProcessError:
            pass
    if killed:
        log.warning("killed %d task process(es) that outlived their worker", killed)
    return killed


class OrphanReaper(NannyPlugin):
    """A Dask nanny plugin: adopt and kill what a dead worker's tasks left running."""

    idempotent = True
    restart = False
    name = "hpcflow-orphan-reaper"

    def setup(self, nanny: Any) -> None:
        from tornado.ioloop import PeriodicCallback

        if not become_subreaper():
            log.info("cannot become a child subreaper here; orphaned tasks are not reaped")
            return

        def sweep() -> None:
            kill_orphans()

        self._callback = PeriodicCallback(sweep, SWEEP_MS)
        self._callback.start()

    def teardown(self, nanny: Any) -> None:
        callback = getattr(self, "_callback", None)
        if callback is not None:
            callback.stop()
        kill_orphans()
