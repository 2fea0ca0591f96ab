"""The PBS backend (Torque flavor) against real commands: SLURM's PBS/Torque wrappers
(qsub, qstat, qdel from Debian's slurm-wlm-torque) over the private test cluster.
render → qsub → qstat (through the Poller) → qdel, error classification, resources as
SLURM sees them, and hostile names, values and paths.

What the wrappers cannot tell (checked here, so a change shows up): the job sees
SLURM_* variables, not PBS_*; qstat never reports an exit status, so a job that failed
or was cancelled ends as "completed" with a reason that says the outcome is unknown.
"""

from __future__ import annotations

import os
import re
import stat
import time
from pathlib import Path

import pytest

from hpcflow.backends._commands import CommandRunner
from hpcflow.backends.base import AllocationRequest, AllocationState
from hpcflow.backends.pbs import PbsBackend
from hpcflow.backends.pbs.states import NO_EXIT_STATUS
from hpcflow.backends.poller import Poller
from hpcflow.errors import RunError, SubmitError

pytestmark = pytest.mark.slurm

S = AllocationState
INTERVAL = 0.25


@pytest.fixture
def runner(slurm_cluster) -> CommandRunner:
    return CommandRunner(env=slurm_cluster.extra_env, timeout=30)


@pytest.fixture
def backend(runner) -> PbsBackend:
    return PbsBackend(runner, flavor="torque")


def poller_for(backend: PbsBackend) -> Poller:
    return Poller(backend, interval=INTERVAL, initial_delay=INTERVAL, max_interval=1.0, jitter=0.1)


def make_request(folder: Path, command: list[str], name: str = "hpcflow-test", **kw):
    folder.mkdir(parents=True, exist_ok=True)
    return AllocationRequest(
        run_id=f"it-{name}",
        job_name=name,
        run_dir=folder,
        stdout=folder / "allocation.out",
        stderr=folder / "allocation.err",
        command=command,
        **kw,
    )


def submit(backend: PbsBackend, request: AllocationRequest) -> str:
    script = request.run_dir / "allocation.pbs"
    script.write_text(backend.render(request))
    native_id = backend.submit(script, request)
    assert native_id.isdigit()  # the wrappers print a bare id
    return native_id


def test_submit_and_poll_until_completed(backend, runner, tmp_path):
    ids = []
    for n in range(3):
        request = make_request(
            tmp_path / f"run{n}",
            ["bash", "-c", 'echo "$SLURM_JOB_ID ${PBS_JOBID:-no-pbs-vars} $GREETING" > result.txt'],
            env={"GREETING": f"hello {n}"},
            partition="debug",
            walltime=300,
        )
        ids.append(submit(backend, request))
    poller = poller_for(backend)
    start = time.monotonic()
    result = poller.wait_until_final(ids, timeout=30)
    elapsed = time.monotonic() - start
    for n, native_id in enumerate(ids):
        status = result[native_id]
        assert (status.state, status.native_state, status.exit_code) == (S.COMPLETED, "C", None)
        written = (tmp_path / f"run{n}" / "result.txt").read_text()
        assert written == f"{native_id} no-pbs-vars hello {n}\n"
        # -o/-e on the qsub command line were honoured (the #PBS ones are not).
        assert (tmp_path / f"run{n}" / "allocation.out").is_file()
    # One qstat per poll for all three allocations, no denser than the interval allows.
    assert runner.calls["qsub"] == 3
    assert runner.calls["qstat"] == poller.queries
    assert 1 <= poller.queries <= elapsed / (INTERVAL * 0.9) + 1


def test_failing_allocation_ends_with_an_unknown_outcome(backend, slurm_cluster, tmp_path):
    request = make_request(tmp_path, ["bash", "-c", "echo doomed >&2; exit 3"])
    native_id = submit(backend, request)
    status = poller_for(backend).wait_until_final([native_id], timeout=30)[native_id]
    # The wrapper's qstat shows every ended job as C without an exit status...
    assert (status.state, status.exit_code, status.reason) == (S.COMPLETED, None, NO_EXIT_STATUS)
    # ...while SLURM underneath knows it failed; the log is where the wrapper says.
    assert slurm_cluster.job_state(native_id) == "FAILED"
    assert (tmp_path / "allocation.err").read_text() == "doomed\n"


def test_cancel_while_running_leaves_nothing_queued(backend, runner, slurm_cluster, tmp_path):
    request = make_request(tmp_path, ["sleep", "120"])
    native_id = submit(backend, request)
    poller = poller_for(backend)
    poller.track([native_id])
    deadline = time.monotonic() + 20
    while poller.latest.get(native_id) is None or poller.latest[native_id].state is S.QUEUED:
        assert time.monotonic() < deadline, poller.latest
        poller.poll_once()
        time.sleep(0.05)
    assert poller.latest[native_id].state is S.RUNNING
    assert re.fullmatch(r"n\d", poller.latest[native_id].nodes or "")
    backend.cancel([native_id])
    assert runner.calls["qdel"] == 1
    status = poller.wait_until_final([native_id], timeout=20)[native_id]
    assert status.state.final and status.native_state == "C"
    assert slurm_cluster.job_state(native_id) == "CANCELLED"
    active = slurm_cluster.run(["squeue", "--noheader", f"--jobs={native_id}"]).stdout
    assert active.strip() == ""
    backend.cancel([native_id])  # cancelling again is harmless (qdel rc 1, silent)


