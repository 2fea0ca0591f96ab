"""Fixtures for the tests that run against a real, private SLURM cluster.

``slurm_cluster`` (session scope) starts the cluster once (4 nodes n1..n4 x 2
CPUs x 2 fake GPUs, partitions ``debug`` and ``gpu``; about 0.2 s) and stops
it at the end of the session. Use ``slurm_cluster.env`` as the environment of
client commands (it sets ``SLURM_CONF``), or ``slurm_cluster.run([...])``.

Without root or without SLURM installed the tests are skipped, unless
``CI=true`` or ``HPCFLOW_REQUIRE_SLURM=1``: then they fail.
"""

import pytest

try:
    from tests.slurm_cluster import start_test_cluster
except ImportError:  # repository root not on sys.path (e.g. --import-mode=importlib)
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from tests.slurm_cluster import start_test_cluster


@pytest.fixture(scope="session")
def slurm_cluster():
    cluster = start_test_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def slurm_env(env, slurm_cluster):
    """The CLI's environment (private HPCFLOW_HOME) pointed at the test cluster."""
    return {**env, **slurm_cluster.extra_env}


@pytest.fixture
def hpcflow_slurm(slurm_env):
    """Run ``hpcflow ARGS...`` as a real process against the test cluster."""
    import subprocess
    import sys

    from tests.conftest import CliResult

    def run(*args, cwd=None, timeout: float = 180) -> CliResult:
        proc = subprocess.run(
            [sys.executable, "-m", "hpcflow.cli.main", *args],
            cwd=cwd, env=slurm_env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        return CliResult(proc.returncode, proc.stdout, proc.stderr)

    return run


def queued_jobs(slurm_cluster) -> list[str]:
    """Every job the test cluster still lists (``squeue``), as "ID STATE" lines."""
    out = slurm_cluster.run(["squeue", "-h", "-o", "%i %T"], check=False).stdout
    return [line for line in out.splitlines() if line.strip()]


def queue_drains(slurm_cluster, timeout: float = 30) -> list[str]:
    """Wait until the test cluster lists no job (an allocation ends a moment after its
    run does: the ranks shut down and finalize together); return what is left."""
    import time

    deadline = time.monotonic() + timeout
    while queued_jobs(slurm_cluster) and time.monotonic() < deadline:
        time.sleep(0.3)
    return queued_jobs(slurm_cluster)
