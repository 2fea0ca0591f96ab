"""Fault 3: a node of a pilot allocation dies (its slurmd, slurmstepd and ranks, at once).

The allocation is rendered with ``--no-kill`` (and srun runs with ``--no-kill``), so SLURM
does not end it when the node is declared DOWN: the Dask scheduler drops the node's worker,
its tasks run again on the remaining workers and the run succeeds in the same allocation.
Tasks that land on the doomed node hold there until it dies, so which tasks were lost is
known exactly: each of them runs once more, elsewhere, and no other task runs twice.
Tasks elsewhere hold until the victim has begun two (however late its worker joins on a
busy machine), then all are released and the victim is killed.

A private cluster of three logical nodes (SlurmdTimeout 6 s, so the node is declared DOWN
within seconds); the node is started again at the end and must return to idle.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import status_json, write_workflow

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

N = 24
VICTIM = "n3"

WF = f"""
name: node-lost
tasks:
  - name: step
    foreach: {{i: {{range: [0, {N}]}}}}
    command: >-
      echo "begin $SLURMD_NODENAME" >> attempts/{{i}};
      if [ -e "hold-$SLURMD_NODENAME" ]; then sleep 300; fi;
      until [ -e release ]; do sleep 0.2; done;
      echo done > {{outputs}};
      echo "end $SLURMD_NODENAME" >> attempts/{{i}}
    outputs: ["out/{{i}}.txt"]
