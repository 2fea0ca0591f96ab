"""The plugin's pieces that need no cluster: mode choice, error texts, the address file."""

from __future__ import annotations

import importlib
import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

# Missing, it fails these tests (never a skip), naming the package.
importlib.import_module("snakemake_interface_executor_plugins")

from hpcflow.errors import HpcflowError  # noqa: E402
from hpcflow.modes.pilot_client import published_address  # noqa: E402
from hpcflow.worker.calls import Outcome  # noqa: E402
from snakemake_executor_plugin_hpcflow.executor import failure_message, make_session  # noqa: E402
from snakemake_executor_plugin_hpcflow.session import LocalSession  # noqa: E402
from snakemake_executor_plugin_hpcflow.settings import ExecutorSettings  # noqa: E402
from snakemake_executor_plugin_hpcflow.translate import JobRequest, task_for_job  # noqa: E402

WORKFLOW = SimpleNamespace(main_snakefile="Snakefile")


def test_local_mode_makes_a_local_session_and_starts_nothing(tmp_path: Path):
    session = make_session(ExecutorSettings(), tmp_path, WORKFLOW)
    assert isinstance(session, LocalSession)
    assert session.client is None
    assert not (tmp_path / ".hpcflow").exists()  # nothing happens before the first job


def test_pilot_mode_with_a_local_profile_is_a_user_error(tmp_path: Path):
    with pytest.raises(HpcflowError) as info:
        make_session(ExecutorSettings(mode="pilot", profile="local"), tmp_path, WORKFLOW)
    assert "needs a batch profile" in str(info.value)
    assert "--hpcflow-profile slurm" in str(info.value)


def test_pilot_mode_flags_override_the_profile(tmp_path: Path):
    settings = ExecutorSettings(
        mode="pilot", profile="slurm-test", nodes=3, walltime="1h", partition="gpu"
    )
    session = make_session(settings, tmp_path, WORKFLOW)
    profile = session.profile  # type: ignore[attr-defined]
    assert (profile.nodes, profile.walltime, profile.partition) == (3, 3600.0, "gpu")
    assert session.mpi_as_step


def test_a_failure_message_names_what_happened_and_both_logs():
    task = task_for_job(JobRequest(name="bad", jobid=3, wildcards=(("x", "1"),), attempt=2))
    outcome = Outcome(
        index=0,
        attempt=2,
        state="failed",
        exit_code=3,
        started=0.0,
        ended=1.0,
        host="n1",
        message="exited with 3",
    )
    text = failure_message(task, "/r/tasks/s/2.out", "/r/tasks/s/2.err", outcome)
    assert "bad[x=1] (attempt 2) failed: exited with 3 on n1" in text
    assert "/r/tasks/s/2.out" in text and "/r/tasks/s/2.err" in text
    assert "was lost" in failure_message(task, "o", "e", None)


def test_the_published_address_must_be_this_allocations(tmp_path: Path):
    path = tmp_path / "scheduler.json"
    assert published_address(path, "7") is None
    path.write_text(json.dumps({"address": "tls://10.0.0.1:8786", "allocation": "6"}))
    assert published_address(path, "7") is None  # an earlier allocation's file
    path.write_text(json.dumps({"address": "tls://10.0.0.1:8786", "allocation": "7"}))
    assert published_address(path, "7") == "tls://10.0.0.1:8786"
    path.write_text("{not json")
    assert published_address(path, "7") is None


def test_a_status_check_before_post_init_is_harmless():
    # Snakemake starts the status thread before the executor's __post_init__ has run.
    import asyncio

    from snakemake_executor_plugin_hpcflow.executor import Executor

    executor = Executor.__new__(Executor)

    async def check() -> list:
        return [job async for job in executor.check_active_jobs([])]

    assert asyncio.run(check()) == []


class _Backend:
    """Answers polls with a scripted state; counts cancels (no batch system)."""

    name = "slurm"

    def __init__(self, state, native_state: str) -> None:
        from hpcflow.backends.base import AllocationStatus

        self.status = AllocationStatus("41", state, native_state)
        self.polls = 0
        self.cancelled: list[str] = []

    def poll(self, ids):
        self.polls += 1
        return {"41": self.status}

    def cancel(self, ids):
        self.cancelled.extend(ids)


