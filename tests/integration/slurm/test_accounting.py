"""The SLURM backend's ``sacct`` fallback against a real cluster WITH accounting.

The session cluster (``slurm_cluster``) has no slurmdbd, so its ``sacct`` says
"accounting storage is disabled". This module starts a second, private cluster
with MariaDB + slurmdbd (``start_cluster(accounting=True)``, on its own free
ports, next to the session one) and a short MinJobAge, so that finished jobs leave
squeue within ~10 s; polling them must then go through ONE ``sacct`` call.

Needs ``sudo bash slurm/install-deps.sh --accounting``. Without root, SLURM or
slurmdbd/MariaDB the tests are skipped, unless ``CI=true`` or
``HPCFLOW_REQUIRE_SLURM=1``: then they fail.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hpcflow.backends._commands import CommandRunner
from hpcflow.backends.base import AllocationRequest, AllocationState
from hpcflow.backends.slurm import SlurmBackend
from tests.slurm_cluster import SlurmCluster, SlurmClusterError, start_test_cluster

pytestmark = pytest.mark.slurm

S = AllocationState
#: Seconds a finished job stays in squeue (plus up to ~10 s until the purge runs).
MIN_JOB_AGE = 5
PURGE_TIMEOUT = 45


@pytest.fixture(scope="module")
def acct_cluster(slurm_cluster):
    """A one-node cluster with slurmdbd + MariaDB, for this module only. It mounts the
    session cluster's volume (where the tests' folders are), so that one starts first."""
    cluster = start_test_cluster(
        "with accounting (slurm/install-deps.sh --accounting)",
        nodes=1, cpus=4, gpus=0, min_job_age=MIN_JOB_AGE, timeout=60, accounting=True,
    )  # fmt: skip
    try:
        yield cluster
    finally:
        cluster.stop()


def make_request(folder: Path, command: list[str], name: str) -> AllocationRequest:
    folder.mkdir(parents=True, exist_ok=True)
    return AllocationRequest(
        run_id=f"acct-{name}",
        job_name=name,
        run_dir=folder,
        stdout=folder / "allocation.out",
        stderr=folder / "allocation.err",
        command=command,
    )


def submit(backend: SlurmBackend, request: AllocationRequest) -> str:
    script = request.run_dir / "allocation.sbatch"
    script.write_text(backend.render(request))
    native_id = backend.submit(script, request)
    assert native_id.isdigit()
    return native_id


def wait_until_purged(cluster: SlurmCluster, ids: list[str], timeout: float) -> None:
    """Wait until squeue (and scontrol) no longer know any of ``ids``."""
    deadline = time.monotonic() + timeout
    while True:
        known = [i for i in ids if cluster.job_state(i) is not None]
        if not known:
            return
        if time.monotonic() >= deadline:
            raise SlurmClusterError(
                f"jobs {known} still in squeue {timeout}s after they ended "
                f"(MinJobAge={MIN_JOB_AGE})",
                cluster.log_tail(),
            )
        time.sleep(0.5)


def test_purged_jobs_are_reported_through_one_sacct_call(acct_cluster, tmp_path):
    assert acct_cluster.accounting is True
    runner = CommandRunner(env=acct_cluster.extra_env, timeout=30)
    backend = SlurmBackend(runner)
    assert backend.accounting is None

    ok = submit(backend, make_request(tmp_path / "ok", ["true"], "acct-ok"))
    bad = submit(backend, make_request(tmp_path / "bad", ["bash", "-c", "exit 3"], "acct-bad"))
    sleeper = submit(backend, make_request(tmp_path / "sleep", ["sleep", "300"], "acct-sleep"))
    try:
        assert acct_cluster.wait_for_job(ok) == "COMPLETED"
        assert acct_cluster.wait_for_job(bad) == "FAILED"

        # While squeue still knows them, squeue alone answers.
        runner.calls.clear()
        before = backend.poll([ok, bad])
        assert (before[ok].state, before[bad].state) == (S.COMPLETED, S.FAILED)
        assert runner.calls == {"squeue": 1}
        assert backend.accounting is None

        wait_until_purged(acct_cluster, [ok, bad], PURGE_TIMEOUT)

        # Purged ids (and one never seen) go to ONE sacct call; the live job
        # is still answered by squeue.
        runner.calls.clear()
        result = backend.poll([ok, bad, sleeper, "999999"])
        assert runner.calls == {"squeue": 1, "sacct": 1}
        assert backend.accounting is True
        assert set(result) == {ok, bad, sleeper}
        assert (result[ok].state, result[ok].native_state, result[ok].exit_code) == (
            S.COMPLETED,
            "COMPLETED",
            0,
        )
        assert (result[bad].state, result[bad].native_state, result[bad].exit_code) == (
            S.FAILED,
            "FAILED",
            3,
        )
        assert result[sleeper].state in (S.QUEUED, S.RUNNING)

        # Every poll that misses an id asks sacct once more, and only then.
        runner.calls.clear()
        single = backend.poll([bad])
        assert runner.calls == {"squeue": 1, "sacct": 1}
        assert (single[bad].state, single[bad].exit_code) == (S.FAILED, 3)

        runner.calls.clear()
        assert set(backend.poll([sleeper])) == {sleeper}
        assert runner.calls == {"squeue": 1}
        assert backend.accounting is True
    finally:
        backend.cancel([sleeper])


def test_accounting_stays_off_on_the_session_cluster(slurm_cluster):
    assert slurm_cluster.accounting is False
    runner = CommandRunner(env=slurm_cluster.extra_env, timeout=30)
    backend = SlurmBackend(runner)
    assert backend.accounting is None
    assert backend.poll(["999999"]) == {}  # squeue does not know it; sacct is off
    assert backend.accounting is False
    assert backend.poll(["999999"]) == {}
    assert runner.calls == {"squeue": 2, "sacct": 1}  # remembered: asked once
