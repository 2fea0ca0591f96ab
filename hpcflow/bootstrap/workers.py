"""workers.json: what each Dask worker of an allocation actually runs with.

Written once by the driver when the workers have arrived, so that a user (and the
tests) can check that the profile's worker settings reached the workers, without
connecting to the cluster.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from hpcflow.store.atomic import write_json_atomic

log = logging.getLogger(__name__)


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
