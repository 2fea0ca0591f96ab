"""Fixtures for the fault tests that need a SLURM cluster.

Tests that only run pilots use the shared test cluster (``slurm_cluster``, ``slurm_env``,
as in tests/integration/slurm). A test that changes node state (kills a node or the
controller) or loads the controller gets a private cluster, so no other test sees it.
Every cluster mounts the session cluster's GlusterFS volume, and a test marked ``slurm``
gets its ``tmp_path`` there (``tmp_path``, ``env`` as in tests/integration/slurm), so
the nodes of whichever cluster it starts see its folders at the same path.
Without root or SLURM the tests are skipped, unless ``CI=true`` or
``HPCFLOW_REQUIRE_SLURM=1``: then they fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.integration.slurm.conftest import (  # noqa: F401  (the shared cluster's fixtures)
    env,
    hpcflow_slurm,
    slurm_cluster,
    slurm_env,
    submit_tmp_path,
    tmp_path,
)
from tests.slurm_cluster import SlurmCluster, start_test_cluster


@pytest.fixture
def private_cluster() -> Iterator[Callable[..., SlurmCluster]]:
    """``private_cluster(**start_cluster_options)``: a cluster stopped after the test
    (it mounts the session cluster's shared volume, like every ``start_test_cluster``)."""
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
