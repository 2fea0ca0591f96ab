"""Jobs mode against the real local SLURM, directly (``slurm-test``: sbatch/squeue/scancel)
and through its PBS front ends (``pbs-test``: qsub/qstat/qdel, Torque flavour): every task
is its own batch job, a sweep a job array, dependencies held by the scheduler or
released by the submit host. One suite, parametrized over the two backends."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hpcflow.backends._commands import CommandRunner
from hpcflow.backends.registry import get_backend
from hpcflow.engine.prepare import RunOptions, prepare
from hpcflow.errors import SubmitError
from hpcflow.modes.jobs import run_jobs
from hpcflow.settings import resolve_profile
from tests.conftest import HOSTILE_VALUES, processes_with, write_workflow
from tests.integration.slurm.conftest import queue_drains, queued_jobs, run_logs

pytestmark = pytest.mark.slurm

PROFILES = ["slurm-test", "pbs-test"]
SUBMIT = {"slurm-test": "sbatch", "pbs-test": "qsub"}
STATUS = {"slurm-test": "squeue", "pbs-test": "qstat"}


def _status(hpcflow_slurm) -> dict:
    return json.loads(hpcflow_slurm("status", "--json").stdout)


#: The sweep example's 120 array elements take about 20 s on the 8 slots of the test
#: cluster (it starts about 8 elements every 1-2 s, however short they are).
EXAMPLES = ["hello", pytest.param("sweep", marks=pytest.mark.slow), "python-tasks"]


@pytest.mark.parametrize("name", EXAMPLES)
@pytest.mark.parametrize("profile", PROFILES)
def test_examples_in_jobs_mode(example, hpcflow_slurm, slurm_cluster, profile, name):
    wf = example(name)
    result = hpcflow_slurm("run", str(wf), "--profile", profile, "--mode", "jobs", "-q")
    assert result.returncode == 0, result.output + run_logs(wf.parent)
    status = _status(hpcflow_slurm)
    assert status["status"] == "succeeded"
    assert all(set(c) == {"succeeded"} for c in status["counts"].values())
    run_dir = Path(status["run_dir"])
    # One batch job per task definition (a sweep is one array), each ended.
    tasks = {"hello": 3, "sweep": 2, "python-tasks": 2}[name]
    assert len(list((run_dir / "jobs").glob("*.sh"))) == tasks
    assert len(status["allocations"]) == tasks
    assert {a["state"] for a in status["allocations"]} <= {"completed"}
    assert queue_drains(slurm_cluster) == []
    if name == "sweep":
        assert (wf.parent / "results" / "summary.txt").read_text().startswith("estimates=120 ")
        script = (run_dir / "jobs" / "1.sh").read_text()
        # 120 instances, ONE submission: an array (SLURM --array, Torque -t).
        array = "#SBATCH --array=0-119\n" if profile == "slurm-test" else "#PBS -t 0-119\n"
        assert array in script
        assert "afterok:" in (run_dir / "jobs" / "2.sh").read_text()
    if name == "python-tasks":
        # Logs have the same layout as the other modes, and `hpcflow logs` reads them.
        outs = list((run_dir / "tasks").glob("square.x=3-*/1.out"))
        assert [p.read_text() for p in outs] == ["squared 3\n"]
        logs = hpcflow_slurm("logs", status["run_id"], "square[x=3]")
        assert logs.returncode == 0 and "squared 3" in logs.stdout, logs.output
    if name == "hello":
        assert (wf.parent / "results" / "count.txt").read_text().strip() == "3"
        # The state and memo are shared by every mode: a pilot-mode re-run resumes.
        again = hpcflow_slurm("run", str(wf), "--profile", profile, "--mode", "pilot", "-q")
        assert again.returncode == 0, again.output
        assert "0 ran, 5 up to date" in again.stdout
        assert "submitted" not in again.stdout


PIPELINE = """
name: pipeline
tasks:
  - name: make
    foreach: {i: [1, 2, 3]}
    # The pause lets every job be queued before the failure is known.
    command: sleep 2; test {i} != 2 && echo {i} > {outputs}
    outputs: ["out/make-{i}.txt"]
  - name: use
    foreach: {i: [1, 2, 3]}
    inputs: ["out/make-{i}.txt"]
    command: cat {inputs} > {outputs}
    outputs: ["out/use-{i}.txt"]
  - name: reduce
    inputs: ["out/use-*.txt"]
    command: cat {inputs} > {outputs}
    outputs: [out/all.txt]
  - name: alone
    command: echo alone > {outputs}
    outputs: [out/alone.txt]
