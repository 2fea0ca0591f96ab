"""Values between python tasks (``from:``) in a pilot allocation over several nodes of the
test cluster: each node writes and reads the values through its own client of the shared
GlusterFS volume. Then a re-run of the consumer alone, on a fresh allocation, hands it the
values of the first run; and a pilot whose driver is killed in the middle resumes with
the values its workers had made, counted by executions (lines the tasks write)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.test_values import (
    ALL,
    executions,
    executions_so_far,
    expected,
    setup,
    total_result,
)
from tests.integration.slurm.conftest import run_logs

pytestmark = pytest.mark.slurm


def hosts(tmp_path: Path) -> dict[str, str]:
    """Task id → the host it ran on, as the task itself wrote it (``hosts.txt``)."""
    lines = (tmp_path / "hosts.txt").read_text().splitlines()
    return dict(line.rsplit(" ", 1) for line in lines if not line.startswith("end "))


def recorded_succeeded(tmp_path: Path) -> set[str]:
    """Tasks the (only) run's state says have succeeded: used to time a kill, not to count."""
    run = next((tmp_path / ".hpcflow" / "runs").iterdir())
    try:
        conn = sqlite3.connect(f"file:{run / 'state.sqlite'}?mode=ro", uri=True)
        try:
            rows = conn.execute("SELECT id FROM tasks WHERE state = 'succeeded'").fetchall()
        finally:
            conn.close()
    except sqlite3.Error:  # not created yet, or being written
        return set()
    return {row[0] for row in rows}


def test_values_cross_nodes_in_a_pilot_and_resume(tmp_path, hpcflow_slurm):
    wf = setup(tmp_path)
    first = hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "--nodes", "3", "-q")
    assert first.returncode == 0, first.output + run_logs(tmp_path)
    assert total_result(tmp_path) == expected()
    assert executions(tmp_path) == ALL
    # The values really crossed nodes: the squares ran on more than one node, so total
    # (on one node) received at least one square made on another, and each square's
    # host is a node of the test cluster, not the submit side.
    where = hosts(tmp_path)
    square_hosts = {where[f"square[i={i}]"] for i in range(4)}
    assert len(square_hosts) >= 2 or square_hosts != {where["total"]}, where
    assert all(host.startswith("n") for host in where.values()), where

    again = hpcflow_slurm(
        "run", str(wf), "--profile", "slurm-test", "--nodes", "2", "--rerun", "total", "-q"
    )
    assert again.returncode == 0, again.output + run_logs(tmp_path)
    assert "1 ran, 9 up to date" in again.stdout, again.output
    assert executions(tmp_path) == Counter(["total"])
    assert total_result(tmp_path) == expected()


def test_a_pilot_driver_killed_mid_run_resumes_with_the_values_it_made(
    tmp_path, slurm_env, hpcflow_slurm, slurm_cluster
):
    from hpcflow.store.process import MARK_VAR
    from tests.conftest import run_cli
    from tests.fault.test_driver_killed import kill_pilot_driver

    # Both runs start as from inside a task of another run: that run's mark is in their
    # environment. Their allocations must not carry it: the resume's driver ends what the
    # killed run left by its workers' marks, and an inherited mark taken for a worker's own
    # ended the resume's own ranks with them (its allocation failed at once).
    env = {**slurm_env, MARK_VAR: "an-outer-runs-task"}
    wf = setup(tmp_path)
    # square[i=0] ends after a second; the others wait for a release that comes only
    # after the kill (timing alone let all four end first on a busy machine).
    (tmp_path / "square_sleep").write_text("1")
    (tmp_path / "square_hold").touch()
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "-q",
         "--profile", "slurm-test", "--nodes", "2"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    # The kill comes once square[i=0] has ended (its own line says so) AND the driver has
    # recorded it: then it must never run again.
    kill_pilot_driver(
        proc,
        tmp_path,
        slurm_cluster,
        lambda: (
            "end square[i=0]" in executions_so_far(tmp_path)
            and "square[i=0]" in recorded_succeeded(tmp_path)
        ),
        "square[i=0] to end and be recorded",
    )
    before = executions(tmp_path)
    squares = {f"square[i={i}]" for i in range(4)}
    ended = {k.removeprefix("end ") for k in before if k.startswith("end ")}
    assert before["total"] == 0 and all(before[f"make[i={i}]"] == 1 for i in range(4)), before
    assert "square[i=0]" in ended and ended < squares, ("the kill came too late", before)
    (tmp_path / "square_sleep").unlink()
    (tmp_path / "square_release").touch()

    resumed = run_cli(("run", str(wf), "-q", "--profile", "slurm-test", "--nodes", "2"), env)
    assert resumed.returncode == 0, resumed.output + run_logs(tmp_path)
    after = executions(tmp_path)
    # The makes and the label had finished long before: their values come from the killed
    # run's folder. Every square that had not ended runs once more; one that had ended may
    # run again only if the kill came between its end and its report (one per slot).
    assert after["total"] == 1 and not any(after[f"make[i={i}]"] for i in range(4)), after
    assert after["label"] == 0, after
    assert all(after[s] == 1 for s in squares - ended), (after, ended)
    assert after["square[i=0]"] == 0, ("a recorded square ran again", after)
    assert max(after.values()) == 1, after
    assert total_result(tmp_path) == expected()
