"""Sources of Dask workers: what a batch mode starts so that a driver can send work.

Pilot mode's allocation with the caller as its client
(:class:`~hpcflow.modes.pilot_client.PilotClientAllocation`) and elastic mode's worker
jobs (:class:`~hpcflow.modes.elastic_workers.ElasticWorkers`) are both one; `hpcflow run`
and the Snakemake plugin drive on the same objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpcflow.backends.base import Backend
from hpcflow.settings.profile import Profile
from hpcflow.store.paths import RunPaths


class WorkerSource:
    """The workers of the run in ``paths`` (its id ``run_id``, tasks run from
    ``base_dir``), shaped by ``profile`` and obtained from ``backend``: from
    :meth:`start`, which returns a connected Dask client, to :meth:`close`."""

    def __init__(
        self, profile: Profile, backend: Backend, paths: RunPaths, run_id: str, base_dir: Path
    ) -> None:
        self.profile = profile
        self.backend = backend
        self.paths = paths
        self.run_id = run_id
        self.base_dir = base_dir

    def start(self) -> Any:
        """Start (or submit and wait for) the workers; the connected client."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the workers and whatever holds them (safe to call more than once)."""
        raise NotImplementedError

    def failure(self) -> str | None:
        """Why the workers will never come, or None while they can."""
        return None

    def where_to_look(self) -> str:
        """Logs worth reading when work was lost with a worker."""
        return ""

    def max_cpus(self) -> int:
        """The most CPU slots one task can hold on one worker."""
        raise NotImplementedError

    def gpus(self) -> int:
        """GPUs one worker offers."""
        raise NotImplementedError
