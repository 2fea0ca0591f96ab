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
    from tests.slurm_cluster import (
        HOW_TO_RUN,
        SlurmClusterError,
        SlurmUnavailable,
        slurm_required,
        start_cluster,
    )
except ImportError:  # repository root not on sys.path (e.g. --import-mode=importlib)
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from tests.slurm_cluster import (
        HOW_TO_RUN,
        SlurmClusterError,
        SlurmUnavailable,
        slurm_required,
        start_cluster,
    )


@pytest.fixture(scope="session")
def slurm_cluster():
    try:
        cluster = start_cluster()
    except (SlurmUnavailable, SlurmClusterError) as exc:
        if slurm_required():
            pytest.fail(
                f"SLURM test cluster required (CI=true or HPCFLOW_REQUIRE_SLURM=1) "
                f"but could not be started: {exc}",
                pytrace=False,
            )
        pytest.skip(f"SLURM test cluster not available: {exc}. {HOW_TO_RUN}")
    try:
        yield cluster
    finally:
        cluster.stop()
