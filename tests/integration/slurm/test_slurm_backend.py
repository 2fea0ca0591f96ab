"""The SLURM backend against the real private test cluster: render → sbatch → squeue
(through the Poller) → scancel, error classification, and hostile names and paths."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from hpcflow.backends._commands import CommandRunner
from hpcflow.backends.base import AllocationRequest, AllocationState
from hpcflow.backends.poller import Poller
from hpcflow.backends.slurm import SlurmBackend
from hpcflow.errors import SubmitError

pytestmark = pytest.mark.slurm

S = AllocationState
INTERVAL = 0.25


@pytest.fixture
def runner(slurm_cluster) -> CommandRunner:
    return CommandRunner(env=slurm_cluster.extra_env, timeout=30)


@pytest.fixture
def backend(runner) -> SlurmBackend:
    return SlurmBackend(runner)


def poller_for(backend: SlurmBackend) -> Poller:
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


def submit(backend: SlurmBackend, request: AllocationRequest) -> str:
    script = request.run_dir / "allocation.sbatch"
    script.write_text(backend.render(request))
    native_id = backend.submit(script, request)
    assert native_id.isdigit()
    return native_id


def test_submit_and_poll_until_completed(backend, runner, tmp_path):
    ids = []
    for n in range(3):
        request = make_request(
            tmp_path / f"run{n}",
            ["bash", "-c", 'echo "$SLURM_JOB_ID $GREETING" > result.txt'],
            env={"GREETING": f"hello {n}"},
        )
        ids.append(submit(backend, request))
    poller = poller_for(backend)
    start = time.monotonic()
    result = poller.wait_until_final(ids, timeout=30)
    elapsed = time.monotonic() - start
    for n, native_id in enumerate(ids):
        assert result[native_id].state is S.COMPLETED, result[native_id]
        assert result[native_id].exit_code == 0
        written = (tmp_path / f"run{n}" / "result.txt").read_text()
        assert written == f"{native_id} hello {n}\n"
    # One squeue per poll for all three allocations, and polls no denser than the
    # interval (minus jitter) allows.
    assert runner.calls["sbatch"] == 3
    assert runner.calls["squeue"] == poller.queries
    assert 1 <= poller.queries <= elapsed / (INTERVAL * 0.9) + 1
    assert runner.calls["sacct"] == 0


def test_failing_allocation_reports_its_exit_code(backend, tmp_path):
    request = make_request(tmp_path, ["bash", "-c", "echo doomed >&2; exit 3"])
    native_id = submit(backend, request)
    status = poller_for(backend).wait_until_final([native_id], timeout=30)[native_id]
    assert (status.state, status.native_state, status.exit_code) == (S.FAILED, "FAILED", 3)
    assert "non-zero exit code" in status.reason
    assert (tmp_path / "allocation.err").read_text() == "doomed\n"


def test_cancel_while_running(backend, slurm_cluster, tmp_path):
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
    assert poller.latest[native_id].nodes
    backend.cancel([native_id])
    status = poller.wait_until_final([native_id], timeout=20)[native_id]
    assert status.state is S.CANCELLED and status.exit_code == 143  # SIGTERM
    # Nothing of it is left among active jobs.
    active = slurm_cluster.run(["squeue", "--noheader", f"--jobs={native_id}"]).stdout
    assert active.strip() == ""
    backend.cancel([native_id])  # cancelling again is harmless


def test_invalid_partition_is_permanent_and_names_the_setting(backend, tmp_path):
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
    """An ``sbatch`` earlier on PATH fails twice like a busy controller, then works."""
    real_sbatch = slurm_cluster.run(["bash", "-c", "command -v sbatch"]).stdout.strip()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "sbatch"
    wrapper.write_text(
        "#!/bin/bash\n"
        f"count_file={tmp_path / 'count'}\n"
        'n=$(( $(cat "$count_file" 2>/dev/null || echo 0) + 1 )); echo $n > "$count_file"\n'
        'if [ "$n" -le 2 ]; then\n'
        '  echo "sbatch: error: Batch job submission failed: Socket timed out on send/recv'
        ' operation" >&2\n'
        "  exit 1\n"
        "fi\n"
        f'exec {real_sbatch} "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    runner = CommandRunner(env={**slurm_cluster.extra_env, "PATH": path})
    backend = SlurmBackend(runner)
    request = make_request(tmp_path / "run", ["true"])
    for _ in range(2):
        with pytest.raises(SubmitError) as info:
            submit(backend, request)
        assert info.value.transient is True
        assert "Socket timed out" in info.value.message
    native_id = submit(backend, request)
    assert runner.calls["sbatch"] == 3
    status = poller_for(backend).wait_until_final([native_id], timeout=30)[native_id]
    assert status.state is S.COMPLETED


def test_hostile_name_paths_and_values_submit_and_run(backend, tmp_path):
    folder = tmp_path / 'it\'s a "dir"; $(touch CANARY) `x` 50%'
    values = ["a b", "it's", "x; touch CANARY", "$(touch CANARY)", "`touch CANARY`", "a\nb"]
    request = make_request(
        folder,
        ["bash", "-c", 'printf "%s\\n---\\n" "$@" "$HOSTILE" > args.txt', "argv0", *values],
        name="a'; echo foo\n0 $(touch CANARY)",
        env={"HOSTILE": "x; touch CANARY $(touch CANARY)"},
        constraint=None,
    )
    native_id = submit(backend, request)
    status = poller_for(backend).wait_until_final([native_id], timeout=30)[native_id]
    assert status.state is S.COMPLETED, (folder / "allocation.err").read_text()
    expected = "".join(f"{v}\n---\n" for v in [*values, "x; touch CANARY $(touch CANARY)"])
    assert (folder / "args.txt").read_text() == expected
    assert (folder / "allocation.out").is_file()  # the exact path, "%" kept literal
    assert (folder / "allocation.err").read_text() == ""
    assert not list(tmp_path.rglob("CANARY"))


def test_unknown_ids_are_omitted_without_error(backend, runner):
    assert backend.poll(["999999"]) == {}  # squeue: "Invalid job id specified"
    assert backend.accounting is False  # sacct says accounting is disabled
    assert backend.poll(["999998", "999999"]) == {}
    assert runner.calls["sacct"] == 1  # asked once, remembered


def test_json_polling_matches(slurm_cluster, runner, backend, tmp_path):
    native_id = submit(backend, make_request(tmp_path, ["bash", "-c", "exit 4"]))
    poller_for(backend).wait_until_final([native_id], timeout=30)
    plain = backend.poll([native_id])
    as_json = SlurmBackend(runner, squeue_json=True).poll([native_id])
    assert plain == as_json
    assert as_json[native_id].exit_code == 4
