"""Fixtures for the fault tests that need a SLURM cluster of their own.

A test that changes node state (kills a node) or loads the controller gets a private
cluster, so no other test sees it. Without root or SLURM the tests are skipped, unless
``CI=true`` or ``HPCFLOW_REQUIRE_SLURM=1``: then they fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

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
