"""Elastic mode's pure parts: a profile turned into dask-jobqueue worker jobs (rendered by
dask-jobqueue's own job classes, run through a real shell), refusals, the submission
failure rule, and cancelling what a closed cluster left behind."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from hpcflow.backends.base import AllocationState, AllocationStatus
from hpcflow.errors import ProfileError, ResourceError
from hpcflow.modes.elastic import cancel_leftovers, check_elastic, check_memory
from hpcflow.modes.elastic_cluster import import_jobqueue
from hpcflow.modes.elastic_plan import ElasticPlan, plan_elastic, walltime_text
from hpcflow.modes.elastic_watch import SubmitFailures, brief
from hpcflow.settings.profile import Profile
from tests.conftest import HOSTILE_VALUES, write_workflow

RUN_DIR = Path("/scratch/runs/20260101-000000-abcdef")


def _script(plan: ElasticPlan) -> str:
    """The worker job script exactly as dask-jobqueue renders it for ``plan``."""
    jobqueue = import_jobqueue()  # (a plain import would take over Ctrl-C in this process)
    job_cls = getattr(jobqueue, plan.cluster_class).job_cls
    kwargs = {k: v for k, v in plan.kwargs.items() if k != "scheduler_options"}
    job = job_cls(scheduler="tls://10.0.0.1:8786", name="w0", **kwargs)
    script: str = job.job_script()
    return script


def _slurm(**fields: Any) -> Profile:
    return Profile(name="site", backend="slurm", **fields)


def test_one_worker_job_is_one_node_of_the_profile():
    profile = _slurm(
        partition="compute",
        account="proj1",
        qos="long",
        constraint="skylake",
        cpus_per_node=8,
        workers_per_node=2,
        memory_per_node="16GB",
        gpus_per_node=2,
        walltime="2h",
        min_workers=1,
        max_workers=5,
        adapt_interval="2s",
        adapt_wait_count=4,
        extra_directives=["--exclusive"],
        transport="tls",
    )
    plan = plan_elastic(profile, RUN_DIR, "20260101-000000-abcdef", Path("/home/me/wf"))
    assert plan.cluster_class == "SLURMCluster"
    assert (plan.minimum, plan.maximum, plan.interval, plan.wait_count) == (1, 5, 2.0, 4)
    assert (plan.workers_per_job, plan.threads_per_worker, plan.gpus_per_worker) == (2, 4, 1)
    assert plan.memory_per_worker == 8 * 2**30  # GB is binary here, as in SLURM
    assert plan.max_slots == 5 * 2 * 4
    assert plan.job_name == "hpcflow-20260101-000000-abcdef-w"
    script = _script(plan)
    for line in (
        "#SBATCH -J hpcflow-20260101-000000-abcdef-w",
        "#SBATCH -p compute",
        "#SBATCH -A proj1",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH -t 2:00:00",
        "#SBATCH --exclusive",
        "#SBATCH --qos=long",
        "#SBATCH --constraint=skylake",
        "#SBATCH --gres=gpu:2",
    ):
        assert line in script.splitlines(), (line, script)
    assert "#SBATCH --mem=" in script
    command = script.splitlines()[-1]
    assert "--nthreads 4" in command
    assert "--resources cpus=4,GPU=1" in command
    assert "--protocol tls://" in command


def test_per_gpu_workers_are_one_job_per_gpu():
    profile = _slurm(
        cpus_per_node=8, gpus_per_node=4, workers_per_node="per-gpu", memory_per_node="64GB"
    )
    plan = plan_elastic(profile, RUN_DIR, "r1", Path("/wf"))
    assert (plan.workers_per_job, plan.threads_per_worker, plan.gpus_per_worker) == (1, 2, 1)
    assert plan.memory_per_worker == 16 * 2**30
    script = _script(plan)
    assert "#SBATCH --gres=gpu:1" in script and "#SBATCH --cpus-per-task=2" in script
    assert "--resources cpus=2,GPU=1" in script


def test_without_memory_or_walltime_the_queue_defaults_apply():
    plan = plan_elastic(_slurm(cpus_per_node=1), RUN_DIR, "r1", Path("/wf"))
    script = _script(plan)
    # dask-jobqueue would otherwise ask for its own 30 minutes and a made-up memory.
    assert "#SBATCH --mem" not in script and "#SBATCH -t " not in script
    assert "--cpus-per-task=1" in script
    # The worker measures its memory; the CLI keeps the last --memory-limit.
    assert script.rstrip().endswith(
        "--resources cpus=1 --no-dashboard --dashboard-address 127.0.0.1:0 "
        "--preload hpcflow.worker.run_over --memory-limit auto --protocol tls://"
    )
    assert plan.memory_per_worker is None


def test_worker_knobs_reach_the_worker_command():
    profile = _slurm(
        cpus_per_node=2,
        worker_memory_limit="0.8",
        worker_lifetime="50m",
        worker_lifetime_stagger="5m",
        worker_resources={"licence": 1},
        worker_memory_target=0.6,
        worker_memory_spill=False,
        local_directory="$TMPDIR/dask",
        interface="ib0",
    )
    script = _script(plan_elastic(profile, RUN_DIR, "r1", Path("/wf")))
    command = script.splitlines()[-1]
    assert "--memory-limit 0.8" in command
    assert "--lifetime 3000s --lifetime-stagger 300s" in command
    assert "--resources cpus=2,licence=1" in command
    assert "--local-directory $TMPDIR/dask" in command
    assert "--interface ib0" in command
    assert "export DASK_DISTRIBUTED__WORKER__MEMORY__TARGET=0.6" in script
    assert "export DASK_DISTRIBUTED__WORKER__MEMORY__SPILL=False" in script


def test_dashboard_is_off_unless_asked_for():
    off = plan_elastic(_slurm(), RUN_DIR, "r1", Path("/wf"))
    assert not off.dashboard and off.kwargs["scheduler_options"]["dashboard"] is False
    on = plan_elastic(_slurm(dashboard_address="10.0.0.9:8788"), RUN_DIR, "r1", Path("/wf"))
    assert on.dashboard
    assert on.kwargs["scheduler_options"] == {"dashboard_address": "10.0.0.9:8788"}


def test_hostile_values_survive_the_job_prologue_in_a_real_shell(tmp_path):
    env = {f"V{n}": value for n, value in enumerate(HOSTILE_VALUES)}
    base = tmp_path / "dir with 'quotes' and spaces"
    base.mkdir()
    # A hostile module name never gets this far: the profile refuses it
    # (tests/security/test_names.py); the values of env: are what reach the prologue.
    with pytest.raises(ValueError, match="module"):
        _slurm(env=env, modules=["python/3.11; touch CANARY"])
    profile = _slurm(env=env, modules=["python/3.11"])
    plan = plan_elastic(profile, RUN_DIR, "r1", base)
    prologue = list(plan.kwargs["job_script_prologue"])
    assert prologue[0] == "module load python/3.11"
    # Run everything but `module load` (no modules here) and print what the job would see.
    shell = (
        "\n".join(prologue[1:]) + "\npwd\n" + "".join(f'printf "%s\\0" "${name}"\n' for name in env)
    )
    out = subprocess.run(["bash", "-c", shell], capture_output=True, cwd=tmp_path, check=True)
    cwd, _, values = out.stdout.decode().partition("\n")
    assert cwd == str(base)
    assert values.split("\0")[:-1] == list(env.values())
    assert not list(tmp_path.rglob("CANARY"))


def test_pbs_resource_specs():
    pro = Profile(name="p", backend="pbs", cpus_per_node=4, gpus_per_node=1, memory_per_node="3GB")
    plan = plan_elastic(pro, RUN_DIR, "r1", Path("/wf"))
    assert plan.cluster_class == "PBSCluster"
    assert "#PBS -l select=1:ncpus=4:ngpus=1:mem=3072mb" in _script(plan)
    torque = Profile(name="t", backend="pbs", pbs_flavor="torque", cpus_per_node=2, walltime="10m")
    script = _script(plan_elastic(torque, RUN_DIR, "r1", Path("/wf")))
    assert "#PBS -l nodes=1:ppn=2" in script.splitlines()
    assert "#PBS -l walltime=0:10:00" in script
    untimed = _script(plan_elastic(Profile(name="u", backend="pbs"), RUN_DIR, "r1", Path("/")))
    assert "walltime" not in untimed


@pytest.mark.parametrize(
    ("seconds", "text"), [(59.2, "0:01:00"), (3600, "1:00:00"), (90061, "25:01:01")]
)
def test_walltime_text(seconds, text):
    assert walltime_text(seconds) == text


def test_refusals():
    with pytest.raises(ProfileError, match="needs a batch backend"):
        plan_elastic(Profile(name="local"), RUN_DIR, "r1", Path("/wf"))
    with pytest.raises(ProfileError, match="unquoted") as info:
        plan_elastic(_slurm(), Path("/scratch/my runs/x"), "r1", Path("/wf"))
    assert info.value.hint and "--run-dir" in info.value.hint
    with pytest.raises(ProfileError, match="local_directory"):
        plan_elastic(_slurm(local_directory="$(rm -rf ~)"), RUN_DIR, "r1", Path("/wf"))
    with pytest.raises(ProfileError, match="not ucx"):
        check_elastic(_slurm(transport="ucx"))
    with pytest.raises(ProfileError, match="requires encryption"):
        check_elastic(_slurm(transport="tcp", require_encryption=True))
    with pytest.raises(ValidationError, match="min_workers"):
        _slurm(min_workers=3, max_workers=2)


def test_tasks_that_need_more_memory_than_a_worker_are_refused(tmp_path):
    from hpcflow.dag.graph import build_graph
    from hpcflow.spec.loader import load_workflow

    wf = write_workflow(
        tmp_path,
        """
