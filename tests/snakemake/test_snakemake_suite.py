"""Snakemake's own executor-plugin test suite (``snakemake.common.tests``), run in-process."""

from __future__ import annotations

import importlib
import os

import pytest

# Missing, it fails these tests (never a skip), naming the package.
importlib.import_module("snakemake.common.tests")

from snakemake.common.tests import TestWorkflowsLocalStorageBase  # noqa: E402

from snakemake_executor_plugin_hpcflow import ExecutorSettings  # noqa: E402

pytestmark = pytest.mark.slow


class TestHpcflowLocal(TestWorkflowsLocalStorageBase):
    """``test_simple_workflow`` and ``test_group_workflow`` on the local hpcflow cluster."""

    __test__ = True

    def get_executor(self) -> str:
        return "hpcflow"

    def get_executor_settings(self) -> ExecutorSettings:
        return ExecutorSettings(mode="local", poll_interval=0.2)

    def run_workflow(self, test_name, tmp_path, deployment_method=frozenset()):
        # Snakemake changes into the workflow's folder; put the caller's back afterwards.
        cwd = os.getcwd()
        try:
            super().run_workflow(test_name, tmp_path, deployment_method)
        finally:
            os.chdir(cwd)
        assert any((tmp_path / test_name / ".hpcflow" / "runs").iterdir())
