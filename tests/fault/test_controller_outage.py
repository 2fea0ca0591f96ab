"""Fault 4: the SLURM controller is stopped for 60 s during a pilot run, then started.

hpcflow keeps polling with backoff through the outage (status commands fail), keeps its
state, and the run continues and succeeds: no task is marked failed for it, and nothing
is submitted twice. A private cluster, so no other test sees the outage.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.conftest import status_json, write_workflow
from tests.slurm_cluster import start_test_cluster

#: exclusive: the outage is timed against the controller's own timeouts.
pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.exclusive]

OUTAGE = 60

HELD = """
name: outage
tasks:
  - name: before
    command: echo before > before.txt
    outputs: [before.txt]
  - name: held
    needs: [before]
    command: >-
      for i in $(seq 1800); do [ -e release ] && break; sleep 0.1; done;
      [ -e release ] && echo held > held.txt
    outputs: [held.txt]
  - name: after
    needs: [held]
    command: echo after > after.txt
    outputs: [after.txt]
"""


@pytest.fixture
def own_cluster():
    cluster = start_test_cluster(nodes=1, cpus=2, gpus=0)
    try:
        yield cluster
    finally:
        cluster.stop()


def test_controller_outage_is_ridden_out(tmp_path, env, own_cluster):
    wf = write_workflow(tmp_path, HELD)
    run_env = {**env, **own_cluster.extra_env}
    run = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile", "slurm-test",
         "-q"],
        cwd=tmp_path, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not (tmp_path / "before.txt").exists():
        time.sleep(0.2)
    assert (tmp_path / "before.txt").exists(), "the allocation never ran a task"
    own_cluster.stop_controller()
    try:
        down = own_cluster.run(["squeue", "-h"], check=False, timeout=30)
        assert down.returncode != 0  # the outage is real: status commands fail
        time.sleep(OUTAGE)
    finally:
        own_cluster.start_controller()
    (tmp_path / "release").touch()
    out, err = run.communicate(timeout=240)
    assert run.returncode == 0, out + err
    assert (tmp_path / "after.txt").read_text() == "after\n"
    status = status_json(run_env, tmp_path)
    assert status["status"] == "succeeded"
    assert all(set(c) == {"succeeded"} for c in status["counts"].values()), status["counts"]
    assert len(status["allocations"]) == 1  # nothing was submitted again
