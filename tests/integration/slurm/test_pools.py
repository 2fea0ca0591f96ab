"""Pools: one profile, two allocation shapes, on a test cluster whose nodes differ (n1-n2
CPU only, partition ``cpu``; n3-n4 with two GPUs of kind ``fakegpu`` each, partition
``gpu``). In jobs mode
every task's job goes to its pool's partition: CPU tasks land on CPU nodes, GPU tasks
(whole or a share) on GPU nodes with a device of their own, whether the task names its
pool or hpcflow picks the smallest that fits. The same through the PBS front ends."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcflow.modes.elastic_watch import read_samples
from hpcflow.store.statedb import StateDB
from tests.conftest import write_workflow
from tests.integration.slurm.conftest import queue_drains, run_logs
from tests.slurm_cluster import start_test_cluster

pytestmark = pytest.mark.slurm

POOLS = """
pools:
  cpu: {{partition: cpu, cpus_per_node: 2}}
  gpu: {{partition: gpu, cpus_per_node: 2, gpus_per_node: 2, gpu_kind: fakegpu}}
"""

#: Each task writes where it ran: the node, and the devices it was given.
WHERE = 'echo "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES" > {outputs}'

WORKFLOW = f"""
name: pools
tasks:
  - name: prep
    foreach: {{i: [1, 2]}}
    command: {WHERE}
    outputs: ["where/prep-{{i}}.txt"]
  - name: train
    needs: [prep]
    resources: {{gpus: 1, gpu_kind: fakegpu}}
    command: {WHERE}
    outputs: [where/train.txt]
  - name: share
    needs: [prep]
    resources: {{gpus: 0.5}}
    command: {WHERE}
    outputs: [where/share.txt]
  - name: post
    needs: [train, share]
    resources: {{pool: cpu}}
    command: {WHERE}
    outputs: [where/post.txt]
"""


@pytest.fixture(scope="module")
def shaped_cluster(slurm_cluster):
    """A cluster of two node shapes, on the session cluster's shared volume."""
    cluster = start_test_cluster(
        "with CPU and GPU partitions", nodes=4, cpus=2, gpus=2, gpu_nodes=2, gpu_type="fakegpu"
    )
    try:
        yield cluster
    finally:
        cluster.stop()


def _profile(folder: Path, base: str) -> Path:
    """A profile named ``pools-BASE``: the shipped test profile ``base`` with two pools."""
    shipped = Path(__file__).resolve().parents[3] / "hpcflow" / "settings" / "profiles"
    text = (shipped / f"{base}.yaml").read_text() + POOLS.format()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"pools-{base}.yaml").write_text(text)
    return folder