"""


def attempts(workdir: Path) -> dict[int, list[str]]:
    """Task index → its lines ("begin n2", "end n2" ...), in order."""
    found = {}
    for path in (workdir / "attempts").iterdir():
        lines = path.read_text().splitlines()
        if lines:  # an empty file: its task is writing its first line right now
            found[int(path.name)] = lines
    return found


def begun_on(workdir: Path, node: str) -> set[int]:
    return {i for i, lines in attempts(workdir).items() if f"begin {node}" in lines}


def wait_for(condition, timeout: float, what: str, detail=lambda: "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what} {detail()}")


def test_lost_node_tasks_rerun_on_the_remaining_workers(tmp_path, env, private_cluster):
    cluster = private_cluster(nodes=3, cpus=2, gpus=0, slurmd_timeout=6)
    (tmp_path / "attempts").mkdir()
    # Every task that starts on the victim holds there until the node dies.
    (tmp_path / f"hold-{VICTIM}").touch()
    wf = write_workflow(tmp_path, WF)
    run_env = {**env, **cluster.extra_env}
    started = time.monotonic()
    run = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "-q", "--profile",
         "slurm-test", "--nodes", "3"],
        cwd=tmp_path, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(lambda: len(begun_on(tmp_path, VICTIM)) >= 2, 90, f"two tasks on {VICTIM}")
        run_dir = next((tmp_path / ".hpcflow" / "runs").iterdir())
        workers = json.loads((run_dir / "workers.json").read_text())["workers"]
        names = [w["name"] for w in workers]
        # The victim runs a worker, and neither the scheduler (rank 0) nor the driver
        # (rank 1): those are on n1, where the batch script runs.
        assert any(name.endswith(f"@{VICTIM}") for name in names), names
        assert not any(name in (f"rank-0@{VICTIM}", f"rank-1@{VICTIM}") for name in names)
        (tmp_path / "release").touch()
        killed = cluster.kill_node(VICTIM)
        assert killed, f"nothing of {VICTIM} was running"
        lost = begun_on(tmp_path, VICTIM)  # read after the kill: one may have just begun
        out, err = run.communicate(timeout=150)
    finally:
        if run.poll() is None:
            run.kill()
    elapsed = time.monotonic() - started
    assert run.returncode == 0, out + err
    assert f"succeeded: {N} ran" in out + err, out + err

    # Nothing lost: every output is there.
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        f"{i}.txt" for i in range(N)
    )
    # The lost tasks ran exactly once more, on another node; nothing else ran twice.
    record = attempts(tmp_path)
    assert len(record) == N
    for i, lines in record.items():
        ends = [line for line in lines if line.startswith("end ")]
        assert len(ends) == 1, (i, lines)
        assert ends[0] != f"end {VICTIM}", (i, lines)
        begins = [line for line in lines if line.startswith("begin ")]
        if i in lost:
            assert begins[0] == f"begin {VICTIM}" and len(begins) == 2, (i, lines)
            assert begins[1] != f"begin {VICTIM}", (i, lines)
        else:
            assert len(begins) == 1, (i, lines)
    rerun = [i for i, lines in record.items() if len(lines) > 2]
    assert sorted(rerun) == sorted(lost)

    # Finished in the same allocation: no continuation was needed.
    status = status_json(run_env, tmp_path)
    assert status["status"] == "succeeded"
    assert all(set(c) == {"succeeded"} for c in status["counts"].values()), status["counts"]
    assert len(status["allocations"]) == 1

    # SLURM did declare the node down; started again, it returns to service.
    assert cluster.node_state(VICTIM).startswith("down"), cluster.node_state(VICTIM)
    cluster.start_node(VICTIM)
    print(f"lost {sorted(lost)}; run took {elapsed:.1f}s")


HELD_WF = WF.replace(
    'if [ -e "hold-$SLURMD_NODENAME" ]; then sleep 300; fi;',
    'if [ -e "hold-$SLURMD_NODENAME" ]; then echo "hold $SLURMD_NODENAME" >> attempts/{i}; '
    "sleep 300; fi;",
).replace("until [ -e release ]; do sleep 0.2; done;", "sleep 1;")


def test_lost_head_node_ends_the_allocation_and_the_resume_reruns_exactly_the_lost(
    tmp_path, env, private_cluster
):
    """The node running the batch script, the scheduler and the driver (ranks 0 and 1;
    the workers are on n2 and n3) dies: SLURM ends the allocation (NODE_FAIL, not
    requeued). The run fails naming the tasks in flight, and running it again re-runs
    exactly those and the ones not started."""
    cluster = private_cluster(nodes=3, cpus=2, gpus=0, slurmd_timeout=6)
    head = "n1"
    (tmp_path / "attempts").mkdir()
    wf = write_workflow(tmp_path, HELD_WF)
    run_env = {**env, **cluster.extra_env}
    argv = [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "-q", "--profile",
            "slurm-test", "--nodes", "3"]  # fmt: skip
    run = subprocess.Popen(
        argv, cwd=tmp_path, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip

    def ended() -> set[int]:
        return {
            i for i, lines in attempts(tmp_path).items() if any(x.startswith("end ") for x in lines)
        }

    def settled() -> bool:
        """Every task that began has ended or holds (at least one holds), and the state
        database has recorded every end."""
        record = attempts(tmp_path)
        holding = {i for i, lines in record.items() if lines[-1].startswith("hold ")}
        if not holding:
            return False
        if set(record) != ended() | holding:
            return False
        counts = status_json(run_env, tmp_path)["counts"]
        return sum(c.get("succeeded", 0) for c in counts.values()) == len(ended())

    try:
        wait_for(
            lambda: len(ended()) >= 6,
            180,
            "six tasks to finish",
            lambda: f"{attempts(tmp_path)} {cluster.run(['squeue'], check=False).stdout}",
        )
        for node in cluster.node_names:
            (tmp_path / f"hold-{node}").touch()
        wait_for(
            settled,
            60,
            "the in-flight tasks to hold",
            lambda: f"{attempts(tmp_path)} {status_json(run_env, tmp_path)['counts']}",
        )
        done_before = ended()
        assert cluster.kill_node(head)
        out, err = run.communicate(timeout=150)
    finally:
        if run.poll() is None:
            run.kill()
    # Read after the failure: a slot between two tasks may have begun (and held) one more
    # after the wait above.
    held = {i for i, lines in attempts(tmp_path).items() if lines[-1].startswith("hold ")}
    assert run.returncode != 0, out + err
    message = out + err
    print(message.strip().splitlines()[-1])
    assert "NODE_FAIL" in message, message
    # The failure names the tasks that were in flight: every held task among them.
    assert "in flight lost:" in message, message
    named = message.split("in flight lost:", 1)[1].split(";", 1)[0]
    for i in held:
        assert f"step[i={i}]" in named or f"step/{i}" in named or f"[{i}]" in named, (i, named)
    status = status_json(run_env, tmp_path)
    assert status["status"] == "failed"
    assert status["allocations"][0]["state"] in ("failed", "FAILED", "NODE_FAIL"), status

    # Resume on the repaired cluster: exactly the tasks not recorded as done run again.
    cluster.start_node(head)
    for node in cluster.node_names:
        (tmp_path / f"hold-{node}").unlink()
    resumed = subprocess.run(
        argv, cwd=tmp_path, env=run_env, capture_output=True, text=True, timeout=150
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"succeeded: {N - len(done_before)} ran, {len(done_before)} up to date" in (
        resumed.stdout + resumed.stderr
    ), resumed.stdout + resumed.stderr
    record = attempts(tmp_path)
    assert len(list((tmp_path / "out").iterdir())) == N
    for i, lines in record.items():
        ends = [line for line in lines if line.startswith("end ")]
        begins = [line for line in lines if line.startswith("begin ")]
        assert len(ends) == 1, (i, lines)  # nothing lost, nothing done twice
        if i in done_before:
            assert len(begins) == 1, (i, lines)  # done before the failure: not run again
        elif i in held:
            assert len(begins) == 2, (i, lines)  # lost in flight: exactly once more
        else:
            assert len(begins) == 1, (i, lines)  # never started before: once