def test_resources_reach_slurm(backend, slurm_cluster, tmp_path):
    """The Torque lines are read by sbatch itself: nodes, ppn, GPUs, walltime, queue."""
    request = make_request(tmp_path, ["true"], name="shape check", nodes=2, ntasks=4,
                           gpus_per_node=1, walltime=600, partition="debug")  # fmt: skip
    script = backend.render(request)
    assert "#PBS -l nodes=2:ppn=2:gpus=1\n" in script
    native_id = submit(backend, request)
    info = slurm_cluster.run(["scontrol", "show", "job", native_id]).stdout
    for expected in ("JobName=shape_check", "NumNodes=2", "NumTasks=4", "TimeLimit=00:10:00",
                     "Partition=debug", "TresPerNode=gres:gpu:1"):  # fmt: skip
        assert expected in info, info
    poller_for(backend).wait_until_final([native_id], timeout=30)


def test_invalid_queue_is_permanent_and_names_the_setting(backend, tmp_path):
    request = make_request(tmp_path, ["true"], partition="nosuch")
    with pytest.raises(SubmitError) as info:
        submit(backend, request)
    assert info.value.transient is False
    assert "Invalid partition name specified" in info.value.message
    assert "partition" in info.value.hint


def test_impossible_resources_are_permanent(backend, tmp_path):
    request = make_request(tmp_path, ["true"], gpus_per_node=3)
    with pytest.raises(SubmitError) as info:
        submit(backend, request)
    assert not info.value.transient and "gpus_per_node" in info.value.hint


def test_socket_timeouts_are_transient(slurm_cluster, tmp_path):
    """A ``qsub`` earlier on PATH fails twice like the wrapper over a busy controller."""
    real_qsub = slurm_cluster.run(["bash", "-c", "command -v qsub"]).stdout.strip()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "qsub"
    wrapper.write_text(
        "#!/bin/bash\n"
        f"count_file={tmp_path / 'count'}\n"
        'n=$(( $(cat "$count_file" 2>/dev/null || echo 0) + 1 )); echo $n > "$count_file"\n'
        'if [ "$n" -le 2 ]; then\n'
        "  echo 'There was an error running the Slurm sbatch command.'\n"
        "  echo \"'sbatch: error: Batch job submission failed: Socket timed out on send/recv"
        " operation'\"\n"
        "  exit 1\n"
        "fi\n"
        f'exec {real_qsub} "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    runner = CommandRunner(env={**slurm_cluster.extra_env, "PATH": path})
    backend = PbsBackend(runner, flavor="torque")
    request = make_request(tmp_path / "run", ["true"])
    for _ in range(2):
        with pytest.raises(SubmitError) as info:
            submit(backend, request)
        assert info.value.transient is True
        assert "Socket timed out" in info.value.message
    native_id = submit(backend, request)
    assert runner.calls["qsub"] == 3
    status = poller_for(backend).wait_until_final([native_id], timeout=30)[native_id]
    assert status.state is S.COMPLETED


def test_hostile_name_workdir_and_values_submit_and_run(backend, tmp_path):
    work = tmp_path / 'it\'s a "dir"; $(touch CANARY) `x` 50%'
    work.mkdir()
    values = ["a b", "it's", "x; touch CANARY", "$(touch CANARY)", "`touch CANARY`", "a\nb"]
    request = make_request(
        tmp_path / "run",
        ["bash", "-c", 'printf "%s\\n---\\n" "$@" "$HOSTILE" > args.txt', "argv0", *values],
        name="a'; echo foo\n0 $(touch CANARY)",
        env={"HOSTILE": "x; touch CANARY $(touch CANARY)"},
        workdir=work,
    )
    native_id = submit(backend, request)
    status = poller_for(backend).wait_until_final([native_id], timeout=30)[native_id]
    assert status.state is S.COMPLETED
    assert (tmp_path / "run" / "allocation.err").read_text() == ""
    expected = "".join(f"{v}\n---\n" for v in [*values, "x; touch CANARY $(touch CANARY)"])
    assert (work / "args.txt").read_text() == expected
    assert not list(tmp_path.rglob("CANARY"))


def test_hostile_paths_are_refused_before_qsub_runs(runner, tmp_path):
    """The wrapper runs sbatch through a shell built from its arguments: a hostile log
    or script path must never reach it."""
    backend = PbsBackend(runner, flavor="torque")
    folder = tmp_path / "x; touch CANARY $(touch CANARY)"
    request = make_request(folder, ["true"])
    with pytest.raises(RunError, match="PBS cannot be given the path"):
        backend.render(request)
    plain = make_request(tmp_path / "plain", ["true"])
    (tmp_path / "plain" / "allocation.pbs").write_text(backend.render(plain))
    with pytest.raises(RunError):
        backend.submit(folder / "allocation.pbs", plain)
    assert runner.calls["qsub"] == 0
    assert not list(tmp_path.rglob("CANARY"))


def test_unknown_ids_are_omitted_without_error(backend, runner, tmp_path):
    assert backend.poll(["999999"]) == {}  # rc 153, nothing printed
    native_id = submit(backend, make_request(tmp_path, ["true"]))
    got = backend.poll([native_id, "999999"])
    assert list(got) == [native_id]
    assert runner.calls["qstat"] == 2


def test_pro_flavor_falls_back_to_text_polling(runner, backend, tmp_path):
    """``hpcflow status`` builds a PBS backend without the profile (flavor pro): the
    wrappers' qstat refuses -F json, and the backend switches to the text format once."""
    native_id = submit(backend, make_request(tmp_path, ["true"]))
    pro = PbsBackend(runner, flavor="pro")
    before = runner.calls["qstat"]
    assert list(pro.poll([native_id])) == [native_id]
    assert runner.calls["qstat"] == before + 2 and pro.json_status is False
    assert list(pro.poll([native_id])) == [native_id]
    assert runner.calls["qstat"] == before + 3
