"""The plugin's state.sqlite: what `hpcflow runs`/`status`/`logs` read of a Snakemake run."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

# Missing, it fails these tests (never a skip), naming the package.
importlib.import_module("snakemake_interface_executor_plugins")

from hpcflow.store.registry import list_runs  # noqa: E402
from hpcflow.store.statedb import StateDB  # noqa: E402
from hpcflow.worker.calls import Outcome  # noqa: E402
from snakemake_executor_plugin_hpcflow.record import Ended, create_run_dir  # noqa: E402
from snakemake_executor_plugin_hpcflow.translate import JobRequest, task_for_job  # noqa: E402


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))


def task(name: str, i: int, attempt: int = 1):
    return task_for_job(JobRequest(name=name, jobid=i, wildcards=(("i", str(i)),), attempt=attempt))


def outcome(state: str, exit_code: int = 0) -> Outcome:
    return Outcome(
        index=99,
        attempt=7,
        state=state,
        exit_code=exit_code,
        started=1.0,
        ended=2.0,
        host="n1",
        message=None,
    )


def test_a_run_is_registered_with_its_meta_data(tmp_path: Path):
    (tmp_path / "Snakefile").touch()
    run_id, paths, _ = create_run_dir(tmp_path, "pilot", "Snakefile", "slurm")
    (entry,) = list_runs()
    assert entry.run_id == run_id and entry.workflow == str(tmp_path / "Snakefile")
    with StateDB(paths.state_db, readonly=True) as db:
        meta = db.meta()
    assert (meta["status"], meta["engine"], meta["mode"], meta["backend"]) == (
        "running", "snakemake", "pilot", "slurm",
    )  # fmt: skip


def test_jobs_by_rule_retries_and_the_final_status(tmp_path: Path):
    _, paths, record = create_run_dir(tmp_path, "local", "Snakefile", "local")
    a, b, c = task("square", 1), task("square", 2), task("total", 3)
    rows = [record.started(t) for t in (a, b, c)]
    record.ended([Ended(rows[0], 1, outcome("succeeded")), Ended(rows[1], 1, None)])
    # Snakemake retries job 2: the same row, attempt 2, and it succeeds.
    assert record.started(task("square", 2, attempt=2)) == rows[1]
    record.ended([Ended(rows[1], 2, outcome("succeeded"))])
    with StateDB(paths.state_db, readonly=True) as db:
        assert db.counts() == {"square": {"succeeded": 2}, "total": {"running": 1}}
        (lost, retried) = db.attempts(rows[1])
        assert lost.state == "failed" and "lost" in (lost.message or "")
        assert (retried.attempt, retried.state, retried.host) == (2, "succeeded", "n1")
        assert db.meta()["total"] == 3
    record.cancel_running()  # Ctrl-C: `total` was running
    assert record.finish(cancelled=True) == "cancelled"
    with StateDB(paths.state_db, readonly=True) as db:
        assert db.counts()["total"] == {"cancelled": 1}
        assert db.meta()["ended"] >= db.meta()["started"]


def test_a_failed_job_or_a_run_error_fails_the_run(tmp_path: Path):
    _, _, record = create_run_dir(tmp_path, "local", "Snakefile", "local")
    row = record.started(task("bad", 1))
    record.ended([Ended(row, 1, outcome("failed", 3))])
    assert record.finish(cancelled=True) == "failed"
    _, _, other = create_run_dir(tmp_path, "local", "Snakefile", "local")
    other.error("job x asks for 4096 cpus")
    assert other.finish(cancelled=False) == "failed"
    _, _, fine = create_run_dir(tmp_path, "local", "Snakefile", "local")
    assert fine.finish(cancelled=False) == "succeeded"


def test_started_jobs_are_written_together_by_the_next_flush(tmp_path: Path):
    # Snakemake's main thread only notes them: one write per status check, not per job.
    _, paths, record = create_run_dir(tmp_path, "local", "Snakefile", "local")
    rows = [record.started(task("square", i)) for i in range(3)]
    with StateDB(paths.state_db, readonly=True) as db:
        assert db.counts() == {}
    record.flush()
    with StateDB(paths.state_db, readonly=True) as db:
        assert db.counts() == {"square": {"running": 3}}
        assert db.meta()["total"] == 3
    record.flush()  # nothing new: nothing written
    record.ended([Ended(rows[0], 1, outcome("succeeded"))])
    with StateDB(paths.state_db, readonly=True) as db:
        assert db.counts() == {"square": {"running": 2, "succeeded": 1}}
