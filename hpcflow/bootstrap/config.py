"""pilot.json: what the submit host tells every rank of a pilot allocation."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hpcflow.store.atomic import write_json_atomic


@dataclass(frozen=True)
class PilotConfig:
    """Worker layout and transport for one run's allocations."""

    workers_expected: int
    threads_per_worker: int
    gpus_per_worker: int = 0
    base_dir: str = "."
    local_directory: str | None = None
    interface: str | None = None
    transport: str = "tcp"
    memory_limit: str | None = None
    launcher: str = "srun"
    mpi: str = "pmix"
    #: The prefix that starts an MPI task that fits on one worker on its own node (the
    #: profile's local_mpi_launch); None: every MPI task is a launcher step.
    local_mpi_launch: list[str] | None = None
    worker_wait_timeout: float = 300.0
    env: dict[str, str] = field(default_factory=dict)
    dashboard_address: str | None = None
    #: distributed.worker.memory.{target,spill,pause}; None keeps Dask's default.
    memory_fractions: dict[str, float | bool] = field(default_factory=dict)
    worker_resources: dict[str, float] = field(default_factory=dict)
    lifetime: float | None = None
    lifetime_stagger: float = 0.0
    #: Each worker rank runs its worker under a nanny (restart, orphan reaping).
    nanny: bool = True
    #: True when a client outside the allocation (the Snakemake plugin) drives the run:
    #: rank 1 then only waits for the scheduler to shut down.
    external_client: bool = False
    #: How tasks' containers and modules run on this site (SiteEnvironment.to_dict).
    software: dict[str, Any] = field(default_factory=dict)
    #: The pool of this allocation's workers (a run with several pools), else None.
    pool: str | None = None
    #: The head allocation's driver, in a run with several pools: the pool of each task
    #: definition (by its index, as text), the slots each pool will have, and the pools
    #: whose allocations are released once their last task has ended.
    task_pools: dict[str, str] = field(default_factory=dict)
    pool_slots: dict[str, int] = field(default_factory=dict)
    releasable: list[str] = field(default_factory=list)

    @property
    def slots(self) -> int:
        return self.workers_expected * self.threads_per_worker

    def write(self, path: Path) -> None:
        write_json_atomic(path, asdict(self))

    @classmethod
    def read(cls, path: Path) -> PilotConfig:
        return cls(**json.loads(path.read_text(encoding="utf-8")))
