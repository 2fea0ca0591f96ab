"""Where a pilot's ranks run: a worker's place on its node, its GPUs, the launch that asks
for an explicit per-node layout, and the head that runs the scheduler and the driver on
the batch script's node."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from hpcflow.backends._commands import CommandRunner
from hpcflow.backends.pbs.backend import PbsBackend
from hpcflow.backends.slurm import SlurmBackend
from hpcflow.bootstrap.__main__ import parse_args
from hpcflow.bootstrap.head import children_argv, exit_status, supervise
from hpcflow.bootstrap.roles import gpu_rotation, spread, worker_local_index, workers_per_node
from hpcflow.bootstrap.workers import await_workers
from hpcflow.errors import ProfileError, RunError
from hpcflow.launchers import head_argv, worker_launch_argv
from hpcflow.modes.pilot_plan import pilot_command, plan_in_allocation, plan_pilot
from hpcflow.settings import resolve_profile
from hpcflow.store.paths import RunPaths

RUN = Path("/scratch/wf/.hpcflow/runs/R")

# -- a worker's place on its node ------------------------------------------------------------


def test_local_index_counts_only_the_workers_of_the_same_node():
    # What SLURM's block distribution made of 6 ranks on 2 nodes (ranks 0, 1 not workers).
    block = ["n1", "n1", "n1", "n2", "n2", "n2"]
    assert [worker_local_index(r, block, 2) for r in range(2, 6)] == [0, 0, 1, 2]
    assert workers_per_node(3, block, 2) == 3  # the fault: 3 GPU workers next to 2 GPUs
    # A launch of workers only, in any order (cyclic, arbitrary): position on the node.
    cyclic = ["n1", "n2", "n3", "n1", "n2", "n3"]
    assert [worker_local_index(r, cyclic) for r in range(6)] == [0, 0, 0, 1, 1, 1]
    mixed = ["n2", "n1", "n2", "n2", "n1"]
    assert [worker_local_index(r, mixed) for r in range(5)] == [0, 0, 1, 2, 1]
    assert [workers_per_node(r, mixed) for r in range(5)] == [3, 2, 3, 3, 2]


def test_gpu_rotation_gives_each_worker_its_own_first_devices():
    visible = ["0", "1", "2", "3"]
    assert [gpu_rotation(visible, k)[0] for k in range(4)] == ["0", "1", "2", "3"]
    assert gpu_rotation(visible, 2) == ["2", "3", "0", "1"]
    # Two GPUs per worker: worker 1 owns devices 2 and 3, not 1 and 2.
    assert gpu_rotation(visible, 1, per_worker=2) == ["2", "3", "0", "1"]
    assert gpu_rotation(visible, 0, per_worker=2)[:2] == ["0", "1"]
    # One worker with every GPU of the node sees them all, in order.
    assert gpu_rotation(["0", "1"], 0, per_worker=2) == ["0", "1"]
    assert gpu_rotation([], 1, per_worker=2) == []


def test_spread_is_as_even_as_possible():
    assert spread(4, 2) == [2, 2]
    assert spread(5, 2) == [3, 2]
    assert spread(1, 3) == [1]
    assert spread(0, 2) == []


# -- the launch ------------------------------------------------------------------------------


def test_worker_launch_is_explicit_per_node():
    srun = worker_launch_argv("srun", "/py", "/r", 3, 2, 6, extra=["--no-kill"])
    assert srun[:6] == [
        "srun", "--mpi=pmix", "--nodes=3", "--ntasks=6", "--ntasks-per-node=2",
        "--kill-on-bad-exit=0",
    ]  # fmt: skip
    assert srun[6:] == ["--no-kill", "/py", "-m", "hpcflow.bootstrap", "--role", "worker", "/r"]
    mpirun = worker_launch_argv("mpirun", "/py", "/r", 3, 2, 6)
    assert mpirun[:5] == ["mpirun", "-n", "6", "--map-by", "ppr:2:node"]
    uneven = worker_launch_argv("srun", "/py", "/r", 2, None, 5)
    assert not any(a.startswith("--ntasks-per-node") for a in uneven)
    with pytest.raises(ProfileError):
        worker_launch_argv("single", "/py", "/r", 1, 1, 1)
    assert head_argv("/py", "/r", ["srun", "x"]) == [
        "/py", "-m", "hpcflow.bootstrap", "--role", "head", "/r", "--", "srun", "x",
    ]  # fmt: skip


def test_pilot_command_keeps_the_one_launch_form_for_single():
    command, ntasks = pilot_command("single", "/py", "/r", [2, 2])
    assert command == ["/py", "-m", "hpcflow.bootstrap", "/r"] and ntasks == 6
    command, ntasks = pilot_command("srun", "/py", "/r", [2, 2, 2])
    assert ntasks == 6 and command[4] == "head"
    assert "--no-kill" in command and "--ntasks-per-node=2" in command


def test_bootstrap_arguments():
    assert parse_args(["/r"]) == (None, Path("/r"), [])
    assert parse_args(["--role", "worker", "/r"]) == ("worker", Path("/r"), [])
    assert parse_args(["--role", "head", "/r", "--", "srun", "x"]) == (
        "head", Path("/r"), ["srun", "x"],
    )  # fmt: skip
    for bad in ([], ["--role", "boss", "/r"], ["--role", "head", "/r"], ["/r", "extra"]):
        assert parse_args(bad) is None, bad


# -- the plan --------------------------------------------------------------------------------


def _profile(name: str, **overrides):
    return resolve_profile(name, environ={}, overrides=overrides).profile


@pytest.mark.parametrize("nodes", [1, 2, 3, 8])
def test_gpu_pilot_asks_one_worker_per_gpu_on_every_node(nodes):
    plan = plan_pilot(_profile("slurm-test-gpu", nodes=nodes), RunPaths(RUN), "R", Path("/wf"))
    request, config = plan.request, plan.config
    assert request.ntasks == nodes * 2 and config.workers_expected == nodes * 2
    assert config.gpus_per_worker == 1
    head, _, launch = " ".join(request.command).partition(" -- ")
    assert head.endswith(f"--role head {RUN}")
    assert f"--nodes={nodes} --ntasks={nodes * 2} --ntasks-per-node=2" in launch
    assert ("--no-kill" in launch) == (nodes > 1)
    directives = [line for line, _ in SlurmBackend(CommandRunner()).directives(request)]
    assert f"--ntasks={nodes * 2}" in directives and "--gres=gpu:2" in directives
    # --overcommit (the profile's): SLURM refuses --ntasks-per-node × cpus > a node's CPUs.
    assert not any(line.startswith("--ntasks-per-node") for line in directives)


def test_workers_per_node_other_than_the_gpus():
    one = plan_pilot(
        _profile("slurm-test-gpu", nodes=2, workers_per_node=1), RunPaths(RUN), "R", Path("/wf")
    )
    assert one.config.gpus_per_worker == 2 and one.config.workers_expected == 2
    assert "--ntasks-per-node=1" in one.request.command
    cpu = plan_pilot(
        _profile("slurm-test-gpu", nodes=2, workers_per_node=4), RunPaths(RUN), "R", Path("/wf")
    )
    assert cpu.config.gpus_per_worker == 0 and cpu.config.workers_expected == 8
    assert "--ntasks-per-node=4" in cpu.request.command


def test_without_overcommit_the_allocation_has_every_node_s_workers():
    profile = _profile("slurm-gpu", nodes=3, overcommit=False, cpus_per_node=8)
    request = plan_pilot(profile, RunPaths(RUN), "R", Path("/wf")).request
    directives = [line for line, _ in SlurmBackend(CommandRunner()).directives(request)]
    assert "--ntasks=6" in directives and "--ntasks-per-node=2" in directives
    assert "--cpus-per-task=4" in directives


def test_pbs_pilot_lists_the_workers_per_node():
    profile = _profile("pbs-test", nodes=3, workers_per_node=2)
    request = plan_pilot(profile, RunPaths(RUN), "R", Path("/wf")).request
    assert "mpirun -n 6 --map-by ppr:2:node" in " ".join(request.command)
    pro = PbsBackend(CommandRunner(), flavor="pro").render(request)
    assert ":mpiprocs=2" in pro and "select=3:" in pro


ON_NODE = {"SLURM_JOB_NODELIST": "n[1-2]", "SLURMD_NODENAME": "n1"}


def _own(profile, env=ON_NODE, **layout):
    shape = {"ntasks": 6, "nodes": 2, "cpus_per_task": 1, "gpus_per_node": 0, **layout}
    return plan_in_allocation(profile, RunPaths(RUN), "R", Path("/wf"), shape, env=env)


def test_own_allocation_spreads_its_workers_and_keeps_its_rank_count():
    profile = _profile("slurm-test")
    gpu = _own(profile, gpus_per_node=2)
    assert gpu.config.workers_expected == 4 and gpu.config.gpus_per_worker == 1
    assert gpu.request.command[:5] == [sys.executable, "-m", "hpcflow.bootstrap", "--role", "head"]
    launch = " ".join(gpu.request.command).partition(" -- ")[2]
    assert "--nodes=2 --ntasks=4 --ntasks-per-node=2" in launch
    one = _own(profile, ntasks=3, nodes=1, cpus_per_task=2)
    assert one.config.workers_expected == 1 and one.config.threads_per_worker == 2
    assert "--nodes=1 --ntasks=1 --ntasks-per-node=1" in " ".join(one.request.command)
    odd = _own(profile, ntasks=7)
    launch = " ".join(odd.request.command).partition(" -- ")[2]
    assert "--nodes=2 --ntasks=5 " in launch and "--ntasks-per-node" not in launch


def test_own_allocation_from_a_login_node_puts_the_head_on_its_first_node():
    """salloc's shell on a login node: the scheduler and driver go to the first node."""
    plan = _own(_profile("slurm-test"), env={"SLURM_JOB_NODELIST": "gpu[07-08]"})
    command = plan.request.command
    assert command[:2] == ["srun", "--overlap"] and "--nodelist=gpu07" in command
    head = command.index("head")
    assert command[head - 4 : head] == [sys.executable, "-m", "hpcflow.bootstrap", "--role"]
    assert "--ntasks-per-node=2" in command[head:]