@pytest.mark.parametrize("base", ["slurm-test", "pbs-test"])
def test_each_task_runs_in_its_pool_on_nodes_of_its_shape(
    tmp_path, submit_tmp_path, env, shaped_cluster, base
):
    wf = write_workflow(tmp_path, WORKFLOW)
    run_env = {
        **env,
        **shaped_cluster.extra_env,
        "HPCFLOW_PROFILE_PATH": str(_profile(submit_tmp_path / "profiles", base)),
    }
    cli = [sys.executable, "-m", "hpcflow.cli.main"]
    plan = subprocess.run(
        [*cli, "run", str(wf), "--profile", f"pools-{base}", "--mode", "jobs", "--dry-run"],
        env=run_env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "jobs mode, in pool cpu: 3 task job(s)" in plan.stdout, plan.stdout
    assert "jobs mode, in pool gpu: 2 task job(s)" in plan.stdout, plan.stdout

    result = subprocess.run(
        [*cli, "run", str(wf), "--profile", f"pools-{base}", "--mode", "jobs", "-q"],
        env=run_env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr + run_logs(tmp_path)
    where = {p.stem: p.read_text().split() for p in sorted((tmp_path / "where").glob("*.txt"))}
    assert set(where) == {"prep-1", "prep-2", "train", "share", "post"}, where
    for name in ("prep-1", "prep-2", "post"):
        assert where[name][0] in ("n1", "n2") and len(where[name]) == 1, where
    for name in ("train", "share"):
        # A share of a GPU is a whole one for a job of its own.
        assert where[name][0] in ("n3", "n4") and where[name][1] in ("0", "1"), where
    run_dir = next((tmp_path / ".hpcflow" / "runs").iterdir())
    scripts = {p.name: p.read_text() for p in (run_dir / "jobs").glob("*.sh")}
    partitions = sorted(
        line.split()[-1].rpartition("=")[2]
        for text in scripts.values()
        for line in text.splitlines()
        if line.startswith(("#SBATCH --partition=", "#PBS -q "))
    )
    # prep (one array), train, share, post: each job in its pool's partition.
    assert partitions == ["cpu", "cpu", "gpu", "gpu"], scripts
    if base == "slurm-test":
        # train names its kind of GPU; share takes the pool's (a job of its own: whole).
        assert sum("#SBATCH --gres=gpu:fakegpu:1\n" in t for t in scripts.values()) == 2
    status = json.loads(
        subprocess.run(
            [*cli, "status", "--json", str(run_dir)],
            env=run_env,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout  # fmt: skip
    )
    assert status["status"] == "succeeded"
    # `hpcflow status` says which pool each job is for.
    assert sorted(a["pool"] for a in status["allocations"]) == ["cpu", "cpu", "gpu", "gpu"]
    assert queue_drains(shaped_cluster) == []


def test_a_task_no_pool_fits_is_refused_with_its_line(tmp_path, submit_tmp_path, env):
    """Before anything is created or submitted (no cluster is asked)."""
    wf = write_workflow(
        tmp_path,
        "name: big\ntasks:\n  - name: huge\n    resources: {gpus: 4}\n    command: 'true'\n",
    )
    run_env = {
        **env,
        "HPCFLOW_PROFILE_PATH": str(_profile(submit_tmp_path / "profiles", "slurm-test")),
    }
    result = subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile",
         "pools-slurm-test", "--mode", "jobs"],
        env=run_env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{wf}:4:" in result.stderr and "task 'huge' fits no pool" in result.stderr
    assert "gpu: 4 GPUs, its nodes have 2" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / ".hpcflow" / "runs").exists()


@pytest.mark.parametrize("base", ["slurm-test", "pbs-test"])
def test_a_pilot_run_has_an_allocation_per_pool_and_releases_the_gpu_pool_early(
    tmp_path, submit_tmp_path, env, shaped_cluster, base
):
    """One allocation per pool under one scheduler: the cpu pool's runs the scheduler,
    the driver and its workers; the gpu pool's only workers, which join them. Each task
    runs on its pool's nodes, and the gpu allocation ends (its workers retired) once the
    last GPU task has, while the CPU task after it still runs."""
    text = WORKFLOW.replace(
        f"    command: {WHERE}\n    outputs: [where/post.txt]",
        f"    command: sleep 20 && {WHERE}\n    outputs: [where/post.txt]",
    )
    wf = write_workflow(tmp_path, text)
    run_env = {
        **env,
        **shaped_cluster.extra_env,
        "HPCFLOW_PROFILE_PATH": str(_profile(submit_tmp_path / "profiles", base)),
    }
    result = subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile",
         f"pools-{base}", "--mode", "pilot", "-q"],
        env=run_env, capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr + run_logs(tmp_path)
    where = {p.stem: p.read_text().split() for p in sorted((tmp_path / "where").glob("*.txt"))}
    for name in ("prep-1", "prep-2", "post"):
        assert where[name][0] in ("n1", "n2") and len(where[name]) == 1, where
    for name in ("train", "share"):
        assert where[name][0] in ("n3", "n4") and where[name][1] in ("0", "1"), where
    run_dir = next((tmp_path / ".hpcflow" / "runs").iterdir())
    scripts = [(run_dir / "allocations" / f"{n}.sh").read_text() for n in (1, 2)]
    queue = "#SBATCH --partition=" if base == "slurm-test" else "#PBS -q "
    assert f"{queue}cpu\n" in scripts[0] and "--role head" in scripts[0]
    assert f"{queue}gpu\n" in scripts[1] and "--role head" not in scripts[1]
    assert "export HPCFLOW_POOL=gpu" in scripts[1]
    if base == "slurm-test":
        assert "#SBATCH --gres=gpu:fakegpu:2\n" in scripts[1]
    with StateDB(run_dir / "state.sqlite", readonly=True) as db:
        allocations = db.allocations()
        post = next(row for row in db.tasks() if row.name == "post")
    # Exactly one allocation per pool, both ended by themselves (none cancelled).
    assert [(a.number, a.state, a.pool) for a in allocations] == [
        (1, "completed", "cpu"),
        (2, "completed", "gpu"),
    ]
    gpu = allocations[1]
    driver_log = (run_dir / "driver.log").read_text()
    # Queued only once a GPU task was near ready (prep, which it needs, under way): not
    # with the head, so GPU nodes were not held while the CPU work before them ran. The
    # head's workers were ready (and prep not yet started) before that.
    ready = next(line for line in driver_log.splitlines() if "slots ready after" in line)
    ready_at = (
        time.mktime(time.strptime(ready[:19], "%Y-%m-%d %H:%M:%S")) + int(ready[20:23]) / 1000
    )
    assert gpu.submitted >= ready_at > allocations[0].submitted, (gpu, ready)
    assert gpu.updated is not None and post.ended is not None
    assert gpu.updated < post.ended - 5, (gpu.updated, post.ended)
    assert "pool gpu: its last task has ended; releasing its workers" in driver_log
    # The report draws each pool's hosts as lanes of their own, and names the pools.
    page = submit_tmp_path / "report.html"
    report = subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", "report", str(run_dir), "-o", str(page)],
        env=run_env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert report.returncode == 0, report.stdout + report.stderr
    html = page.read_text()
    assert "gpu · n3" in html or "gpu · n4" in html, "no gpu lane in the report"
    assert "cpu · n1" in html or "cpu · n2" in html, "no cpu lane in the report"
    assert f"allocation {gpu.native_id} · gpu" in html
    assert queue_drains(shaped_cluster) == []


