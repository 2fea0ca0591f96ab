"""Local mode: run on this machine, with the pool engine or the embedded Dask cluster."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcflow.engine.capacity import check_capacity
from hpcflow.engine.lifecycle import RunLife, RunSummary
from hpcflow.engine.prepare import PreparedRun, RunOptions
from hpcflow.worker.local_cluster import LocalCapacity

if TYPE_CHECKING:
    from hpcflow.engine.driver import Observer

log = logging.getLogger(__name__)


def run_local(
    prepared: PreparedRun, options: RunOptions, observer: Observer | None = None
) -> RunSummary:
    """Run on this machine: create the run directory, start the local engine, drive."""
    capacity = LocalCapacity.detect(options.workers, options.threads)
    engine = local_engine(options)
    graph = prepared.graph
    with RunLife(prepared, options, extra={"slots": capacity.slots, "engine": engine}) as life:
        check_capacity(graph, prepared.decision.run, capacity.max_cpus_per_task, capacity.gpus)
        life.create()
        if life.nothing_to_run:
            return life.all_cached(observer)
        # Imported only now: a resume with every task up to date never loads the driver.
        from hpcflow.engine.drive import drive

        log.info(
            "run %s: %d of %d tasks to run on %d slots (%s engine)",
            life.run_id,
            prepared.decision.to_run,
            len(graph.instances),
            capacity.slots,
            engine,
        )
        with _local_engine(engine, capacity, str(Path(graph.loaded.base_dir))) as cluster:
            return drive(prepared, life.db, life.run_id, cluster.client, capacity.slots, observer)


def local_engine(options: RunOptions) -> str:
    """Which engine a local run uses: ``pool`` or ``dask``.

    ``auto`` takes the pool (threads in the driver for commands, worker processes for
    Python calls): a local run gains nothing from Dask but its start-up and round trips.
    ``--workers`` above 1 asks for Dask's worker processes, so it takes Dask.
    """
    if options.engine != "auto":
        return options.engine
    if options.workers is not None and options.workers > 1:
        return "dask"
    return "pool"


def _local_engine(engine: str, capacity: LocalCapacity, workdir: str) -> Any:
    """The context manager that provides the local engine's client."""
    if engine == "pool":
        from hpcflow.worker.pool import LocalPool

        return LocalPool(capacity.slots, workdir)
    from hpcflow.worker.local_cluster import LocalCluster

    return LocalCluster(capacity, workdir)
