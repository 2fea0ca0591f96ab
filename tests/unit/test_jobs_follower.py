"""Jobs mode's submit side without a batch system: how refusals are handled (a queue
limit with nothing of ours queued, transient errors past the retries, a bad request)
and what is left in the state database. The real runs are in
tests/integration/slurm/test_jobs_mode.py."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from hpcflow.backends.base import AllocationRequest, AllocationState, AllocationStatus
from hpcflow.engine.prepare import RunOptions, prepare
from hpcflow.errors import RunError, SubmitError
from hpcflow.modes.follow import Follow
from hpcflow.modes.jobs import run_jobs
from hpcflow.settings.profile import Profile
from hpcflow.store import statedb as st
from tests.conftest import write_workflow

WORKFLOW = """
name: two
tasks:
  - name: a
    foreach: {i: [1, 2, 3]}
    command: echo {i}
  - name: b
    needs: [a]
    command: "true"
"""


class Refusing:
    """A backend whose every submission fails with ``error``."""

    name = "slurm"

    def __init__(self, error: SubmitError) -> None:
        self.error = error
        self.submitted = 0
        self.rendered: list[AllocationRequest] = []

    def render(self, request: AllocationRequest) -> str:
        self.rendered.append(request)
        return "#!/bin/bash\ntrue\n"

    def submit(self, script: Path, request: AllocationRequest) -> str:
        self.submitted += 1
        raise self.error

    def poll(self, native_ids: Sequence[str]) -> dict[str, AllocationStatus]:
        return {}

    def cancel(self, native_ids: Sequence[str]) -> None:
        pass


def _run(tmp_path, monkeypatch, backend, **profile):
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.setattr("hpcflow.modes.jobs.TICK", 0.01)
    wf = write_workflow(tmp_path, WORKFLOW)
    options = RunOptions()
    settings = Profile(name="fake", backend="slurm", submit_rate=1000, **profile)
    return prepare(wf, options), options, settings, backend


def _state_db(tmp_path) -> st.StateDB:
    (db_path,) = tmp_path.glob(".hpcflow/runs/*/state.sqlite")
    return st.StateDB(db_path, readonly=True)


def test_a_queue_limit_with_nothing_of_ours_queued_fails(tmp_path, monkeypatch):
    """Waiting only helps while some of our own jobs are queued: with none, the limit
    cannot be waited out and the run stops with the hint."""
    limit = SubmitError("sbatch refused the job: QOSMaxSubmitJobPerUserLimit",
                        transient=False, limit=True, hint="wait")  # fmt: skip
    backend = Refusing(limit)
    with pytest.raises(SubmitError, match="QOSMaxSubmitJobPerUserLimit"):
        run_jobs(*_run(tmp_path, monkeypatch, backend))
    assert backend.submitted == 1
    with _state_db(tmp_path) as db:
        assert db.meta()["status"] == "failed"
        assert {r.state for r in db.tasks()} == {st.CANCELLED}


def test_transient_errors_are_retried_then_fail(tmp_path, monkeypatch):
    busy = SubmitError("sbatch failed: Socket timed out", transient=True)
    backend = Refusing(busy)
    prepared, options, profile, _ = _run(tmp_path, monkeypatch, backend, submit_retries=2)
    monkeypatch.setattr("hpcflow.modes.jobs_plan.LimitBackoff.refused", lambda self: 0.0)
    with pytest.raises(SubmitError, match="Socket timed out"):
        run_jobs(prepared, options, profile, backend)
    assert backend.submitted == 3  # the first try and 2 retries


def test_the_first_job_is_the_sweep_as_one_array(tmp_path, monkeypatch):
    bad = SubmitError("sbatch rejected: Invalid partition name specified", transient=False)
    backend = Refusing(bad)
    with pytest.raises(SubmitError):
        run_jobs(*_run(tmp_path, monkeypatch, backend, array_parallelism=2))
    (request,) = backend.rendered
    assert request.task_name == "a" and request.array_size == 3
    assert request.array_parallelism == 2 and request.depends_on == ()
    assert request.command[-3:] == ["hpcflow.modes.jobtask", str(request.run_dir), "1"]


def test_detach_is_refused_before_anything_is_created(tmp_path, monkeypatch):
    backend = Refusing(SubmitError("never", transient=False))
    prepared, options, profile, _ = _run(tmp_path, monkeypatch, backend)
    with pytest.raises(RunError, match="--detach"):
        run_jobs(prepared, options, profile, backend, Follow(detach=True))
    assert backend.submitted == 0
    assert not list(tmp_path.glob(".hpcflow/runs/*"))


class RunsAtOnce:
    """A backend that runs a job's elements when it is first polled and reports it as PBS
    does: completed (``C``), whatever its elements' exit codes. The outcome files so turn
    up after the batch system said the job ended (a race on a real cluster)."""

    name = "pbs"

    def __init__(self) -> None:
        self.requests: dict[str, AllocationRequest] = {}

    def render(self, request: AllocationRequest) -> str:
        return "#!/bin/bash\ntrue\n"

    def submit(self, script: Path, request: AllocationRequest) -> str:
        native_id = f"{len(self.requests) + 1}[].server"
        self.requests[native_id] = request
        return native_id

    def poll(self, native_ids: Sequence[str]) -> dict[str, AllocationStatus]:
        for native_id in native_ids:
            request = self.requests.pop(native_id, None)
            for element in range(max(request.array_size, 1) if request else 0):
                env = {**os.environ, "PBS_ARRAY_INDEX": str(element)}
                env["PBS_JOBID"] = native_id.replace("[]", f"[{element}]")
                subprocess.run(list(request.command), env=env, check=False, capture_output=True)
        return {
            i: AllocationStatus(native_id=i, state=AllocationState.COMPLETED, native_state="C")
            for i in native_ids
        }

    def cancel(self, native_ids: Sequence[str]) -> None:
        pass


def _run_one_array(tmp_path, monkeypatch, backend, command: str, poll_interval: float):
    """Run a three-instance sweep of ``command`` in jobs mode on ``backend`` (PBS)."""
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.setattr("hpcflow.modes.jobs.TICK", 0.01)
    wf = write_workflow(
        tmp_path,
        f"name: one\ntasks:\n  - name: a\n    foreach: {{i: [1, 2, 3]}}\n    command: {command}\n",
    )
    options = RunOptions()
    profile = Profile(name="fake", backend="pbs", submit_rate=1000, poll_interval=poll_interval)
    return run_jobs(prepare(wf, options), options, profile, backend)


def test_a_job_with_a_failed_task_is_failed_even_when_pbs_says_completed(tmp_path, monkeypatch):
    """PBS calls a finished array ``C`` whatever its elements' exit codes; the run's record
    of that job says failed when one of its tasks failed (this was a race: it depended on
    whether the poll or the outcome files came first)."""
    _run_one_array(tmp_path, monkeypatch, RunsAtOnce(), "test {i} != 2", poll_interval=0.05)
    with _state_db(tmp_path) as db:
        assert [a.state for a in db.allocations()] == ["failed"]
        assert sorted(r.state for r in db.tasks()) == [st.FAILED, st.SUCCEEDED, st.SUCCEEDED]


class LastElementReported(RunsAtOnce):
    """SLURM's qsub wrapper: the array's id is its last element alone, so the array is
    reported ended while another element of the same wave is still starting (here: one
    starts ``delay`` seconds after the poll that says the array completed)."""

    def __init__(self, late: int, delay: float) -> None:
        super().__init__()
        self.late = late
        self.delay = delay
        self.threads: list[threading.Thread] = []

    def poll(self, native_ids: Sequence[str]) -> dict[str, AllocationStatus]:
        for native_id in native_ids:
            request = self.requests.pop(native_id, None)
            for element in range(max(request.array_size, 1) if request else 0):
                env = {**os.environ, "PBS_ARRAYID": str(element)}
                env["PBS_JOBID"] = native_id.replace("[]", f"[{element}]")
                command = list(request.command)
                if element != self.late:
                    subprocess.run(command, env=env, check=False, capture_output=True)
                    continue
                late = threading.Timer(
                    self.delay, subprocess.run, (command,), {"env": env, "capture_output": True}
                )
                late.start()
                self.threads.append(late)
        return {
            i: AllocationStatus(native_id=i, state=AllocationState.COMPLETED, native_state="C")
            for i in native_ids
        }


def test_an_element_that_starts_after_its_array_was_reported_ended_still_counts(
    tmp_path, monkeypatch
):
    """The array is reported completed, and one element starts a moment later (longer
    than the outcome grace): that element runs and succeeds, it is not failed as an
    element that never started."""
    monkeypatch.setattr("hpcflow.modes.jobs.OUTCOME_GRACE", 0.05)
    monkeypatch.setattr("hpcflow.modes.jobs.UNSTARTED_ELEMENT_GRACE", 30.0)
    backend = LastElementReported(late=1, delay=1.0)
    summary = _run_one_array(tmp_path, monkeypatch, backend, "echo {i}", poll_interval=0.02)
    for thread in backend.threads:
        thread.join()
    with _state_db(tmp_path) as db:
        assert sorted(r.state for r in db.tasks()) == [st.SUCCEEDED] * 3
        assert [a.state for a in db.allocations()] == ["completed"]
    assert summary.ok


def test_an_arrays_output_folders_are_made_before_it_is_submitted(tmp_path):
    """Made once on the submit host, not by every element at once through the nodes'
    shared-file-system clients (GlusterFS answered such a race with EEXIST)."""
    from hpcflow.dag.graph import build_graph
    from hpcflow.modes.jobs import make_output_folders
    from hpcflow.spec.loader import load_workflow
    from tests.conftest import write_workflow

    wf = write_workflow(
        tmp_path,
        """
name: folders
tasks:
  - name: t
    foreach: {i: [1, 2, 3]}
    command: "true"
    outputs: ["results/{i}/a.txt", "top.{i}.txt"]
""",
    )
    graph = build_graph(load_workflow(wf), check_files=False)
    make_output_folders(graph, [0, 1])
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["1", "2"]
    assert not (tmp_path / "top.1.txt").exists()