"""


@pytest.mark.parametrize(
    ("profile", "dependencies"),
    [("slurm-test", "scheduler"), ("pbs-test", "scheduler"), ("slurm-test", "driver")],
)
def test_failing_upstream_skips_dependents_and_empties_the_queue(
    tmp_path, hpcflow_slurm, slurm_env, slurm_cluster, profile, dependencies
):
    """make[i=2] fails: use[i=2] and reduce are skipped (their queued jobs cancelled, never
    left pending as DependencyNeverSatisfied); use[i=1], use[i=3] still run."""
    wf = write_workflow(tmp_path, PIPELINE)
    slurm_env["HPCFLOW_DEPENDENCIES"] = dependencies
    result = hpcflow_slurm("run", str(wf), "--profile", profile, "--mode", "jobs", "-q")
    assert result.returncode == 1, result.output + run_logs(wf.parent)
    assert queue_drains(slurm_cluster) == []
    status = _status(hpcflow_slurm)
    assert status["status"] == "failed"
    assert status["counts"] == {
        "make": {"succeeded": 2, "failed": 1},
        "use": {"succeeded": 2, "skipped": 1},
        "reduce": {"skipped": 1},
        "alone": {"succeeded": 1},
    }
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "alone.txt", "make-1.txt", "make-3.txt", "use-1.txt", "use-3.txt",
    ]  # fmt: skip
    states = sorted(a["state"] for a in status["allocations"])
    if dependencies == "scheduler":
        # The use array and reduce waited on the failed array: both were cancelled, and
        # use[i=1], use[i=3] were submitted again as a new array.
        assert states == ["cancelled", "cancelled", "completed", "completed", "failed"], status[
            "allocations"
        ]
    else:
        # Released by the submit host: nothing depending on the failure was submitted
        # (make, alone, then use[i=1] and use[i=3] once their inputs existed).
        assert states == ["completed", "completed", "failed"], status["allocations"]


def _profile(name: str, **changes):
    return resolve_profile(name, environ={}).profile.model_copy(update=changes)


@pytest.mark.slow
@pytest.mark.parametrize("profile_name", ["slurm-test"])
def test_a_200_instance_sweep_is_a_handful_of_array_jobs(
    tmp_path, slurm_cluster, monkeypatch, profile_name
):
    """About 40 s (array elements start about 8 per 1-2 s on the test cluster), so only
    SLURM runs it; the PBS front ends' arrays are shown by the sweep example."""
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))
    n = 200
    wf = write_workflow(
        tmp_path,
        f"""
name: sweep200
tasks:
  - name: t
    foreach: {{i: {{range: [0, {n}]}}}}
    command: echo {{i}} > {{outputs}}
    outputs: ["out/{{i}}.txt"]
""",
    )
    runner = CommandRunner(env=slurm_cluster.extra_env)
    profile = _profile(profile_name, max_array_size=64)
    backend = get_backend(profile.backend, runner, profile=profile)
    options = RunOptions()
    started = time.monotonic()
    summary = run_jobs(prepare(wf, options), options, profile, backend)
    elapsed = time.monotonic() - started
    assert summary.ok, summary
    assert summary.totals == {"succeeded": n}
    assert len(list((tmp_path / "out").iterdir())) == n
    assert runner.calls[SUBMIT[profile_name]] == math.ceil(n / 64)  # 4 arrays, not 200 jobs
    # One status query per poll at most (plus the first), never one per task.
    assert runner.calls[STATUS[profile_name]] <= elapsed / profile.poll_interval + 2
    assert queue_drains(slurm_cluster) == []


