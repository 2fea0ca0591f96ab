"""Values between python tasks (``from:``) in a pilot allocation over several nodes of the
test cluster: each node writes and reads the values through its own client of the shared
GlusterFS volume. Then a re-run of the consumer alone, on a fresh allocation, hands it the
values of the first run."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.test_values import ALL, executions, expected, setup, total_result

pytestmark = pytest.mark.slurm


def hosts(tmp_path: Path) -> dict[str, str]:
    """Task id → the node it ran on, from the first run's state."""
    run = sorted((tmp_path / ".hpcflow" / "runs").iterdir())[0]
    conn = sqlite3.connect(f"file:{run / 'state.sqlite'}?mode=ro", uri=True)
    try:
        return dict(conn.execute("SELECT id, host FROM tasks").fetchall())
    finally:
        conn.close()


def test_values_cross_nodes_in_a_pilot_and_resume(tmp_path, hpcflow_slurm):
    wf = setup(tmp_path)
    first = hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "--nodes", "3", "-q")
    assert first.returncode == 0, first.output
    assert total_result(tmp_path) == expected()
    assert executions(tmp_path) == ALL
    print("nodes:", sorted(set(hosts(tmp_path).values())))

    again = hpcflow_slurm(
        "run", str(wf), "--profile", "slurm-test", "--nodes", "2", "--rerun", "total", "-q"
    )
    assert again.returncode == 0, again.output
    assert "1 ran, 9 up to date" in again.stdout, again.output
    assert executions(tmp_path) == Counter(["total"])
    assert total_result(tmp_path) == expected()
