"""The tasks of a pilot whose driver was killed: ended by hpcflow, a process group at a time.

A driver that dies by a signal (``kill -9``, the OOM killer) never shuts its cluster down,
and nothing records what its tasks still do. The head then asks every worker, through the
allocation's scheduler (still running beside it), to kill the task processes it runs
(:func:`~hpcflow.worker.run_over.end_all_tasks`: each task's process group at once, the
same as a cancel, then whatever a task started in a session of its own), before it stops
the workers' launch.
Left to the batch system, the task processes would be signalled one by one (SLURM's
proctrack walks the processes), so a task's shell could see its command killed and go on
to its next line first.

When the driver is a process outside the allocation (the Snakemake plugin's client,
``PilotConfig.external_client``), the allocation's driver rank watches it instead
(:class:`ClientWatch`): once the client has been connected and has been gone from the
scheduler for :data:`CLIENT_GRACE` seconds, its tasks are ended the same way and the
scheduler is shut down, so the allocation ends instead of living to its walltime.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from typing import Any

from hpcflow.bootstrap.config import PilotConfig
from hpcflow.store.paths import RunPaths
from hpcflow.transport.security import security_for
from hpcflow.worker.run_over import end_all_tasks

log = logging.getLogger("hpcflow.bootstrap")

#: Seconds to connect to the scheduler and to hear back from every worker.
TIMEOUT = 15.0
#: Seconds an external client may be gone before its run counts as abandoned (a client
#: whose connection dropped reconnects within this, under its own id).
CLIENT_GRACE = 5.0


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


def other_clients(dask_scheduler: object, me: str) -> int:
    """On the scheduler: how many clients other than ``me`` are connected (Dask's own
    fire-and-forget entry not counted)."""
    clients = getattr(dask_scheduler, "clients", {})
    return sum(1 for name in clients if name != me and not name.startswith("fire-and-forget"))


class ClientWatch:
    """Whether the external client that drives a pilot run has abandoned it: seen
    connected once, then gone for ``grace`` seconds (:meth:`abandoned`, asked now and
    then through the driver rank's own client)."""

    def __init__(self, client: Any, grace: float = CLIENT_GRACE) -> None:
        self.client = client
        self.grace = grace
        self.seen = False
        self._gone_since: float | None = None

    def abandoned(self) -> bool:
        client = self.client
        try:
            n = int(client.run_on_scheduler(other_clients, me=client.id))
        except Exception as exc:  # noqa: BLE001 - the scheduler is going: not a verdict
            log.debug("could not count the scheduler's clients: %s", exc)
            return False
        now = time.monotonic()
        if n:
            self.seen, self._gone_since = True, None
            return False
        if not self.seen:
            return False  # the client has not connected yet (the allocation started early)
        if self._gone_since is None:
            self._gone_since = now
        return now - self._gone_since >= self.grace


def end_for_lost_client(client: Any, timeout: float = TIMEOUT) -> None:
    """The external client is gone: have every worker kill its tasks, then shut the
    scheduler down (every rank of the allocation then ends)."""
    try:
        killed = client.run(end_all_tasks, wait=True, callback_timeout=timeout)
        log.error(
            "the run's client (the process that submitted this allocation) is gone: "
            "%d worker(s) ended %d task process group(s) and process(es); shutting down",
            len(killed), sum(killed.values()),
        )  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - shut down whatever happened here
        log.warning("could not have the workers end the tasks of the lost client: %s", exc)
    with contextlib.suppress(Exception):
        client.shutdown()
