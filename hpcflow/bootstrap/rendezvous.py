"""How ranks learn the scheduler's address: MPI broadcast, or a file on the shared run dir."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from hpcflow.bootstrap.preflight import PreflightError
from hpcflow.store.atomic import write_json_atomic


def publish(
    address: str,
    *,
    comm: Any,
    path: Path,
    allocation: str,
    extra: dict[str, Any] | None = None,
) -> None:
    """Rank 0: tell every rank (and ``hpcflow status``) where the scheduler listens."""
    write_json_atomic(path, {**(extra or {}), "address": address, "allocation": allocation})
    if comm is not None:
        comm.bcast(address, root=0)


def receive(*, comm: Any, path: Path, allocation: str | None, timeout: float = 120.0) -> str:
    """Ranks ≥ 1: wait for the scheduler's address, published by ``allocation`` (any
    allocation for None: the workers of a pool's own allocation)."""
    if comm is not None:
        return str(comm.bcast(None, root=0))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if allocation is None or data.get("allocation") == allocation:
                return str(data["address"])
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.1)
    raise PreflightError(
        f"no scheduler address appeared in {path} within {timeout:.0f}s",
        hint="rank 0 failed to start the scheduler: see the allocation's stderr log",
    )
