"""Pilot mode against the real local SLURM: one allocation boots Dask over srun ranks."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import HOSTILE_VALUES, REPO, processes_with, write_workflow
from tests.integration.slurm.conftest import queue_drains, queued_jobs, run_logs

pytestmark = pytest.mark.slurm


@pytest.mark.parametrize("nodes", [1, 3])
@pytest.mark.parametrize("name", ["hello", "sweep", "python-tasks"])
def test_examples_in_one_allocation(example, hpcflow_slurm, name, nodes):
    wf = example(name)
    result = hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "--nodes", str(nodes), "-q")
    assert result.returncode == 0, result.output + run_logs(wf.parent)
    assert "submitted allocation" in result.stdout
    status = json.loads(hpcflow_slurm("status", "--json").stdout)
    assert status["status"] == "succeeded"
    assert all(set(c) == {"succeeded"} for c in status["counts"].values())
    if name == "sweep":
        assert (wf.parent / "results" / "summary.txt").read_text().startswith("estimates=120 ")
    # Logs have the same layout as local runs.
    run_dir = Path(status["run_dir"])
    if name == "python-tasks":
        outs = list((run_dir / "tasks").glob("square.x=3-*/1.out"))
        assert [p.read_text() for p in outs] == ["squared 3\n"]
    assert (run_dir / "allocations" / "1.sh").read_text().count("#SBATCH --nodes=") == 1


def test_mpi_task_allreduce_over_two_nodes(tmp_path, hpcflow_slurm):
    (tmp_path / "allreduce.py").write_text(
        "import os\nfrom mpi4py import MPI\ncomm = MPI.COMM_WORLD\n"
        "total = comm.allreduce(comm.Get_rank() + 1)\n"
        "nodes = comm.gather(os.environ['SLURMD_NODENAME'])\n"
        "if comm.Get_rank() == 0:\n"
        "    open('allreduce.txt', 'w').write(f'{comm.Get_size()} {total} {len(set(nodes))}')\n"
    )
    wf = write_workflow(
        tmp_path,
        f"""
name: mpi
tasks:
  - name: allreduce
    resources: {{ranks: 4, nodes: 2}}
    argv: [{sys.executable}, allreduce.py]
    outputs: [allreduce.txt]
