"""The tasks of a pilot whose driver was killed: ended by hpcflow, a process group at a time.

A driver that dies by a signal (``kill -9``, the OOM killer) never shuts its cluster down,
and nothing records what its tasks still do. The head then asks every worker, through the
allocation's scheduler (still running beside it), to kill the task processes it runs
(:func:`hpcflow.worker.groups.kill_running`: each task's process group at once, the
same as a cancel), before it stops the workers' launch. Left to the batch system, the
task processes would be signalled one by one (SLURM's proctrack walks the processes), so a
task's shell could see its command killed and go on to its next line first.
"""

from __future__ import annotations

import json
import logging
import time

from hpcflow.bootstrap.config import PilotConfig
from hpcflow.store.paths import RunPaths
from hpcflow.transport.security import security_for

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

        from hpcflow.worker.groups import kill_running

        with Client(
            address,
            timeout=timeout,
            set_as_default=False,
            security=security_for(paths.run_dir, config.transport),
        ) as client:
            killed = client.run(kill_running, wait=True, callback_timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - the launch is stopped whatever happened here
        log.warning("could not have the workers end the tasks of the killed driver: %s", exc)
        return False
    log.warning(
        "the driver was killed: %d worker(s) ended %d running task group(s) in %.1fs",
        len(killed),
        sum(killed.values()),
        time.monotonic() - started,
    )
    return True