# -- the head --------------------------------------------------------------------------------

#: Stands in for ``python``: ``-m hpcflow.bootstrap --role ROLE RUN_DIR`` runs ROLE's line of
#: RUN_DIR/plan.sh (the roles' behaviour for one test).
FAKE_PYTHON = """\
#!/bin/sh
role="$4"
run_dir="$5"
echo "$role" >> "$run_dir/started"
eval "$(grep "^$role:" "$run_dir/plan.sh" | cut -d: -f2-)"
"""


def _head(tmp_path: Path, plan: dict[str, str], launch: str, **options):
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    (tmp_path / "plan.sh").write_text("".join(f"{k}:{v}\n" for k, v in plan.items()))
    (tmp_path / "scheduler.json").write_text("{}")  # an earlier allocation's
    started = time.monotonic()
    code = supervise(tmp_path, ["sh", "-c", launch], python=str(python), poll=0.02, **options)
    return code, time.monotonic() - started


def test_head_starts_scheduler_workers_and_driver_and_reports_the_worst(tmp_path):
    code, _ = _head(tmp_path, {"scheduler": "sleep 0.3", "driver": "exit 0"}, "exit 5")
    assert code == 5
    assert sorted((tmp_path / "started").read_text().split()) == ["driver", "scheduler"]
    assert not (tmp_path / "scheduler.json").exists()
    code, _ = _head(tmp_path, {"scheduler": "exit 0", "driver": "exit 0"}, "exit 0")
    assert code == 0
    assert children_argv("/py", RUN, ["srun"])["scheduler"][-2:] == ["scheduler", str(RUN)]


