"""The driver and its allocation's workers: waiting for them, and recording them.

``workers.json`` (what each Dask worker actually runs with) is written once by the
driver when the workers have arrived, so that a user (and the tests) can check that the
profile's worker settings reached the workers, without connecting to the cluster.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpcflow.engine.pools import pool_resource
from hpcflow.errors import RunError
from hpcflow.store.atomic import write_json_atomic
from hpcflow.store.paths import RunPaths

log = logging.getLogger(__name__)


#: Seconds between looks at whether the workers' launch has ended.
LAUNCH_CHECK = 1.0
#: Seconds without a new worker after which the driver goes on with those that came.
SETTLE = 60.0
#: How much of the allocation's stderr log an error about the workers quotes.
STDERR_TAIL = 1500


def await_workers(
    client: Any, expected: int, timeout: float, paths: RunPaths, settle: float = SETTLE
) -> int:
    """Wait until ``expected`` workers have joined the scheduler; returns how many came.

    When some have come and no other has for ``settle`` seconds while the launch still
    runs (a rank that crashed at start, a node that never started its worker), the run
    goes on with those, with a warning naming how many are missing: one lost node must
    not hold the others idle until the timeout.

    Raises
    ------
    RunError
        No worker came within ``timeout``, or the workers' launch (srun, mpirun) ended
        first: its ranks are gone and no other worker will come, so waiting on would only
        hide its error. The message quotes the end of the allocation's stderr log.
    """
    started = time.monotonic()
    deadline = started + timeout
    arrived, last_change = 0, started
    while True:
        left = deadline - time.monotonic()
        try:
            client.wait_for_workers(expected, timeout=max(0.1, min(LAUNCH_CHECK, left)))
            return expected
        except TimeoutError:
            pass
        now_arrived = len(client.scheduler_info(n_workers=-1).get("workers", {}))
        now = time.monotonic()
        if now_arrived != arrived:
            arrived, last_change = now_arrived, now
        ended = _launch_end(paths)
        if ended is not None:
            raise RunError(
                f"the workers' launch ended (exit status {ended}) with {arrived} of "
                f"{expected} workers arrived{_stderr_tail(paths)}",
                hint=f"its messages are in the allocation's stderr log in {paths.allocations_dir}",
            )
        if arrived and now - last_change >= settle:
            log.warning(
                "%d of %d workers arrived and no other for %.0fs: going on without the "
                "other %d (see the allocation's stderr log in %s)",
                arrived,
                expected,
                settle,
                expected - arrived,
                paths.allocations_dir,
            )
            return arrived
        if left <= LAUNCH_CHECK:
            raise RunError(
                f"only {arrived} of {expected} workers arrived within {timeout:.0f}s"
                f"{_stderr_tail(paths)}",
                hint=(
                    "a node may be slow to start its workers, or their launch is blocked: see "
                    f"the allocation's stderr log under {paths.allocations_dir}"
                ),
            )


def _stderr_tail(paths: RunPaths) -> str:
    """The end of the newest allocation stderr log, as lines to append to an error."""
    try:
        logs = sorted(paths.allocations_dir.glob("*.err"), key=lambda p: p.stat().st_mtime)
        if not logs:
            return ""
        with logs[-1].open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - STDERR_TAIL))
            text = handle.read().decode(errors="replace").strip()
    except OSError:
        return ""
    if not text:
        return ""
    return f"; the end of {logs[-1].name}:\n{text}"


def _launch_end(paths: RunPaths) -> int | None:
    """The exit status of the workers' launch once the head has seen it end."""
    try:
        return int(json.loads(paths.worker_launch_end.read_text(encoding="utf-8"))["exit_status"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def workers_gone_check(client: Any, paths: RunPaths) -> Callable[[], str | None]:
    """For the driver's loop: why every worker of this allocation is gone for good (the
    workers' launch has ended and the scheduler has no worker left), else None. A lost
    worker rank alone ends nothing (the launch keeps its other ranks); the launch itself
    ending (srun killed, every node of it lost) takes all of them, and no worker will
    come back within this allocation."""

    def check() -> str | None:
        ended = _launch_end(paths)
        if ended is None:
            return None
        try:
            if client.nthreads():
                return None
        except Exception as exc:  # noqa: BLE001 - a scheduler gone too: the run ends anyway
            log.warning("cannot ask the scheduler for its workers: %s", exc)
        return (
            f"every worker of this allocation is gone: the workers' launch ended (exit "
            f"status {ended}) and no worker is left; the tasks that did not finish run "
            f"on the next `hpcflow run` (the launch's messages are in the allocation's "
            f"stderr log in {paths.allocations_dir})"
        )

    return check


def release_pool(client: Any, pool: str) -> threading.Thread:
    """Retire the workers of ``pool`` (in the background: the driver goes on): Dask moves
    the values they hold to other workers, then closes them; their launch ends, and with
    it the pool's allocation, while the rest of the run goes on."""

    def retire() -> None:
        try:
            workers = client.scheduler_info(n_workers=-1).get("workers", {})
            mine = [
                address
                for address, info in workers.items()
                if pool_resource(pool) in (info.get("resources") or {})
            ]
            if mine:
                client.retire_workers(workers=mine, close_workers=True)
            log.info("pool %s: %d worker(s) retired", pool, len(mine))
        except Exception as exc:  # the allocation then ends with the run, as before
            log.warning("pool %s: could not retire its workers: %s", pool, exc)

    thread = threading.Thread(target=retire, name=f"release-{pool}", daemon=True)
    thread.start()
    return thread


def describe_worker(dask_worker: Any) -> dict[str, Any]:
    """One worker's effective settings (runs on the worker, through ``Client.run``)."""
    memory = dask_worker.memory_manager
    return {
        "name": str(dask_worker.name),
        "address": dask_worker.address,
        "host": os.uname().nodename,
        "pid": os.getpid(),
        "nthreads": dask_worker.state.nthreads,
        "resources": dict(dask_worker.state.total_resources),
        "memory_limit": memory.memory_limit,
        "memory_target": memory.memory_target_fraction,
        "memory_spill": memory.memory_spill_fraction,
        "memory_pause": memory.memory_pause_fraction,
        "local_directory": dask_worker.local_directory,
        "lifetime": dask_worker.lifetime,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }


def record_workers(client: Any, path: Path) -> list[dict[str, Any]]:
    """Ask every worker for its settings and write them to ``path`` (best effort)."""
    try:
        found = client.run(describe_worker)
    except Exception as exc:  # a report, not a reason to fail the run
        log.warning("could not describe the workers: %s", exc)
        return []
    workers = sorted(found.values(), key=lambda w: w["name"])
    write_json_atomic(path, {"workers": workers})
    return workers