""",
    )
    result = hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "--nodes", "3", "-q")
    assert result.returncode == 0, result.output + run_logs(wf.parent)
    assert (tmp_path / "allreduce.txt").read_text() == "4 10 2"


def test_an_mpi_task_that_fits_a_worker_starts_on_its_node_without_a_step(tmp_path, slurm_env):
    """With local_mpi_launch (Open MPI's mpirun, no daemons), a two-rank task of one node
    runs its ranks on its worker's node, started by mpirun rather than as an srun step,
    and they still talk MPI; a four-rank task over two nodes is still a step."""
    from tests.conftest import run_cli

    (tmp_path / "ranks.py").write_text(
        "import os, sys\nfrom mpi4py import MPI\ncomm = MPI.COMM_WORLD\n"
        "total = comm.allreduce(comm.Get_rank() + 1)\n"
        "seen = comm.gather((os.environ['SLURMD_NODENAME'],\n"
        "                    os.environ.get('OMPI_COMM_WORLD_SIZE', 'step')))\n"
        "if comm.Get_rank() == 0:\n"
        "    open(sys.argv[1], 'w').write(f'{comm.Get_size()} {total} {sorted(set(seen))}')\n"
    )
    wf = write_workflow(
        tmp_path,
        f"""
name: mpi-local
tasks:
  - name: local
    resources: {{ranks: 2, nodes: 1}}
    argv: [{sys.executable}, ranks.py, local.txt]
    outputs: [local.txt]
  - name: wide
    resources: {{ranks: 4, nodes: 2}}
    argv: [{sys.executable}, ranks.py, wide.txt]
    outputs: [wide.txt]
""",
    )
    env = {
        **slurm_env,
        "HPCFLOW_LOCAL_MPI_LAUNCH": "[mpirun, --mca, plm, isolated, --oversubscribe, "
        "--bind-to, none]",
    }
    result = run_cli(
        ("run", str(wf), "--profile", "slurm-test", "--nodes", "2", "-q"), env, None, 240
    )
    assert result.returncode == 0, result.output + run_logs(wf.parent)
    size, total, seen = (tmp_path / "local.txt").read_text().split(" ", 2)
    # Both ranks on one node (the worker's), started by mpirun (which sets OMPI_*).
    assert (size, total) == ("2", "3") and re.fullmatch(r"\[\('n\d', '2'\)\]", seen), seen
    size, total, seen = (tmp_path / "wide.txt").read_text().split(" ", 2)
    assert (size, total) == ("4", "10") and "'step'" in seen and "'2'" not in seen, seen


def test_gpu_tasks_see_distinct_devices(tmp_path, hpcflow_slurm):
    wf = write_workflow(
        tmp_path,
        """
name: gpus
tasks:
  - name: gpu
    foreach: {i: [1, 2, 3, 4, 5, 6, 7, 8]}
    resources: {gpus: 1}
    command: sleep 0.3; echo "$CUDA_VISIBLE_DEVICES" > {outputs}
    outputs: ["gpu-{i}.txt"]
""",
    )
    result = hpcflow_slurm("run", str(wf), "--profile", "slurm-test-gpu", "--nodes", "2", "-q")
    assert result.returncode == 0, result.output + run_logs(wf.parent)
    seen = {p.read_text().strip() for p in tmp_path.glob("gpu-*.txt")}
    # Each task sees its worker's own device only (not the node's other one after it).
    assert seen == {"0", "1"}, seen
    # A GPU task cannot go to the CPU-only test profile: refused before submitting.
    refused = hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "--force")
    assert refused.returncode == 2 and "asks for 1 GPUs" in refused.stderr


def test_shares_of_a_gpu_and_whole_gpus_never_overbook_a_device(tmp_path, hpcflow_slurm):
    """gpus: 0.5 tasks share a device two at a time, a gpus: 1 task has one to itself;
    each sees only the device it got (asserted from what the tasks wrote, with their
    start and end times)."""
    wf = write_workflow(
        tmp_path,
        """
name: shares
tasks:
  - name: half
    foreach: {i: [1, 2, 3, 4, 5, 6]}
    resources: {gpus: 0.5}
    command: >-
      s=$(date +%s.%N); sleep 2;
      echo "$SLURMD_NODENAME/$CUDA_VISIBLE_DEVICES 0.5 $s $(date +%s.%N)" > half-{i}.txt
    outputs: ["half-{i}.txt"]
  - name: whole
    foreach: {i: [1, 2]}
    resources: {gpus: 1}
    command: >-
      s=$(date +%s.%N); sleep 1;
      echo "$SLURMD_NODENAME/$CUDA_VISIBLE_DEVICES 1 $s $(date +%s.%N)" > whole-{i}.txt
    outputs: ["whole-{i}.txt"]
""",
    )
    # Two slots per GPU worker, so that a worker can run two halves at once (with one slot,
    # the test cluster's default on 2 cpus, a worker runs one task at a time whatever its
    # GPU shares allow).
    shipped = REPO / "hpcflow" / "settings" / "profiles" / "slurm-test-gpu.yaml"
    profile = tmp_path / "gpu-two-slots.yaml"
    profile.write_text(shipped.read_text() + "threads_per_worker: 2\n")
    result = hpcflow_slurm("run", str(wf), "--profile", str(profile), "--nodes", "1", "-q")
    assert result.returncode == 0, result.output + run_logs(wf.parent)
    rows = [p.read_text().split() for p in sorted(tmp_path.glob("*-*.txt"))]
    assert len(rows) == 8 and all(re.fullmatch(r"n\d/[01]", r[0]) for r in rows), rows
    for device in {r[0] for r in rows}:
        spans = [(float(r[2]), float(r[3]), float(r[1])) for r in rows if r[0] == device]
        for start, _, _ in spans:
            load = sum(share for s, e, share in spans if s <= start < e)
            assert load <= 1.0, (device, spans)
    # And shares really are shared: on some device, two halves ran at the same time.
    halves = [(r[0], float(r[2]), float(r[3])) for r in rows if r[1] == "0.5"]
    shared = [
        (a, b)
        for a in halves
        for b in halves
        if a is not b and a[0] == b[0] and a[1] <= b[1] < a[2]
    ]
    assert shared, ("no two halves ever shared a device", rows)


def test_hostile_values_in_an_allocation(tmp_path, hpcflow_slurm):
    tasks = [
        {
            "name": f"t{n} {v}",
            "params": {"v": v},
            "command": "printf '%s' {v} > {outputs}",
            "outputs": [f"out/{n}.txt"],
        }
        for n, v in enumerate(HOSTILE_VALUES)
    ]
    work = tmp_path / "dir with 'quotes' and spaces"
    work.mkdir()
    wf = work / "workflow.yaml"
    wf.write_text(yaml.safe_dump({"name": "hostile; touch CANARY", "tasks": tasks}))
    result = hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "-q", cwd=tmp_path)
    assert result.returncode == 0, result.output + run_logs(wf.parent)
    for n, value in enumerate(HOSTILE_VALUES):
        assert (work / "out" / f"{n}.txt").read_text() == value
    assert list(tmp_path.rglob("CANARY")) == []


def test_cancel_mid_run_leaves_nothing(tmp_path, slurm_env, slurm_cluster):
    marker = f"hpcflow-pilot-cancel-{time.time_ns()}"
    wf = write_workflow(
        tmp_path,
        f"""
name: long
tasks:
  - name: long
    foreach: {{i: [1, 2]}}
    command: sleep 120; echo {marker}
""",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile", "slurm-test", "-q"],
        env=slurm_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(processes_with(marker)) < 2:
        time.sleep(0.2)
    assert len(processes_with(marker)) >= 2, "tasks never started"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (queued_jobs(slurm_cluster) or processes_with(marker)):
        time.sleep(0.3)
    assert queued_jobs(slurm_cluster) == []
    assert processes_with(marker) == []


def test_detach_then_status_and_bad_partition(tmp_path, hpcflow_slurm, slurm_cluster):
    wf = write_workflow(
        tmp_path,
        """
name: detached
tasks:
  - name: a
    command: sleep 1; echo done > a.txt
    outputs: [a.txt]
""",
    )
    result = hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "--detach")
    assert result.returncode == 0, result.output
    assert "detached" in result.stdout
    deadline = time.monotonic() + 60
    status: dict = {}
    while time.monotonic() < deadline:
        status = json.loads(hpcflow_slurm("status", "--json").stdout)
        if status["status"] in ("succeeded", "failed"):
            break
        time.sleep(0.5)
    assert status["status"] == "succeeded", status
    assert (tmp_path / "a.txt").read_text() == "done\n"
    assert queue_drains(slurm_cluster) == []  # and its allocation has ended

    bad = hpcflow_slurm(
        "run", str(wf), "--profile", "slurm-test", "--partition", "nosuch", "--force"
    )
    assert bad.returncode == 2
    assert "partition" in bad.stderr and "Traceback" not in bad.stderr


def test_a_sweep_over_files_runs_what_was_planned_though_files_appear(
    tmp_path, hpcflow_slurm, slurm_cluster
):
    """The allocation rebuilds the run's instances from what the sweep read when the run
    was planned (sources.json), not from the folder as it is when the nodes start."""
    (tmp_path / "in").mkdir()
    for name in ("a", "b"):
        (tmp_path / "in" / f"{name}.txt").write_text(name)
    (tmp_path / "samples.csv").write_text("sample,size\na,1\nb,2\n")
    wf = write_workflow(
        tmp_path,
        """
name: sourced
tasks:
  - name: copy
    foreach: {from_files: "in/{s}.txt"}
    command: sleep 1; cp in/{s}.txt {outputs}
    outputs: ["out/{s}.txt"]
  - name: label
    foreach: {from_table: samples.csv}
    command: echo {sample} {size} > {outputs}
    outputs: ["labels/{sample}.txt"]
""",
    )
    result = hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "--detach")
    assert result.returncode == 0, result.output
    # After planning, before the allocation's nodes read the workflow: more inputs.
    (tmp_path / "in" / "c.txt").write_text("c")
    with (tmp_path / "samples.csv").open("a") as sheet:
        sheet.write("c,3\n")
    (run_dir,) = (tmp_path / ".hpcflow" / "runs").iterdir()
    deadline = time.monotonic() + 120
    status: dict = {}
    while time.monotonic() < deadline:
        status = json.loads(hpcflow_slurm("status", "--json", str(run_dir)).stdout)
        if status["status"] in ("succeeded", "failed"):
            break
        time.sleep(0.5)
    assert status["status"] == "succeeded", (status, run_logs(run_dir))
    assert status["counts"] == {"copy": {"succeeded": 2}, "label": {"succeeded": 2}}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.txt", "b.txt"]
    assert queue_drains(slurm_cluster) == []


def test_pending_reason_in_status_and_cancel(tmp_path, slurm_env, hpcflow_slurm, slurm_cluster):
    wf = write_workflow(
        tmp_path,
        """
name: later
tasks:
  - name: a
    command: echo never > a.txt
""",
    )
    env_later = {**slurm_env, "HPCFLOW_EXTRA_DIRECTIVES": "--begin=now+1hour"}
    submitted = subprocess.run(
        [
            sys.executable,
            "-m",
            "hpcflow.cli.main",
            "run",
            str(wf),
            "--profile",
            "slurm-test",
            "--detach",
        ],
        env=env_later,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    status = json.loads(hpcflow_slurm("status", "--json").stdout)
    (allocation,) = status["allocations"]
    deadline = time.monotonic() + 20
    while allocation["reason"] is None and time.monotonic() < deadline:
        time.sleep(0.5)
        (allocation,) = json.loads(hpcflow_slurm("status", "--json").stdout)["allocations"]
    assert allocation["state"] == "queued"
    assert allocation["reason"] == "Waiting for its requested start time."
    human = hpcflow_slurm("status").stdout
    assert f"allocation {allocation['native_id']}" in human and "requested start time" in human
    cancelled = hpcflow_slurm("cancel", status["run_id"])
    assert cancelled.returncode == 0, cancelled.output
    assert allocation["native_id"] in cancelled.stdout
    assert queue_drains(slurm_cluster, timeout=15) == []


def test_allocation_failure_names_job_state_and_logs(tmp_path, slurm_env):
    wf = write_workflow(
        tmp_path,
        """
name: broken
tasks:
  - name: a
    command: echo hi > a.txt
    outputs: [a.txt]
""",
    )
    env_broken = {**slurm_env, "HPCFLOW_PYTHON": "/nonexistent/python3"}
    result = subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile", "slurm-test", "-q"],
        env=env_broken,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    match = re.search(r"allocation (\d+) ended (\w+)", result.stderr)
    assert match, result.stderr
    assert match.group(2) == "FAILED"
    assert "allocations/1.err" in result.stderr and "Traceback" not in result.stderr
