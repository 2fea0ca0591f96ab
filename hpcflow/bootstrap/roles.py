"""Rank → role, and a worker's place on its node: pure functions, so the layout is obvious
and testable.

A pilot allocation numbers its processes as *pilot ranks*: 0 is the Dask scheduler, 1 the
driver, 2.. the workers. How they are started (see ``docs/batch.md``, "Where the ranks
run"): the batch script's own node runs the scheduler and the driver (``--role head``), and
one launch (srun / mpirun) starts exactly the workers, a fixed number per node; worker k
of that launch is pilot rank ``2 + k``. ``python -m hpcflow.bootstrap RUN_DIR`` on the ranks
of one launch (``launcher: single``, or started by hand) still maps launch rank 0 and 1 to
the scheduler and the driver.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

#: Ranks that are not workers: 0 = scheduler, 1 = driver.
NON_WORKER_RANKS = 2


class Role(str, enum.Enum):
    SCHEDULER = "scheduler"
    DRIVER = "driver"
    WORKER = "worker"


def role_for(rank: int) -> Role:
    """The role of ``rank`` when one launch starts every rank (0 scheduler, 1 driver)."""
    if rank == 0:
        return Role.SCHEDULER
    if rank == 1:
        return Role.DRIVER
    return Role.WORKER


def worker_count(world_size: int) -> int:
    return max(0, world_size - NON_WORKER_RANKS)


def worker_local_index(rank: int, nodes: Sequence[str], first_worker: int = 0) -> int:
    """``rank``'s position among the worker ranks of its own node.

    ``nodes[r]`` is the node rank ``r`` runs on (as the batch system names it), for every
    rank of the launch; ranks below ``first_worker`` are not workers. This holds whatever
    order the launcher put the ranks in: only ranks on the same node count.
    """
    node = nodes[rank]
    return sum(1 for r in range(first_worker, rank) if nodes[r] == node)


def workers_per_node(rank: int, nodes: Sequence[str], first_worker: int = 0) -> int:
    """How many worker ranks share ``rank``'s node."""
    node = nodes[rank]
    return sum(1 for r in range(first_worker, len(nodes)) if nodes[r] == node)


def gpu_rotation(visible: list[str], worker_local_index: int, per_worker: int = 1) -> list[str]:
    """CUDA_VISIBLE_DEVICES for the k-th worker on a node: its own ``per_worker`` GPUs
    first (devices k·per_worker …), the node's other GPUs still visible after them (so
    peer access keeps working)."""
    if not visible:
        return []
    k = (worker_local_index * max(1, per_worker)) % len(visible)
    return visible[k:] + visible[:k]


def spread(workers: int, nodes: int) -> list[int]:
    """``workers`` over ``nodes`` as evenly as possible, the first nodes taking the extra
    ones (e.g. 5 over 2 → [3, 2]); nodes without a worker are left out."""
    if workers <= 0 or nodes <= 0:
        return []
    base, extra = divmod(workers, nodes)
    counts = [base + (1 if i < extra else 0) for i in range(nodes)]
    return [c for c in counts if c > 0]