def test_head_stops_what_outlives_the_driver(tmp_path):
    code, took = _head(
        tmp_path, {"scheduler": "exec sleep 30", "driver": "exit 0"}, "exec sleep 30",
        grace=0.5, kill_after=2,
    )  # fmt: skip
    # Stopped after the grace period; their SIGTERM is not the allocation's failure.
    assert code == 0 and took < 10


def test_after_a_clean_end_the_head_does_not_wait_for_the_workers_to_close(tmp_path):
    """Driver and scheduler both ended 0: every result is recorded, so the workers get
    CLEAN_GRACE (not the 30 s grace) before they are stopped, and the allocation ends
    successfully; after a failed driver they keep the whole grace (their logs may say
    why)."""
    code, took = _head(tmp_path, {"scheduler": "exit 0", "driver": "exit 0"}, "exec sleep 30")
    assert code == 0 and took < 8
    code, took = _head(
        tmp_path, {"scheduler": "exit 0", "driver": "exit 1"}, "exec sleep 30", grace=3
    )
    assert code == 1 and took >= 3


def test_a_killed_driver_has_its_tasks_ended_and_the_others_stopped_without_the_grace(
    tmp_path, monkeypatch
):
    """A driver killed by a signal shuts nothing down: the head asks the workers to end
    their tasks (here: records that it asked) and stops the launch at once, not after
    the 30 s grace a driver that exited by itself gets. The launch records the SIGTERM it
    gets, so the test sees the order: the tasks are ended first, then the launch."""
    import hpcflow.bootstrap.head as head

    order = tmp_path / "order"
    monkeypatch.setattr(head, "end_abandoned_tasks", lambda paths: order.write_text("tasks\n"))
    launch = f"trap 'echo launch >> {order}; exit 0' TERM; sleep 30 & wait"
    code, took = _head(
        tmp_path, {"scheduler": "exec sleep 30", "driver": "kill -9 $$"}, launch, kill_after=2
    )
    assert took < 10, "the head waited for the grace after its driver was killed"
    assert order.read_text().split() == ["tasks", "launch"]
    assert code == 128 + signal.SIGKILL


