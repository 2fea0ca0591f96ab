"""Elastic mode against the real local SLURM: the driver runs here, dask-jobqueue workers
arrive as batch jobs, grow with the backlog and are retired when idle.

Worker jobs are kept small for the 2-core test machine: 1 core each, at most 3, and the
scaling is checked every second. Timings are not asserted; the recorded worker counts
(``RUN_DIR/elastic.jsonl``) are.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcflow.modes.elastic_watch import read_samples
from hpcflow.store.statedb import StateDB
from tests.conftest import processes_with, write_workflow
from tests.integration.slurm.conftest import queue_drains, run_logs

pytestmark = pytest.mark.slurm

SMALL = {
    "HPCFLOW_CPUS_PER_NODE": "1",
    "HPCFLOW_MIN_WORKERS": "1",
    "HPCFLOW_MAX_WORKERS": "3",
    "HPCFLOW_ADAPT_INTERVAL": "1",
    "HPCFLOW_ADAPT_WAIT_COUNT": "2",
}


def _elastic(slurm_env, wf: Path, *args: str, timeout: float = 120, **env: str):
    return subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile", "slurm-test",
         "--mode", "elastic", "-q", *args],
        env={**slurm_env, **SMALL, **env}, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def _run_dir(wf: Path) -> Path:
    (run_dir,) = (wf.parent / ".hpcflow" / "runs").iterdir()
    return run_dir


def _worker_jobs(slurm_cluster, run_id: str) -> list[str]:
    """Jobs of this run's workers that SLURM still lists as queued or running."""
    out = slurm_cluster.run(["squeue", "-h", "-o", "%i %j %T"], check=False).stdout
    return [line for line in out.splitlines() if run_id in line]


def test_workers_grow_to_the_maximum_then_idle_ones_are_retired(tmp_path, slurm_env, slurm_cluster):
    # A wide sweep (40 queued tasks) then one long task: during the long task only one
    # worker has anything to do, and the others are retired down to min_workers.
    wf = write_workflow(
        tmp_path,
        """
name: elastic
tasks:
  - name: wide
    foreach: {i: {range: [0, 40]}}
    command: sleep 0.5; echo {i} > {outputs}
    outputs: ["out/{i}.txt"]
  - name: long
    needs: [wide]
    command: sleep 12; echo done > long.txt
    outputs: [long.txt]
""",
    )
    result = _elastic(slurm_env, wf, "--transport", "tcp")
    run_dir = _run_dir(wf)
    assert result.returncode == 0, result.stdout + result.stderr + run_logs(run_dir)
    assert len(list((tmp_path / "out").iterdir())) == 40
    assert (tmp_path / "long.txt").read_text() == "done\n"

    samples = read_samples(run_dir / "elastic.jsonl")
    workers = [s["workers"] for s in samples]
    assert max(workers) == 3, workers
    assert max(s["requested"] for s in samples) == 3, samples
    peak = workers.index(3)
    # Later, while the run still goes on (jobs still requested), it is back at the minimum.
    assert any(s["workers"] == 1 and s["requested"] == 1 for s in samples[peak:]), samples
    # After the close no worker job is requested any more (the connected count may lag:
    # the cluster's view of its workers is refreshed asynchronously).
    assert samples[-1]["requested"] == 0, samples[-1]

    with StateDB(run_dir / "state.sqlite", readonly=True) as db:
        meta = db.meta()
    assert meta["status"] == "succeeded"
    assert meta["scheduler_address"].startswith("tcp://")
    run_id = meta["run_id"]
    # Three jobs at least were worker jobs of this run, each logged in the run directory.
    assert len(list((run_dir / "workers").glob(f"hpcflow-{run_id}-w-*.err"))) >= 3
    assert _worker_jobs(slurm_cluster, run_id) == []


def test_tls_run_completes_and_nothing_is_left(tmp_path, slurm_env, slurm_cluster):
    wf = write_workflow(
        tmp_path,
        """
name: secure
tasks:
  - name: t
    foreach: {i: {range: [0, 6]}}
    command: echo {i} > {outputs}
    outputs: ["out/{i}.txt"]
""",
    )
    result = _elastic(slurm_env, wf, "--transport", "tls", HPCFLOW_MIN_WORKERS="0")
    run_dir = _run_dir(wf)
    assert result.returncode == 0, result.stdout + result.stderr + run_logs(run_dir)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [f"{i}.txt" for i in range(6)]
    with StateDB(run_dir / "state.sqlite", readonly=True) as db:
        meta = db.meta()
    assert meta["scheduler_address"].startswith("tls://")
    assert "--protocol tls://" in (run_dir / "workers" / "job.sh").read_text()
    for name in ("ca.pem", "cert.pem", "key.pem"):
        assert (run_dir / "tls" / name).stat().st_mode & 0o777 == 0o600
    # Workers joined over TLS (each worker job's log says where it registered).
    logs = "".join(p.read_text() for p in (run_dir / "workers").glob("*.err"))
    assert re.search(r"Registered to: +tls://", logs), logs[-3000:]
    assert _worker_jobs(slurm_cluster, meta["run_id"]) == []


