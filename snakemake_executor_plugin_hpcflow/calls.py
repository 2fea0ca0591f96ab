"""A Snakemake job as hpcflow's workers run it: one :class:`~hpcflow.worker.calls.TaskCall`.

The call runs the job's command (Snakemake's own ``format_job_exec``) as a shell task with
its logs in ``RUN_DIR/tasks/SLUG/``, by the worker code of hpcflow's own tasks
(:func:`hpcflow.worker.chunk.run_chunk`), or, when the command is one the warm runner
reads, through the worker's warm runner (:func:`snakemake_executor_plugin_hpcflow.warm.
run_warm`), which falls back to the same call; :func:`job_key` names it for Dask (and for
Snakemake, as the job's external id); :func:`check_fits` refuses, before it is sent, a job
no worker could ever hold (Dask would keep it waiting forever), and :func:`cap_to_worker`
cuts it to the local worker instead (local mode, as Snakemake's local executor does).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from hpcflow.errors import HpcflowError
from hpcflow.store.paths import RunPaths
from hpcflow.worker.calls import TaskCall
from hpcflow.worker.chunk import run_chunk
from hpcflow.worker.groups import kill_on_workers
from snakemake_executor_plugin_hpcflow.jobcommand import JobCommand
from snakemake_executor_plugin_hpcflow.translate import TaskRequest
from snakemake_executor_plugin_hpcflow.warm import run_warm

log = logging.getLogger(__name__)


class CapacityError(HpcflowError):
    """A job asks for more than any worker of the session's cluster offers."""


def check_fits(task: TaskRequest, max_cpus: int, gpus: int) -> None:
    """Refuse ``task`` if it needs more than ``max_cpus`` CPU slots or ``gpus`` GPUs (the
    batch modes: their workers are the profile's nodes, so no worker would ever run it)."""
    cpus = int(task.dask_resources.get("cpus", 1))
    if cpus > max_cpus:
        raise CapacityError(
            f"{task.task_id} asks for {cpus} cpus but a worker of this hpcflow cluster "
            f"has {max_cpus}",
            hint="lower the rule's threads (or --set-threads), or use a profile whose "
            "workers have more CPUs (cpus_per_node, workers_per_node: `hpcflow profiles "
            "show PROFILE`)",
        )
    wanted = int(task.dask_resources.get("GPU", 0))
    if wanted > gpus:
        raise CapacityError(
            f"{task.task_id} asks for {wanted} GPUs but a worker of this hpcflow cluster "
            f"has {gpus}",
            hint="in pilot and elastic mode a rule's `gpu` resource asks for GPUs: use a "
            "profile whose nodes have them, e.g. --hpcflow-profile slurm-gpu",
        )


def cap_to_worker(task: TaskRequest, max_cpus: int, gpus: int) -> tuple[TaskRequest, str]:
    """``task`` with its Dask slot cut to what one local worker has, as Snakemake's local
    executor runs a job that wants more cores than ``--cores`` (its threads capped there),
    and what was cut ("" if nothing). A ``gpu`` count on a worker without GPUs is a plain
    counter, as for the local executor: Snakemake's own ``--resources`` limit it."""
    wanted = dict(task.dask_resources)
    notes: list[str] = []
    cpus = int(wanted.get("cpus", 1))
    if cpus > max_cpus:
        wanted["cpus"] = float(max_cpus)
        notes.append(f"{cpus} cpus (the local worker has {max_cpus}: it holds all of them)")
    gpu = int(wanted.get("GPU", 0))
    if gpu > gpus:
        if gpus:
            wanted["GPU"] = float(gpus)
            notes.append(f"{gpu} GPUs (the local worker has {gpus}: it holds all of them)")
        else:
            del wanted["GPU"]
            notes.append(f"{gpu} GPUs (no GPU here: 'gpu' is a plain Snakemake resource)")
    if not notes:
        return task, ""
    return replace(task, dask_resources=wanted), " and ".join(notes)


def task_call(
    task: TaskRequest, command: str, paths: RunPaths, workdir: Path, index: int
) -> TaskCall:
    """The call number ``index`` of the run, which runs ``command`` for ``task``."""
    stdout, stderr, result = paths.attempt_files(task.slug, task.attempt)
    return TaskCall(
        index=index,
        attempt=task.attempt,
        kind="shell",
        command=command,
        argv=None,
        python=None,
        kwargs=None,
        workdir=str(workdir),
        env=None,
        timeout=task.timeout,
        # Snakemake checks inputs and outputs itself (and keeps its own incomplete
        # markers); hpcflow must not move a failed job's outputs out of its way.
        inputs=(),
        outputs=(),
        stdout=stdout,
        stderr=stderr,
        result=result,
        quarantine_dir=paths.quarantine(task.slug, task.attempt),
    )


def job_key(task: TaskRequest, call: TaskCall) -> str:
    """The Dask key of a job's call (also what Snakemake shows as its external id)."""
    return f"snakemake-{task.slug}-{task.attempt}-{call.index}"


def send(
    client: Any,
    task: TaskRequest,
    call: TaskCall,
    warm: JobCommand | None = None,
    warm_logs: str = "",
) -> Any:
    """Submit ``call`` to the Dask ``client`` (through a warm runner when ``warm`` is
    given; its logs go to ``warm_logs``); the future resolves to ``[Outcome]``."""
    key = job_key(task, call)
    resources = task.dask_resources
    if warm is not None:
        return client.submit(
            run_warm, call, warm, warm_logs, key=key, resources=resources, pure=False
        )
    return client.submit(run_chunk, [call], key=key, resources=resources, pure=False)


def cancel_calls(client: Any, futures: list[Any]) -> None:
    """Cancel ``futures`` and kill every task process the workers are running."""
    try:
        client.cancel(futures, force=True)
    except Exception as exc:  # workers may already be gone; closing follows anyway
        log.debug("cancelling on the workers failed: %s", exc)
    kill_on_workers(client)


class PendingSlots:
    """The CPU slots of the calls sent and not finished (what an elastic cluster grows
    for); called from the cluster's thread, added to from Snakemake's."""

    def __init__(self) -> None:
        self._slots: dict[str, float] = {}
        self._lock = threading.Lock()

    def add(self, future: Any, task: TaskRequest) -> None:
        """Count ``task``'s slots until its ``future`` is done."""
        key = str(future.key)
        with self._lock:
            self._slots[key] = task.dask_resources.get("cpus", 1.0)

        def done(_: Any) -> None:
            with self._lock:
                self._slots.pop(key, None)

        future.add_done_callback(done)

    def __call__(self) -> int:
        with self._lock:
            return int(sum(self._slots.values()))