def test_a_pool_allocation_that_ends_with_its_tasks_to_run_ends_the_run(
    tmp_path, submit_tmp_path, env, shaped_cluster
):
    """The gpu pool's allocation is cancelled (an operator, a failed node) before its
    tasks could run: they never can, so the run ends at once, naming that allocation and
    its logs, and the head allocation is cancelled rather than left to idle."""
    text = WORKFLOW.replace(
        f'    command: {WHERE}\n    outputs: ["where/prep-{{i}}.txt"]',
        f'    command: sleep 60 && {WHERE}\n    outputs: ["where/prep-{{i}}.txt"]',
    )
    assert "sleep 60" in text
    wf = write_workflow(tmp_path, text)
    run_env = {
        **env,
        **shaped_cluster.extra_env,
        "HPCFLOW_PROFILE_PATH": str(_profile(submit_tmp_path / "profiles", "slurm-test")),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile",
         "pools-slurm-test", "--mode", "pilot", "-q"],
        env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        gpu_job = None
        while gpu_job is None and time.monotonic() < deadline:
            out = shaped_cluster.run(["squeue", "-h", "-o", "%i %j %T"], check=False).stdout
            gpu_job = next(
                (line.split()[0] for line in out.splitlines()
                 if line.split()[1].endswith("-gpu") and line.split()[2] == "RUNNING"),
                None,
            )  # fmt: skip
            time.sleep(0.3)
        assert gpu_job is not None, "the gpu pool's allocation never ran"
        shaped_cluster.run(["scancel", gpu_job])
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2, out + err
    assert f"allocation {gpu_job} ended" in err, err
    assert "the allocation of pool gpu ended (CANCELLED" in err, err
    assert "2 of its task(s) still to run" in err and "Traceback" not in err, err
    assert "allocations/2.err" in err, err
    assert queue_drains(shaped_cluster) == []


