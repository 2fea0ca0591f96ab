"""The batch backends against the real private test cluster, as one suite: SLURM itself
(sbatch, squeue, scancel) and PBS in its Torque flavor through SLURM's PBS/Torque
wrappers (qsub, qstat, qdel from Debian's slurm-wlm-torque). Render → submit → poll
(through the Poller) → cancel, error classification, and hostile names, values and
paths; then what only one backend has.

The backends are test parameters (:data:`BACKENDS`, one :class:`Live` each), built on
the unit tests' table (tests/unit/backends/cases.py). Where they legitimately differ,
the table carries the expected value. What the wrappers cannot tell (checked here, so
a change shows up): the job sees SLURM_* variables, not PBS_*; qstat never reports an
exit status, so a job that failed or was cancelled ends as "completed" with a reason
that says the outcome is unknown.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from hpcflow.backends._commands import CommandRunner
from hpcflow.backends.base import AllocationRequest, AllocationState
from hpcflow.backends.batch import BatchBackend
from hpcflow.backends.pbs import PbsBackend
from hpcflow.backends.pbs.states import NO_EXIT_STATUS
from hpcflow.backends.poller import Poller
from hpcflow.backends.slurm import SlurmBackend
from hpcflow.errors import RunError, SubmitError
from tests.unit.backends import cases

pytestmark = pytest.mark.slurm

S = AllocationState
INTERVAL = 0.25

#: An ended allocation as polled: (state, native state, exit code).
Outcome = tuple[AllocationState, str, int | None]

#: What sbatch prints when the controller is too busy to answer.
SOCKET_TIMEOUT = (
    "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation"
)


@dataclass(frozen=True)
class Live:
    """One backend on the test cluster: the unit tests' :class:`Case` (its factory and
    programs) and what the shared tests expect of it here."""

    unit: cases.Case
    #: The batch script's file name, next to the allocation's logs.
    script: str
    #: How a job that exited 0, one that exited 3 and one cancelled while running end.
    completed: Outcome
    failed: Outcome
    cancelled: Outcome
    #: A pattern the failed job's reason matches (``re.search``).
    failed_reason: str
    #: Shell lines by which a submit program fails like one over a busy controller.
    busy_submit: str
    #: Whether hostile log paths are allowed (SLURM quotes them); else the hostile
    #: folder is only the working directory (PBS refuses such paths: see
    #: test_pbs_refuses_hostile_paths_before_qsub_runs).
    hostile_log_paths: bool

    @property
    def id(self) -> str:
        return self.unit.id

    @property
    def make(self) -> Callable[[CommandRunner], BatchBackend]:
        return self.unit.make

    @property
    def submit_program(self) -> str:
        return self.unit.submit_program

    @property
    def poll_program(self) -> str:
        return self.unit.poll_program

    @property
    def cancel_program(self) -> str:
        return self.unit.cancel_program

    def submit(self, backend: BatchBackend, request: AllocationRequest) -> str:
        script = request.run_dir / self.script
        script.write_text(backend.render(request))
        native_id = backend.submit(script, request)
        assert native_id.isdigit()  # the wrappers print a bare id too
        return native_id


SLURM_LIVE = Live(
    unit=cases.SLURM,
    script="allocation.sbatch",
    completed=(S.COMPLETED, "COMPLETED", 0),
    failed=(S.FAILED, "FAILED", 3),
    cancelled=(S.CANCELLED, "CANCELLED", 143),  # SIGTERM
    failed_reason="non-zero exit code",
    busy_submit=f'  echo "{SOCKET_TIMEOUT}" >&2\n',
    hostile_log_paths=True,
)
#: The wrappers' qstat shows every ended job as C without an exit status.
PBS_LIVE = Live(
    unit=cases.pbs_case("torque"),
    script="allocation.pbs",
    completed=(S.COMPLETED, "C", None),
    failed=(S.COMPLETED, "C", None),
    cancelled=(S.COMPLETED, "C", None),
    failed_reason=rf"\A{re.escape(NO_EXIT_STATUS)}\Z",
    # The wrapper prints sbatch's message on stdout, framed.
    busy_submit=(
        "  echo 'There was an error running the Slurm sbatch command.'\n"
        f"  echo \"'{SOCKET_TIMEOUT}'\"\n"
    ),
    hostile_log_paths=False,
)
BACKENDS = [SLURM_LIVE, PBS_LIVE]


@pytest.fixture(params=BACKENDS, ids=[live.id for live in BACKENDS])
def case(request) -> Live:
    return request.param


@pytest.fixture
def runner(slurm_cluster) -> CommandRunner:
    return CommandRunner(env=slurm_cluster.extra_env, timeout=30)


@pytest.fixture
def backend(case, runner) -> BatchBackend:
    return case.make(runner)


def poller_for(backend: BatchBackend) -> Poller:
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


def wait_until_running(poller: Poller, native_id: str, timeout: float = 20) -> None:
    poller.track([native_id])
    deadline = time.monotonic() + timeout
    while poller.latest.get(native_id) is None or poller.latest[native_id].state is S.QUEUED:
        assert time.monotonic() < deadline, poller.latest
        poller.poll_once()
        time.sleep(0.05)
    assert poller.latest[native_id].state is S.RUNNING


# -- every backend ----------------------------------------------------------------------


def test_submit_and_poll_until_completed(case, backend, runner, tmp_path):
    ids = []
    for n in range(3):
        request = make_request(
            tmp_path / f"run{n}",
            ["bash", "-c", 'echo "$SLURM_JOB_ID ${PBS_JOBID:-no-pbs-vars} $GREETING" > result.txt'],
            env={"GREETING": f"hello {n}"},
            partition="debug",
            walltime=300,
        )
        ids.append(case.submit(backend, request))
    poller = poller_for(backend)
    start = time.monotonic()
    result = poller.wait_until_final(ids, timeout=30)
    elapsed = time.monotonic() - start
    for n, native_id in enumerate(ids):
        status = result[native_id]
        assert (status.state, status.native_state, status.exit_code) == case.completed, status
        written = (tmp_path / f"run{n}" / "result.txt").read_text()
        assert written == f"{native_id} no-pbs-vars hello {n}\n"
        # The log paths were honoured (PBS: -o/-e on the qsub command line, the #PBS
        # ones are not).
        assert (tmp_path / f"run{n}" / "allocation.out").is_file()
    # One status command per poll for all three allocations, and polls no denser than
    # the interval (minus jitter) allows.
    assert runner.calls[case.submit_program] == 3
    assert runner.calls[case.poll_program] == poller.queries
    assert 1 <= poller.queries <= elapsed / (INTERVAL * 0.9) + 1
    assert runner.calls["sacct"] == 0  # SLURM: squeue still lists the ended jobs


def test_failing_allocation_reports_its_outcome(case, backend, slurm_cluster, tmp_path):
    request = make_request(tmp_path, ["bash", "-c", "echo doomed >&2; exit 3"])
    native_id = case.submit(backend, request)
    status = poller_for(backend).wait_until_final([native_id], timeout=30)[native_id]
    assert (status.state, status.native_state, status.exit_code) == case.failed
    assert re.search(case.failed_reason, status.reason or ""), status.reason
    # SLURM (underneath the wrappers too) knows it failed; the log is where it was asked.
    assert slurm_cluster.job_state(native_id) == "FAILED"
    assert (tmp_path / "allocation.err").read_text() == "doomed\n"


def test_cancel_while_running_leaves_nothing_queued(case, backend, runner, slurm_cluster, tmp_path):
    request = make_request(tmp_path, ["sleep", "120"])
    native_id = case.submit(backend, request)
    poller = poller_for(backend)
    wait_until_running(poller, native_id)
    assert re.fullmatch(r"n\d", poller.latest[native_id].nodes or "")
    backend.cancel([native_id])
    assert runner.calls[case.cancel_program] == 1
    status = poller.wait_until_final([native_id], timeout=20)[native_id]
    assert (status.state, status.native_state, status.exit_code) == case.cancelled
    assert slurm_cluster.job_state(native_id) == "CANCELLED"
    # Nothing of it is left among active jobs.
    active = slurm_cluster.run(["squeue", "--noheader", f"--jobs={native_id}"]).stdout
    assert active.strip() == ""
    backend.cancel([native_id])  # cancelling again is harmless (qdel: rc 1, silent)


def test_invalid_partition_is_permanent_and_names_the_setting(case, backend, tmp_path):
    request = make_request(tmp_path, ["true"], partition="nosuch")  # PBS: the queue
    with pytest.raises(SubmitError) as info:
        case.submit(backend, request)
    assert info.value.transient is False
    assert "Invalid partition name specified" in info.value.message
    assert "partition" in info.value.hint


def test_impossible_resources_are_permanent(case, backend, tmp_path):
    request = make_request(tmp_path, ["true"], gpus_per_node=3)
    with pytest.raises(SubmitError) as info:
        case.submit(backend, request)
    assert not info.value.transient and "gpus_per_node" in info.value.hint


def test_socket_timeouts_are_transient(case, slurm_cluster, tmp_path):
    """A submit program earlier on PATH fails twice like one over a busy controller
    (sbatch, or the qsub wrapper around it), then works."""
    program = case.submit_program
    real = slurm_cluster.run(["bash", "-c", f"command -v {program}"]).stdout.strip()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / program
    wrapper.write_text(
        "#!/bin/bash\n"
        f"count_file={tmp_path / 'count'}\n"
        'n=$(( $(cat "$count_file" 2>/dev/null || echo 0) + 1 )); echo $n > "$count_file"\n'
        'if [ "$n" -le 2 ]; then\n'
        f"{case.busy_submit}"
        "  exit 1\n"
        "fi\n"
        f'exec {real} "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    runner = CommandRunner(env={**slurm_cluster.extra_env, "PATH": path})
    backend = case.make(runner)
    request = make_request(tmp_path / "run", ["true"])
    for _ in range(2):
        with pytest.raises(SubmitError) as info:
            case.submit(backend, request)
        assert info.value.transient is True
        assert "Socket timed out" in info.value.message
    native_id = case.submit(backend, request)
    assert runner.calls[program] == 3
    status = poller_for(backend).wait_until_final([native_id], timeout=30)[native_id]
    assert status.state is S.COMPLETED


def test_hostile_name_paths_and_values_submit_and_run(case, backend, tmp_path):
    folder = tmp_path / cases.HOSTILE_DIR.name
    folder.mkdir()
    values = ["a b", "it's", "x; touch CANARY", "$(touch CANARY)", "`touch CANARY`", "a\nb"]
    request = make_request(
        folder if case.hostile_log_paths else tmp_path / "run",
        ["bash", "-c", 'printf "%s\\n---\\n" "$@" "$HOSTILE" > args.txt', "argv0", *values],
        name="a'; echo foo\n0 $(touch CANARY)",
        env={"HOSTILE": "x; touch CANARY $(touch CANARY)"},
        workdir=None if case.hostile_log_paths else folder,
    )
    native_id = case.submit(backend, request)
    status = poller_for(backend).wait_until_final([native_id], timeout=30)[native_id]
    assert status.state is S.COMPLETED, request.stderr.read_text()
    expected = "".join(f"{v}\n---\n" for v in [*values, "x; touch CANARY $(touch CANARY)"])
    assert (folder / "args.txt").read_text() == expected
    assert request.stdout.is_file()  # the exact path, "%" kept literal
    assert request.stderr.read_text() == ""
    assert not list(tmp_path.rglob("CANARY"))


def test_unknown_ids_are_omitted_without_error(case, backend, runner, tmp_path):
    # squeue: "Invalid job id specified"; qstat: rc 153, nothing printed.
    assert backend.poll(["999999"]) == {}
    assert backend.poll(["999998", "999999"]) == {}
    native_id = case.submit(backend, make_request(tmp_path, ["true"]))
    assert list(backend.poll([native_id, "999999"])) == [native_id]
    assert runner.calls[case.poll_program] == 3


# -- SLURM only -------------------------------------------------------------------------


def test_slurm_asks_sacct_once_without_accounting(runner):
    backend = SlurmBackend(runner)
    assert backend.poll(["999999"]) == {}
    assert backend.accounting is False  # sacct says accounting is disabled
    assert backend.poll(["999998", "999999"]) == {}
    assert runner.calls["sacct"] == 1  # asked once, remembered


def test_slurm_json_polling_matches(runner, tmp_path):
    backend = SlurmBackend(runner)
    native_id = SLURM_LIVE.submit(backend, make_request(tmp_path, ["bash", "-c", "exit 4"]))
    poller_for(backend).wait_until_final([native_id], timeout=30)
    plain = backend.poll([native_id])
    as_json = SlurmBackend(runner, squeue_json=True).poll([native_id])
    assert plain == as_json
    assert as_json[native_id].exit_code == 4


# -- PBS only (SLURM's Torque wrappers) -------------------------------------------------


def test_pbs_resources_reach_slurm(runner, slurm_cluster, tmp_path):
    """The Torque lines are read by sbatch itself: nodes, ppn, GPUs, walltime, queue."""
    backend = PbsBackend(runner, flavor="torque")
    request = make_request(tmp_path, ["true"], name="shape check", nodes=2, ntasks=4,
                           gpus_per_node=1, walltime=600, partition="debug")  # fmt: skip
    script = backend.render(request)
    assert "#PBS -l nodes=2:ppn=2:gpus=1\n" in script
    native_id = PBS_LIVE.submit(backend, request)
    info = slurm_cluster.run(["scontrol", "show", "job", native_id]).stdout
    for expected in ("JobName=shape_check", "NumNodes=2", "NumTasks=4", "TimeLimit=00:10:00",
                     "Partition=debug", "TresPerNode=gres:gpu:1"):  # fmt: skip
        assert expected in info, info
    poller_for(backend).wait_until_final([native_id], timeout=30)


def test_pbs_refuses_hostile_paths_before_qsub_runs(runner, tmp_path):
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


def test_pbs_pro_flavor_falls_back_to_text_polling(runner, tmp_path):
    """``hpcflow status`` builds a PBS backend without the profile (flavor pro): the
    wrappers' qstat refuses -F json, and the backend switches to the text format once."""
    backend = PbsBackend(runner, flavor="torque")
    native_id = PBS_LIVE.submit(backend, make_request(tmp_path, ["true"]))
    pro = PbsBackend(runner, flavor="pro")
    before = runner.calls["qstat"]
    assert list(pro.poll([native_id])) == [native_id]
    assert runner.calls["qstat"] == before + 2 and pro.json_status is False
    assert list(pro.poll([native_id])) == [native_id]
    assert runner.calls["qstat"] == before + 3