class _Crowded:
    """The real backend, behind a site limit of ``cap`` queued jobs: submissions beyond
    it are refused as sbatch refuses them under MaxSubmitJobs (a ``limit`` error)."""

    def __init__(self, backend, cluster, cap: int) -> None:
        self.backend, self.cluster, self.cap = backend, cluster, cap
        self.name = backend.name
        self.refused = 0
        self.most_queued = 0

    def __getattr__(self, name):
        return getattr(self.backend, name)

    def submit(self, script, request):
        queued = len(queued_jobs(self.cluster))
        self.most_queued = max(self.most_queued, queued)
        if queued >= self.cap:
            self.refused += 1
            raise SubmitError(
                "sbatch refused the job: QOSMaxSubmitJobPerUserLimit", transient=False,
                limit=True,
            )  # fmt: skip
        return self.backend.submit(script, request)


def test_queue_limits_mean_waiting_not_failing(tmp_path, slurm_cluster, monkeypatch):
    """Six independent tasks; the profile allows 3 queued jobs and the 'site' 2: the
    site's refusals are waited out and the profile's cap is never passed."""
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))
    tasks = "\n".join(
        f"  - name: t{k}\n    command: sleep 0.5; echo {k} > {{outputs}}\n"
        f"    outputs: [out/{k}.txt]"
        for k in range(6)
    )
    wf = write_workflow(tmp_path, f"name: crowded\ntasks:\n{tasks}\n")
    profile = _profile("slurm-test", max_queued_jobs=3, submit_rate=20.0)
    runner = CommandRunner(env=slurm_cluster.extra_env)
    crowded = _Crowded(get_backend("slurm", runner), slurm_cluster, cap=2)
    options = RunOptions()
    summary = run_jobs(prepare(wf, options), options, profile, crowded)  # type: ignore[arg-type]
    assert summary.ok, summary
    assert summary.totals == {"succeeded": 6}
    assert runner.calls["sbatch"] == 6
    assert crowded.refused >= 1  # the limit was hit, and waited out
    assert crowded.most_queued <= 2


def test_mpi_task_gets_its_own_job_with_ranks(tmp_path, hpcflow_slurm, slurm_cluster):
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
    result = hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "--mode", "jobs", "-q")
    assert result.returncode == 0, result.output + run_logs(wf.parent)
    assert (tmp_path / "allreduce.txt").read_text() == "4 10 2"
    script = next(tmp_path.glob(".hpcflow/runs/*/jobs/1.sh")).read_text()
    assert "#SBATCH --nodes=2\n#SBATCH --ntasks=4\n" in script


def test_cancel_stops_the_jobs_and_the_run(tmp_path, slurm_env, hpcflow_slurm, slurm_cluster):
    # Jobs mode has no --detach (test_detach_is_refused_with_a_hint): cancel comes from
    # another command while the run is followed. The naps carry a marker in their command
    # line, so that the processes themselves are seen to end.
    marker = f"120.{time.time_ns() % 10**9:09d}"
    wf = write_workflow(
        tmp_path,
        f"""
name: long
tasks:
  - name: nap
    foreach: {{i: [1, 2]}}
    command: sleep {marker}
  - name: after
    needs: [nap]
    command: "true"
""",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile", "slurm-test",
         "--mode", "jobs", "-q"],
        env=slurm_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120  # two jobs to start on a loaded machine
        status: dict = {}
        while time.monotonic() < deadline:
            listing = hpcflow_slurm("status", "--json")
            if listing.returncode == 0:
                status = json.loads(listing.stdout)
                if status["counts"].get("nap", {}).get("running") == 2:
                    break
            time.sleep(0.3)
        assert status["counts"]["nap"] == {"running": 2}, status
        deadline = time.monotonic() + 60
        while len(processes_with(marker)) < 2:  # the jobs' scripts start them
            assert time.monotonic() < deadline, "the naps did not start in 60 s"
            time.sleep(0.3)
        cancelled = hpcflow_slurm("cancel", status["run_id"])
        assert cancelled.returncode == 0, cancelled.output
        assert "Traceback" not in cancelled.stderr, cancelled.stderr
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err, err
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and queued_jobs(slurm_cluster):
        time.sleep(0.3)
    assert queue_drains(slurm_cluster) == []
    final = _status(hpcflow_slurm)
    assert final["status"] == "cancelled"
    assert final["counts"] == {"nap": {"cancelled": 2}, "after": {"cancelled": 1}}
    assert {a["state"] for a in final["allocations"]} == {"cancelled"}
    deadline = time.monotonic() + 30
    while processes_with(marker):
        assert time.monotonic() < deadline, "the naps still run 30 s after the cancel"
        time.sleep(0.3)