def _pilot(tmp_path: Path, backend: _Backend, *, resubmit: bool = True, number: int = 1):
    """A PilotSession whose allocation 41 (number ``number``) lost its scheduler."""
    from hpcflow.modes.pilot_client import PilotClientAllocation
    from hpcflow.settings import resolve_profile
    from hpcflow.store.paths import RunPaths
    from snakemake_executor_plugin_hpcflow.batch_sessions import PilotSession

    profile = resolve_profile(
        "slurm-test", overrides={"resubmit": resubmit, "poll_interval": 0.01}
    ).profile
    session = PilotSession(tmp_path, "Snakefile", profile, backend)  # type: ignore[arg-type]
    allocation = PilotClientAllocation(
        profile,
        backend,
        RunPaths(tmp_path / "run"),
        "r1",
        tmp_path,  # type: ignore[arg-type]
    )
    allocation.native_id, allocation.number = "41", number
    allocation._client = SimpleNamespace(status="connecting", close=lambda **kw: None)
    session.allocation = session.workers = allocation
    return session, allocation


@pytest.mark.parametrize(
    ("native_state", "resubmit", "number", "verdict"),
    [
        ("TIMEOUT", True, 1, "resend"),  # walltime: continued
        ("NODE_FAIL", True, 3, "resend"),  # a lost node: continued too
        ("TIMEOUT", False, 1, "failed"),  # the profile does not continue runs
        ("TIMEOUT", True, 4, "failed"),  # max_resubmits (3) continuations already
        ("COMPLETED", True, 1, "failed"),  # ended for another reason: nothing to continue
    ],
)
def test_jobs_lost_with_the_allocation_are_resent_only_to_a_continuation(
    tmp_path: Path, monkeypatch, native_state: str, resubmit: bool, number: int, verdict: str
):
    from hpcflow.backends.base import AllocationState

    state = AllocationState.COMPLETED if native_state == "COMPLETED" else AllocationState.TIMEOUT
    if native_state == "NODE_FAIL":
        state = AllocationState.FAILED
    backend = _Backend(state, native_state)
    session, allocation = _pilot(tmp_path, backend, resubmit=resubmit, number=number)
    started = []
    monkeypatch.setattr(allocation, "_continue", lambda old: started.append(allocation.number + 1))
    assert session.lost() == verdict
    assert started == ([number + 1] if verdict == "resend" else [])
    if verdict == "resend":
        assert allocation._client is None  # the lost cluster's client is closed
        assert session.submit(None, None) is None  # type: ignore[arg-type]  # jobs wait


def test_a_lost_job_on_a_live_cluster_fails_and_a_lost_scheduler_waits_for_the_end(
    tmp_path: Path,
):
    from hpcflow.backends.base import AllocationState

    backend = _Backend(AllocationState.RUNNING, "RUNNING")
    session, allocation = _pilot(tmp_path, backend)
    allocation._client = SimpleNamespace(status="running")
    assert session.client is allocation._client
    assert session.lost() == "failed" and backend.polls == 0  # Dask gave up on the job
    allocation._client = SimpleNamespace(status="connecting", close=lambda **kw: None)
    assert session.lost() == "wait"  # scheduler gone, SLURM still says RUNNING
    assert session.submit(None, None) is None  # new jobs wait too  # type: ignore[arg-type]
    # ... for longer than the grace: the allocation is given up.
    allocation._lost_since = time.monotonic() - 1000.0
    allocation._last_poll = 0.0
    assert session.lost() == "failed" and backend.cancelled == ["41"]


def test_the_continuation_rule_is_pilot_modes():
    from hpcflow.backends.base import AllocationState, AllocationStatus
    from hpcflow.modes.pilot import continuation_due
    from hpcflow.settings import resolve_profile

    profile = resolve_profile("slurm-test", overrides={"resubmit": True}).profile
    timeout = AllocationStatus("41", AllocationState.TIMEOUT, "TIMEOUT")
    completed = AllocationStatus("41", AllocationState.COMPLETED, "COMPLETED")
    assert continuation_due(timeout, False, profile, 1) == "hit its walltime"
    assert continuation_due(completed, True, profile, 1) == "hit its walltime"  # drained
    assert continuation_due(completed, False, profile, 1) is None
    assert continuation_due(timeout, False, profile, profile.max_resubmits + 1) is None
