"""Rank → role: a pure function, so the layout is obvious and testable."""

from __future__ import annotations

import enum

#: Ranks that are not workers: 0 = scheduler, 1 = driver.
NON_WORKER_RANKS = 2


class Role(str, enum.Enum):
    SCHEDULER = "scheduler"
    DRIVER = "driver"
    WORKER = "worker"


def role_for(rank: int) -> Role:
    if rank == 0:
        return Role.SCHEDULER
    if rank == 1:
        return Role.DRIVER
    return Role.WORKER


def worker_count(world_size: int) -> int:
    return max(0, world_size - NON_WORKER_RANKS)


def gpu_rotation(visible: list[str], worker_local_index: int) -> list[str]:
    """CUDA_VISIBLE_DEVICES for the k-th worker on a node: its GPU first, peers still visible."""
    if not visible:
        return []
    k = worker_local_index % len(visible)
    return visible[k:] + visible[:k]
