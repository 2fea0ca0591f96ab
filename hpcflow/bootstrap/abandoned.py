"""The tasks of a pilot whose driver was killed: ended by hpcflow, a process group at a time.

A driver that dies by a signal (``kill -9``, the OOM killer) never shuts its cluster down,
and nothing records what its tasks still do. The head then asks every worker, through the
allocation's scheduler (still running beside it), to kill the task processes it runs
(:func:`end_all_tasks`: each task's process group at once, the same as a cancel, then
whatever a task started in a session of its own), before it stops the workers' launch.
Left to the batch system, the task processes would be signalled one by one (SLURM's
proctrack walks the processes), so a task's shell could see its command killed and go on
to its next line first.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import threading
import time

from hpcflow.bootstrap.config import PilotConfig
from hpcflow.store.paths import RunPaths
from hpcflow.transport.security import security_for
from hpcflow.worker.groups import kill_running
from hpcflow.worker.guardian import current_mark, marked

log = logging.getLogger("hpcflow.bootstrap")

#: Seconds to connect to the scheduler and to hear back from every worker.
TIMEOUT = 15.0


def end_abandoned_tasks(paths: RunPaths, timeout: float = TIMEOUT) -> bool:
    """Have every worker of the run at ``paths`` kill its tasks; whether they confirmed.

    Never raises: when the scheduler cannot be reached the launch is stopped anyway, and
    the batch system and the workers' guardians end what is left."""
    started = time.monotonic()
    try:
        config = PilotConfig.read(paths.pilot_config)
        address = str(json.loads(paths.scheduler_address.read_text(encoding="utf-8"))["address"])
        from distributed import Client

        with Client(
            address,
            timeout=timeout,
            set_as_default=False,
            security=security_for(paths.run_dir, config.transport),
        ) as client:
            killed = client.run(end_all_tasks, wait=True, callback_timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - the launch is stopped whatever happened here
        log.warning("could not have the workers end the tasks of the killed driver: %s", exc)
        return False
    log.warning(
        "the driver was killed: %d worker(s) ended %d task process group(s) and "
        "process(es) in %.1fs",
        len(killed),
        sum(killed.values()),
        time.monotonic() - started,
    )
    return True


def end_all_tasks() -> int:
    """On a worker: kill its tasks' process groups, each at once (as a cancel does), then
    every process that still carries the worker's mark (what a task started in a session
    of its own, ``setsid``, which its group's kill misses); how many it killed."""
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


def warm_up() -> None:
    """Import in the background what :func:`end_abandoned_tasks` needs (Dask's client
    takes seconds to import on a busy node), so that it acts within a second when the
    driver dies. For the head, at its start."""

    def load() -> None:
        try:
            import distributed  # noqa: F401
        except Exception as exc:  # noqa: BLE001 - imported again, and said, when needed
            log.debug("warming up the Dask client failed: %s", exc)

    threading.Thread(target=load, name="hpcflow-warm-client", daemon=True).start()
