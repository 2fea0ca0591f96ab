"""Local mode: run on this machine, with the pool engine or the embedded Dask cluster."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcflow.engine.capacity import check_capacity
from hpcflow.engine.lifecycle import RunLife, RunSummary
from hpcflow.engine.prepare import PreparedRun, RunOptions
from hpcflow.modes.settled import local_engine, settle
from hpcflow.worker.local_cluster import LocalCapacity

if TYPE_CHECKING:
    from hpcflow.engine.driver import Observer

log = logging.getLogger(__name__)


def run_local(
    prepared: PreparedRun, options: RunOptions, observer: Observer | None = None
) -> RunSummary:
    """Run on this machine: create the run directory, start the local engine, drive."""
    capacity = LocalCapacity.detect(options.workers, options.threads)
    engine = local_engine(options.engine, options.workers)
    graph = prepared.graph
    with RunLife(prepared, options, extra={"slots": capacity.slots, "engine": engine}) as life:
        check_capacity(graph, prepared.decision.run, capacity.max_cpus_per_task, capacity.gpus)
        prepared = life.create()
        if life.nothing_to_run:
            summary = life.all_cached(observer)
            settle(prepared, life.paths.run_dir, summary)
            return summary
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
            summary = drive(
                prepared, life.db, life.run_id, cluster.client, capacity.slots, observer
            )
        settle(prepared, life.paths.run_dir, summary)
        return summary


def _local_engine(engine: str, capacity: LocalCapacity, workdir: str) -> Any:
    """The context manager that provides the local engine's client."""
    if engine == "pool":
        from hpcflow.worker.pool import LocalPool

        return LocalPool(capacity.slots, workdir)
    from hpcflow.worker.local_cluster import LocalCluster

    return LocalCluster(capacity, workdir)