def test_an_elastic_run_scales_each_pool_on_its_own_nodes(
    tmp_path, submit_tmp_path, env, shaped_cluster
):
    """Elastic mode with two pools: one scheduler on the submit host, worker jobs of each
    pool's shape, each pool scaled on its own backlog. No GPU worker job is queued while
    only CPU work waits; the GPU pool's jobs are retired once its tasks have ended, while
    the CPU task after them still runs."""
    text = WORKFLOW.replace(
        f"    command: {WHERE}\n    outputs: [where/post.txt]",
        f"    command: sleep 20 && {WHERE}\n    outputs: [where/post.txt]",
    ).replace(
        f'    command: {WHERE}\n    outputs: ["where/prep-{{i}}.txt"]',
        f'    command: sleep 5 && {WHERE}\n    outputs: ["where/prep-{{i}}.txt"]',
    )
    assert "sleep 20" in text and "sleep 5" in text
    wf = write_workflow(tmp_path, text)
    run_env = {
        **env,
        **shaped_cluster.extra_env,
        "HPCFLOW_PROFILE_PATH": str(_profile(submit_tmp_path / "profiles", "slurm-test")),
        "HPCFLOW_MIN_WORKERS": "0",
        "HPCFLOW_MAX_WORKERS": "2",
        "HPCFLOW_ADAPT_INTERVAL": "1",
        "HPCFLOW_ADAPT_WAIT_COUNT": "2",
    }
    cli = [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile",
           "pools-slurm-test", "--mode", "elastic", "--transport", "tcp"]  # fmt: skip
    plan = subprocess.run(
        [*cli, "--dry-run"], env=run_env, capture_output=True, text=True, timeout=120
    )
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "pool cpu worker job (up to 2 at once)" in plan.stdout, plan.stdout
    assert "pool gpu worker job (up to 2 at once)" in plan.stdout, plan.stdout
    result = subprocess.run([*cli, "-q"], env=run_env, capture_output=True, text=True, timeout=400)
    run_dir = next((tmp_path / ".hpcflow" / "runs").iterdir())
    assert result.returncode == 0, result.stdout + result.stderr + run_logs(run_dir)
    where = {p.stem: p.read_text().split() for p in sorted((tmp_path / "where").glob("*.txt"))}
    for name in ("prep-1", "prep-2", "post"):
        assert where[name][0] in ("n1", "n2") and len(where[name]) == 1, where
    for name in ("train", "share"):
        assert where[name][0] in ("n3", "n4") and where[name][1] in ("0", "1"), where
    # Each pool's worker job script: its partition (and the gpu pool's GPUs).
    cpu_script = (run_dir / "workers" / "job-cpu.sh").read_text()
    gpu_script = (run_dir / "workers" / "job-gpu.sh").read_text()
    assert "#SBATCH -p cpu\n" in cpu_script and "gres" not in cpu_script
    assert "#SBATCH -p gpu\n" in gpu_script and "#SBATCH --gres=gpu:fakegpu:2\n" in gpu_script
    with StateDB(run_dir / "state.sqlite", readonly=True) as db:
        rows = list(db.tasks())
    tasks = {row.name: row for row in rows}
    samples = read_samples(run_dir / "elastic.jsonl")
    pools = [(s["time"], s["pools"]["cpu"], s["pools"]["gpu"]) for s in samples]
    # While prep ran (before any GPU task was ready), no GPU worker job was asked for.
    prep_started = min(row.started for row in rows if row.name == "prep")
    before_gpu_work = [gpu for t, _, gpu in pools if t < prep_started + 3]
    assert before_gpu_work and all(g["requested"] == 0 for g in before_gpu_work), pools
    assert any(g["workers"] >= 1 for _, _, g in pools), pools
    # The gpu pool was down to no job well before post (a CPU task) ended, CPU still up.
    post = tasks["post"]
    assert post.ended is not None
    assert any(
        t < post.ended - 5 and t > tasks["train"].ended and g["requested"] == 0 and c["workers"]
        for t, c, g in pools
    ), pools
    assert queue_drains(shaped_cluster) == []