def test_unsubmittable_workers_fail_fast_with_sbatchs_words(tmp_path, slurm_env, slurm_cluster):
    wf = write_workflow(tmp_path, "name: bad\ntasks:\n  - name: a\n    command: 'true'\n")
    result = _elastic(slurm_env, wf, "--partition", "nosuch", timeout=90)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "elastic worker jobs could not be submitted" in result.stderr
    assert "Invalid partition" in result.stderr and "Traceback" not in result.stderr
    run_dir = _run_dir(wf)
    assert str(run_dir / "workers" / "job.sh") in result.stderr
    with StateDB(run_dir / "state.sqlite", readonly=True) as db:
        assert db.meta()["status"] == "failed"
    assert queue_drains(slurm_cluster) == []


def test_ctrl_c_mid_run_cancels_the_worker_jobs(tmp_path, slurm_env, slurm_cluster):
    marker = f"hpcflow-elastic-cancel-{time.time_ns()}"
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
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile", "slurm-test",
         "--mode", "elastic", "--transport", "tcp", "-q"],
        env={**slurm_env, **SMALL}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(processes_with(marker)) < 2:
        time.sleep(0.2)
    assert len(processes_with(marker)) >= 2, "tasks never started"
    run_id = json.loads((_run_dir(wf) / "run.json").read_text())["run_id"]
    assert len(_worker_jobs(slurm_cluster, run_id)) >= 2
    # `hpcflow status` from another shell shows the elastic cluster's size.
    shown = subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", "status", run_id],
        env=slurm_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert re.search(r"elastic workers: [12] connected, \d+ worker job", shown.stdout), (
        shown.stdout + shown.stderr
    )
    # Ctrl-C: SIGINT, the signal dask-jobqueue would turn into sys.exit() if let.
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (
        _worker_jobs(slurm_cluster, run_id) or processes_with(marker)
    ):
        time.sleep(0.3)
    assert _worker_jobs(slurm_cluster, run_id) == []
    assert processes_with(marker) == []
    with StateDB(_run_dir(wf) / "state.sqlite", readonly=True) as db:
        assert db.meta()["status"] == "cancelled"


def test_gpu_tasks_get_a_device_of_their_own(tmp_path, slurm_env, slurm_cluster):
    # per-gpu workers: one worker job per GPU, so SLURM gives each worker its device.
    wf = write_workflow(
        tmp_path,
        """
name: gpus
tasks:
  - name: gpu
    foreach: {i: [1, 2, 3, 4]}
    resources: {gpus: 1}
    command: sleep 0.5; echo "$CUDA_VISIBLE_DEVICES" > {outputs}
    outputs: ["gpu-{i}.txt"]
""",
    )
    result = subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile", "slurm-test-gpu",
         "--mode", "elastic", "--transport", "tcp", "-q"],
        env={**slurm_env, **SMALL, "HPCFLOW_CPUS_PER_NODE": "2", "HPCFLOW_MAX_WORKERS": "2"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    run_dir = _run_dir(wf)
    assert result.returncode == 0, result.stdout + result.stderr + run_logs(run_dir)
    seen = [p.read_text().strip() for p in sorted(tmp_path.glob("gpu-*.txt"))]
    assert len(seen) == 4 and all(v in ("0", "1") for v in seen), seen
    assert "#SBATCH --gres=gpu:1" in (run_dir / "workers" / "job.sh").read_text()
    # A GPU task cannot go to the CPU-only test profile: refused before anything is queued.
    refused = _elastic(slurm_env, wf, "--force")
    assert refused.returncode == 2 and "asks for 1 GPUs" in refused.stderr, refused.stderr
    assert queue_drains(slurm_cluster) == []


def test_pbs_front_ends_run_elastic_workers(tmp_path, slurm_env, slurm_cluster):
    wf = write_workflow(
        tmp_path / "wf",
        """
name: pbs
tasks:
  - name: t
    foreach: {i: {range: [0, 4]}}
    command: echo {i} > {outputs}
    outputs: ["out/{i}.txt"]
""",
    )
    result = subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile", "pbs-test",
         "--mode", "elastic", "-q"],
        # The Torque wrappers ignore #PBS -o/-e: worker logs land in the current folder.
        env={**slurm_env, **SMALL}, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    run_dir = _run_dir(wf)
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(list((tmp_path / "wf" / "out").iterdir())) == 4
    script = (run_dir / "workers" / "job.sh").read_text()
    assert "#PBS -l nodes=1:ppn=1" in script and "--protocol tls://" in script
    run_id = json.loads((run_dir / "run.json").read_text())["run_id"]
    assert _worker_jobs(slurm_cluster, run_id) == []
