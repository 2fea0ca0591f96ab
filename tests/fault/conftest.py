"""Fixtures for the fault tests that need a SLURM cluster.

Tests that only run pilots use the shared test cluster (``slurm_cluster``, ``slurm_env``,
as in tests/integration/slurm). A test that changes node state (kills a node or the
controller) or loads the controller gets a private cluster, so no other test sees it.
Without root or SLURM the tests are skipped, unless ``CI=true`` or
``HPCFLOW_REQUIRE_SLURM=1``: then they fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.integration.slurm.conftest import (  # noqa: F401  (the shared cluster's fixtures)
    hpcflow_slurm,
    slurm_cluster,
    slurm_env,
)
from tests.slurm_cluster import SlurmCluster, start_test_cluster


@pytest.fixture
def private_cluster() -> Iterator[Callable[..., SlurmCluster]]:
    """``private_cluster(**start_cluster_options)``: a cluster stopped after the test."""
    started: list[SlurmCluster] = []

    def start(**options: object) -> SlurmCluster:
        cluster = start_test_cluster(**options)
        started.append(cluster)
        return cluster

    try:
        yield start
    finally:
        for cluster in started:
            cluster.stop()
