"""One live hpcflow run per Snakemake workflow: the workflow's lease, as ``hpcflow run``
holds it (:class:`hpcflow.store.lock.RunLock`).

Snakemake's own lock (``.snakemake/locks``) is a file that ``--nolock`` and ``--unlock``
lift. The plugin's session also takes the workflow's lease, keyed on the Snakefile, in
``WORKDIR/.hpcflow/locks/``, before it makes its run folder, and releases it once its
workers are gone; its pilot allocations are named in it as they are submitted, so a
second run is refused while this one, or an allocation it left behind, still lives.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hpcflow.store.lock import RunLock
from hpcflow.store.paths import StateRoot, workflow_key


def take_lease(workdir: Path, snakefile: str, on_lost: Callable[[str], None]) -> RunLock:
    """The lease of the workflow in ``workdir/snakefile``, taken; raises
    :class:`~hpcflow.errors.RunLockedError` naming the run that holds it. ``on_lost`` is
    told why if another run takes it over later (this run must then stop)."""
    from hpcflow.backends.registry import allocations_live

    path = (workdir / snakefile).resolve()
    lock_file = StateRoot.in_folder(workdir).lock_file(workflow_key(path))
    lease = RunLock(lock_file, ask=allocations_live, on_lost=on_lost)
    lease.acquire({"run_id": "starting", "workflow": str(path)})
    return lease