def test_head_does_not_end_the_run_when_workers_die(tmp_path):
    # The worker launch ends first (every worker died): the driver goes on to its end,
    # told by a file that the launch has ended, and with which status.
    marker = tmp_path / "worker-launch-ended.json"
    driver = f"while ! test -s {marker}; do sleep 0.05; done; sleep 1"
    code, took = _head(tmp_path, {"scheduler": "sleep 1", "driver": driver}, "exit 1")
    assert code == 1 and took >= 0.9
    assert json.loads(marker.read_text())["exit_status"] == 1


def test_head_passes_signals_on(tmp_path):
    def later() -> None:
        time.sleep(0.5)
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:  # the head's handler
            signal.raise_signal(signal.SIGTERM)

    threading.Thread(target=later).start()
    code, took = _head(
        tmp_path, {"scheduler": "exec sleep 30", "driver": "exec sleep 30"}, "exec sleep 30"
    )
    assert code == 128 + signal.SIGTERM and took < 10
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_exit_status_reads_like_the_shell():
    assert exit_status(0) == 0 and exit_status(3) == 3 and exit_status(-9) == 137


def test_head_without_launch_is_refused(tmp_path):
    assert supervise(tmp_path, []) == 2


# -- the driver waiting for the workers ---------------------------------------------------


@pytest.fixture
def workerless_client():
    """A client of a real Dask scheduler that no worker has joined."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            yield client


def test_the_driver_stops_waiting_once_the_worker_launch_has_ended(tmp_path, workerless_client):
    paths = RunPaths(tmp_path)
    threading.Timer(0.3, paths.worker_launch_end.write_text, ('{"exit_status": 1}',)).start()
    started = time.monotonic()
    with pytest.raises(RunError) as caught:
        await_workers(workerless_client, 2, 120.0, paths)
    assert time.monotonic() - started < 30
    assert "launch ended (exit status 1) with 0 of 2 workers" in str(caught.value)
    assert str(paths.allocations_dir) in str(caught.value)


def test_the_driver_says_how_many_workers_came_in_time(tmp_path, workerless_client):
    with pytest.raises(RunError, match="only 0 of 1 workers arrived within 2s"):
        await_workers(workerless_client, 1, 1.5, RunPaths(tmp_path))


def test_the_driver_quotes_the_allocation_s_stderr_when_no_worker_came(tmp_path, workerless_client):
    paths = RunPaths(tmp_path)
    paths.allocations_dir.mkdir(parents=True)
    paths.allocation_stderr(1).write_text("x" * 5000 + "\nSegmentation fault (core dumped)\n")
    with pytest.raises(RunError) as caught:
        await_workers(workerless_client, 1, 1.5, paths)
    text = str(caught.value)
    assert "only 0 of 1 workers" in text and "Segmentation fault (core dumped)" in text
    assert "x" * 2000 not in text  # the end of the log, not all of it


def test_the_driver_goes_on_with_the_workers_that_came_when_no_other_comes(tmp_path):
    """One rank that never starts (crashed, lost node) must not hold the others idle
    until the timeout: once no new worker came for ``settle`` seconds, the run goes on."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            client.wait_for_workers(1, timeout=30)
            started = time.monotonic()
            came = await_workers(client, 3, 120.0, RunPaths(tmp_path), settle=1.0)
            took = time.monotonic() - started
    assert came == 1
    assert took < 60  # the settle, not the 120 s timeout


def test_the_driver_s_deadline_counts_from_the_allocation_s_start():
    """The head marks when the allocation started (its own start: it is the batch script,
    exec'd) for the driver it starts seconds later; a mark in the future, or none, falls
    back to the driver's own start."""
    import time

    from hpcflow.bootstrap.head import STARTED_VARIABLE, allocation_started, process_started

    started = process_started()
    assert started <= time.time() and time.time() - started < 3600
    assert allocation_started({STARTED_VARIABLE: "1000.5"}, 1010.0) == 1000.5
    assert allocation_started({STARTED_VARIABLE: "2000"}, 1010.0) == 1010.0
    assert allocation_started({STARTED_VARIABLE: "soon"}, 1010.0) == 1010.0
    assert allocation_started({}, 1010.0) == 1010.0