name: big
tasks:
  - name: big
    resources: {memory: 3GB}
    command: "true"
""",
    )
    graph = build_graph(load_workflow(wf))
    check_memory(graph, [True], None, "site")  # unknown worker memory: nothing to judge
    check_memory(graph, [True], 4 * 10**9, "site")
    with pytest.raises(ResourceError, match="asks for 3 GiB"):
        check_memory(graph, [True], 2 * 10**9, "site")
    check_memory(graph, [False], 2 * 10**9, "site")  # up to date: not run


def test_detach_is_refused_before_anything_is_created(tmp_path, hpcflow):
    wf = write_workflow(tmp_path, "name: d\ntasks:\n  - name: a\n    command: 'true'\n")
    result = hpcflow("run", str(wf), "--profile", "slurm-test", "--mode", "elastic", "--detach")
    assert result.returncode == 2, result.output
    assert "elastic mode cannot --detach" in result.stderr
    assert "hint:" in result.stderr and "--mode pilot" in result.stderr
    assert not (tmp_path / ".hpcflow" / "runs").exists() or not any(
        (tmp_path / ".hpcflow" / "runs").iterdir()
    )
    # The lock was released: a dry run of the same workflow goes ahead.
    assert hpcflow("run", str(wf), "--dry-run").returncode == 0


def test_submission_failures_rule():
    failures = SubmitFailures(limit=3)
    assert not failures.fatal
    failures.failed(RuntimeError("Command exited\nstderr:\nsbatch: error: bad\n\n"))
    assert failures.fatal, "a profile whose first job cannot be submitted never will"
    assert failures.last == "sbatch: error: bad"
    failures = SubmitFailures(limit=3)
    failures.succeeded()
    failures.failed(RuntimeError("x"))
    failures.failed(RuntimeError("x"))
    assert not failures.fatal
    failures.succeeded()
    failures.failed(RuntimeError("x"))
    failures.failed(RuntimeError("x"))
    assert not failures.fatal
    failures.failed(RuntimeError("x"))
    assert failures.fatal
    assert brief(ValueError("")) == "ValueError"


class _Backend:
    """A batch system whose jobs end after ``polls_until_final`` polls."""

    name = "fake"

    def __init__(self, polls_until_final: int) -> None:
        self.polls = 0
        self.until = polls_until_final
        self.cancelled: list[str] = []

    def poll(self, native_ids: Sequence[str]) -> dict[str, AllocationStatus]:
        self.polls += 1
        state = AllocationState.CANCELLED if self.polls > self.until else AllocationState.RUNNING
        return {i: AllocationStatus(i, state, state.value.upper()) for i in native_ids}

    def cancel(self, native_ids: Sequence[str]) -> None:
        self.cancelled.extend(native_ids)


def test_leftover_worker_jobs_are_cancelled_only_if_they_outlive_the_grace():
    ending = _Backend(polls_until_final=2)  # COMPLETING for a moment after scancel
    cancel_leftovers(ending, {"7", "8"}, grace=30, sleep=lambda s: None)  # type: ignore[arg-type]
    assert ending.cancelled == [] and ending.polls == 3
    stuck = _Backend(polls_until_final=10**6)
    cancel_leftovers(stuck, {"9"}, grace=0.0, sleep=lambda s: None)  # type: ignore[arg-type]
    assert stuck.cancelled == ["9"]
    nothing = _Backend(0)
    cancel_leftovers(nothing, set())  # type: ignore[arg-type]
    assert nothing.polls == 0