@pytest.mark.exclusive  # 1-minute allocations: bound to the walltime, not to the CPU
def test_a_pilot_run_with_pools_goes_on_in_a_continuation_of_every_pool(
    tmp_path, submit_tmp_path, env, shaped_cluster
):
    """``resubmit: true`` with two pools and a 1-minute walltime: the head (cpu) allocation
    drains before its walltime with CPU tasks left, and its continuation runs them; the
    GPU task after them gets the gpu pool's allocation queued again, under the new
    scheduler. Each allocation has its own number, script and logs."""
    wf = write_workflow(
        tmp_path,
        f"""
name: pools-continued
tasks:
  - name: slow
    foreach: {{i: {{range: [0, 6]}}}}
    resources: {{walltime: 25s}}
    command: sleep 20 && {WHERE}
    outputs: ["where/slow-{{i}}.txt"]
  - name: early
    resources: {{gpus: 1}}
    command: {WHERE}
    outputs: [where/early.txt]
  - name: late
    needs: [slow]
    resources: {{gpus: 0.5}}
    command: {WHERE}
    outputs: [where/late.txt]
""",
    )
    run_env = {
        **env,
        **shaped_cluster.extra_env,
        "HPCFLOW_PROFILE_PATH": str(_profile(submit_tmp_path / "profiles", "slurm-test")),
        "HPCFLOW_RESUBMIT": "true",
    }
    result = subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile",
         "pools-slurm-test", "--mode", "pilot", "--walltime", "1m", "-q"],
        env=run_env, capture_output=True, text=True, timeout=420,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr + run_logs(tmp_path)
    where = {p.stem: p.read_text().split() for p in sorted((tmp_path / "where").glob("*.txt"))}
    assert len(where) == 8, where
    for name in (f"slow-{i}" for i in range(6)):
        assert where[name][0] in ("n1", "n2"), where
    for name in ("early", "late"):
        assert where[name][0] in ("n3", "n4") and where[name][1] in ("0", "1"), where
    run_dir = next((tmp_path / ".hpcflow" / "runs").iterdir())
    with StateDB(run_dir / "state.sqlite", readonly=True) as db:
        allocations = db.allocations()
    # cpu (the head), gpu (early), then the head's continuation and the gpu pool's
    # allocation again for late; each under its own number. On a busy machine the
    # continuation can itself drain with slow tasks left and be continued again, so the
    # cpu continuations are one or more.
    pools = [a.pool for a in allocations]
    assert [a.number for a in allocations] == list(range(1, len(allocations) + 1)), allocations
    assert pools[:3] == ["cpu", "gpu", "cpu"] and pools[3:].count("gpu") == 1, allocations
    late_gpu = 4 + pools[3:].index("gpu")
    last_cpu = max(n for n, pool in enumerate(pools, 1) if pool == "cpu")
    # The head (and any continuation but the last) drained and ended by itself or, on a
    # busy machine, its last tasks ran into the time limit; the first gpu allocation,
    # idle once early was done (late, of its pool, still to come), ended with the head's
    # scheduler, was cancelled when the head ended, or reached its own time limit; the
    # last continuation ended by itself.
    states = {a.number: a.state for a in allocations}
    continued = [n for n, pool in enumerate(pools, 1) if pool == "cpu" and n != last_cpu]
    assert all(states[n] in ("completed", "timeout") for n in continued), allocations
    assert states[last_cpu] == "completed", allocations
    assert states[2] in ("completed", "cancelled", "timeout"), allocations
    if states[1] == "completed":
        assert "walltime drain" in (run_dir / "driver.log").read_text()
    scripts = {n: (run_dir / "allocations" / f"{n}.sh").read_text() for n in (3, late_gpu)}
    assert "--role head" in scripts[3] and "HPCFLOW_ALLOCATION_NUMBER=3" in scripts[3]
    assert "export HPCFLOW_POOL=gpu" in scripts[late_gpu]
    assert f"allocations/{late_gpu}.err" in scripts[late_gpu]
    assert queue_drains(shaped_cluster) == []


def test_a_fan_out_in_a_pool_whose_tasks_are_not_planned_yet(
    tmp_path, submit_tmp_path, env, shaped_cluster
):
    """A pilot run with pools whose GPU tasks are a fan-out (a task per chunk that a CPU
    task makes): the gpu pool is planned for them from the start, queued when they are
    near ready and not released before they are planned; they run on GPU nodes."""
    wf = write_workflow(
        tmp_path,
        f"""
name: pooled-fanout
tasks:
  - name: split
    command: mkdir -p chunks && for i in 1 2 3; do echo $i > chunks/$i; done
    outputs: [chunks]
  - name: train
    foreach: {{from_files: {{glob: "chunks/{{n}}", after: split}}}}
    resources: {{gpus: 1, gpu_kind: fakegpu}}
    command: {WHERE}
    outputs: ["where/train-{{n}}.txt"]
  - name: post
    needs: [train]
    resources: {{pool: cpu}}
    command: {WHERE}
    outputs: [where/post.txt]
""",
    )
    run_env = {
        **env,
        **shaped_cluster.extra_env,
        "HPCFLOW_PROFILE_PATH": str(_profile(submit_tmp_path / "profiles", "slurm-test")),
    }
    result = subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile",
         "pools-slurm-test", "--mode", "pilot", "-q"],
        env=run_env, capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr + run_logs(tmp_path)
    where = {p.stem: p.read_text().split() for p in sorted((tmp_path / "where").glob("*.txt"))}
    assert set(where) == {"train-1", "train-2", "train-3", "post"}, where
    for name in ("train-1", "train-2", "train-3"):
        assert where[name][0] in ("n3", "n4") and where[name][1] in ("0", "1"), where
    assert where["post"][0] in ("n1", "n2"), where
    run_dir = next((tmp_path / ".hpcflow" / "runs").iterdir())
    with StateDB(run_dir / "state.sqlite", readonly=True) as db:
        pools = [(a.number, a.pool) for a in db.allocations()]
    assert pools == [(1, "cpu"), (2, "gpu")]
    assert queue_drains(shaped_cluster) == []
