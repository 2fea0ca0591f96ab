"""What a worker kills when its run is over without it being told: every task it runs.

:func:`end_all_tasks` kills a worker's task process groups, each at once (as a cancel
does), then what a task started in a session of its own (by the worker's mark). The
allocation's head runs it on every worker when a pilot's driver was killed
(:mod:`hpcflow.bootstrap.abandoned`).

This module is also a Dask preload (``dask worker --preload hpcflow.worker.run_over``),
given to the workers hpcflow does not start itself: elastic mode's worker jobs
(:mod:`hpcflow.modes.elastic_plan`). Their scheduler lives in the driver's process; when
that process is killed the worker sees its scheduler connection break and closes, but a
closing Dask worker waits for its task threads, and they wait for their task processes:
the tasks would run on, beside the re-run's. The worker's teardown (:func:`dask_teardown`),
which Dask runs before it waits, kills them first; a Python task runs in one of the
worker's threads, which nothing can stop, so a worker that still executes a task then
ends its process at once (Dask would run that task again elsewhere anyway). A worker
closed at the end of its run, or retired when idle, executes nothing and closes as usual.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from typing import Any

from hpcflow.worker.groups import kill_running
from hpcflow.worker.guardian import current_mark, marked

log = logging.getLogger(__name__)

#: The exit status of a worker process ended with tasks executing in its threads.
EXIT_ABANDONED = 75


def end_all_tasks() -> int:
    """On a worker: kill its tasks' process groups, each at once, then every process that
    still carries the worker's mark (what a task started in a session of its own,
    ``setsid``, which its group's kill misses); how many it killed."""
    killed = kill_running()
    mark = current_mark()
    if mark:
        me = os.getpid()
        for pid in marked(mark):
            if pid != me:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
    return killed


def executing(worker: Any) -> int:
    """How many tasks ``worker`` (a Dask worker) is executing now."""
    state = getattr(worker, "state", None)
    return len(getattr(state, "executing", ())) + len(getattr(state, "long_running", ()))


def dask_teardown(worker: Any) -> None:
    """Dask's preload hook, run as the worker closes: its tasks end with it."""
    running = executing(worker)
    killed = end_all_tasks()
    if killed or running:
        log.warning(
            "worker %s is closing with %d task(s) executing (its scheduler is gone, or it "
            "was retired): killed %d task process group(s) and process(es)%s",
            getattr(worker, "address", "?"),
            running,
            killed,
            "; ending the worker's process, whose threads run them" if running else "",
        )
    if running:
        logging.shutdown()
        os._exit(EXIT_ABANDONED)
