"""The plugin's pieces that need no cluster: mode choice, error texts, the address file."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("snakemake_interface_executor_plugins")

from hpcflow.errors import HpcflowError  # noqa: E402
from hpcflow.runtime.calls import Outcome  # noqa: E402
from snakemake_executor_plugin_hpcflow.executor import failure_message, make_session  # noqa: E402
from snakemake_executor_plugin_hpcflow.session import (  # noqa: E402
    LocalSession,
    _published_address,
)
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
    outcome = Outcome(0, 2, "failed", 3, 0.0, 1.0, host="n1", message="exited with 3")
    text = failure_message(task, "/r/tasks/s/2.out", "/r/tasks/s/2.err", outcome)
    assert "bad[x=1] (attempt 2) failed: exited with 3 on n1" in text
    assert "/r/tasks/s/2.out" in text and "/r/tasks/s/2.err" in text
    assert "was lost" in failure_message(task, "o", "e", None)


def test_the_published_address_must_be_this_allocations(tmp_path: Path):
    path = tmp_path / "scheduler.json"
    assert _published_address(path, "7") is None
    path.write_text(json.dumps({"address": "tls://10.0.0.1:8786", "allocation": "6"}))
    assert _published_address(path, "7") is None  # an earlier allocation's file
    path.write_text(json.dumps({"address": "tls://10.0.0.1:8786", "allocation": "7"}))
    assert _published_address(path, "7") == "tls://10.0.0.1:8786"
    path.write_text("{not json")
    assert _published_address(path, "7") is None


def test_a_status_check_before_post_init_is_harmless():
    # Snakemake starts the status thread before the executor's __post_init__ has run.
    import asyncio

    from snakemake_executor_plugin_hpcflow.executor import Executor

    executor = Executor.__new__(Executor)

    async def check() -> list:
        return [job async for job in executor.check_active_jobs([])]

    assert asyncio.run(check()) == []