def test_detach_is_refused_with_a_hint(example, hpcflow_slurm):
    wf = example("hello")
    result = hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "--mode", "jobs", "--detach")
    assert result.returncode == 2, result.output
    assert "--detach" in result.stderr and "Traceback" not in result.stderr


def test_jobs_are_tagged_with_the_run(tmp_path, slurm_cluster, monkeypatch):
    """Every job's name carries the run id, so one query by name covers a run."""
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))
    wf = write_workflow(tmp_path, "name: one\ntasks:\n  - name: a\n    command: 'true'\n")
    runner = CommandRunner(env=slurm_cluster.extra_env)
    profile = _profile("slurm-test")
    options = RunOptions()
    summary = run_jobs(prepare(wf, options), options, profile, get_backend("slurm", runner))
    assert summary.ok
    script = (summary.paths.run_dir / "jobs" / "1.sh").read_text()
    assert f"#SBATCH --job-name=hpcflow-{summary.run_id}-a\n" in script


def test_a_job_cancelled_outside_hpcflow_fails_its_task(
    tmp_path, slurm_env, hpcflow_slurm, slurm_cluster
):
    """scancel of one element (an operator, a node failure...): no outcome is written;
    the task fails with the batch system's verdict, its dependents are skipped, and the
    other element still succeeds."""
    wf = write_workflow(
        tmp_path,
        """
name: outside
tasks:
  - name: nap
    foreach: {s: [1, 60]}
    command: sleep {s}
  - name: after
    needs: [nap]
    command: "true"
""",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--profile", "slurm-test",
         "--mode", "jobs", "-q"],
        env=slurm_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        started = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and started is None:
            markers = list(tmp_path.glob(".hpcflow/runs/*/jobs/1/1.started.json"))
            if markers:
                started = json.loads(markers[0].read_text())
            time.sleep(0.2)
        assert started is not None, "element 1 (sleep 60) never started"
        # The element as users name it (1_1): the last element's own job id is the
        # array's id, and scancel of that id would cancel the whole array.
        slurm_cluster.run(["scancel", started["label"]])
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 1, out + err
    status = _status(hpcflow_slurm)
    assert status["counts"] == {
        "nap": {"succeeded": 1, "failed": 1},
        "after": {"skipped": 1},
    }
    run_dir = Path(status["run_dir"])
    log = (run_dir / "driver.log").read_text()
    assert f"nap[s=60]: batch job {started['native_id']} ended (cancelled" in log
    assert queue_drains(slurm_cluster) == []


def test_hostile_names_values_and_paths_in_jobs(tmp_path, hpcflow_slurm, slurm_cluster):
    """Hostile task names (job names, script headers), parameter values and a folder
    with quotes and spaces (the scripts' cd and log paths, sbatch's directive parser)."""
    tasks = [
        {
            "name": f"t{n} {v}",
            "params": {"v": v},
            "command": "printf '%s' {v} > {outputs}",
            "outputs": [f"out/{n}.txt"],
        }
        for n, v in enumerate(HOSTILE_VALUES)
    ]
    tasks.append(
        {
            "name": "sweep 'x'; $(touch CANARY)",
            "foreach": {"k": [0, 1, 2]},
            "command": "echo {k} > {outputs}",
            "outputs": ["out/k{k}.txt"],
        }
    )
    work = tmp_path / "dir with 'quotes' and spaces; $(touch CANARY) 100%"
    work.mkdir()
    wf = work / "workflow.yaml"
    wf.write_text(yaml.safe_dump({"name": "hostile; touch CANARY", "tasks": tasks}))
    result = hpcflow_slurm(
        "run", str(wf), "--profile", "slurm-test", "--mode", "jobs", "-q", cwd=tmp_path
    )
    assert result.returncode == 0, result.output + run_logs(wf.parent)
    for n, value in enumerate(HOSTILE_VALUES):
        assert (work / "out" / f"{n}.txt").read_text() == value
    assert [(work / "out" / f"k{k}.txt").read_text() for k in range(3)] == ["0\n", "1\n", "2\n"]
    assert list(tmp_path.rglob("CANARY")) == []
    assert queue_drains(slurm_cluster) == []
