"""Snakemake finds the plugin by its package name, and its settings become --hpcflow-* flags."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

# Missing, it fails these tests (never a skip), naming the package.
importlib.import_module("snakemake_interface_executor_plugins")

from snakemake_interface_common.plugin_registry.tests import TestRegistryBase  # noqa: E402
from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry  # noqa: E402

import snakemake_executor_plugin_hpcflow  # noqa: E402
from snakemake_executor_plugin_hpcflow import Executor, ExecutorSettings  # noqa: E402


def test_the_registry_lists_hpcflow():
    registry = ExecutorPluginRegistry()
    assert "hpcflow" in registry.plugins
    plugin = registry.get_plugin("hpcflow")
    assert plugin.executor is Executor


@pytest.mark.parametrize(
    ("flags", "local"),
    [
        ([], True),
        (["--hpcflow-mode", "local"], True),
        (["--hpcflow-local-groups"], False),
        (["--hpcflow-mode", "pilot"], False),
        (["--hpcflow-mode", "elastic"], False),
    ],
)
def test_local_mode_is_a_local_executor_to_snakemake_and_the_batch_modes_are_not(flags, local):
    """Snakemake's command line makes the plugin's settings (``get_settings``) before it
    reads the plugin's ``common_settings`` (``args_to_api``, ``execute_workflow``): the
    settings decide. Local mode is a local executor (groups inactive, ``--jobs`` taken as
    ``--cores``, jobs as ``--mode subprocess``); pilot, elastic and local groups are not."""
    from snakemake.cli import parse_args

    plugin = ExecutorPluginRegistry().get_plugin("hpcflow")
    for first in ([], ["--hpcflow-mode", "pilot"]):  # whatever a previous run left
        plugin.get_settings(parse_args([*first, "--executor", "hpcflow", "--jobs", "2"])[1])
        settings = plugin.get_settings(parse_args([*flags, "--executor", "hpcflow"])[1])
        assert settings.local_exec is local
        assert plugin.common_settings.local_exec is local
        assert plugin.common_settings is snakemake_executor_plugin_hpcflow.common_settings


class TestHpcflowRegistry(TestRegistryBase):
    """The interface package's own registry checks, run against this plugin."""

    __test__ = True

    def get_registry(self):
        return ExecutorPluginRegistry()

    def get_test_plugin_name(self):
        return "hpcflow"

    def validate_plugin(self, plugin):
        assert plugin.executor is Executor
        assert plugin._executor_settings_cls is ExecutorSettings

    def validate_settings(self, settings, plugin):
        assert isinstance(settings, ExecutorSettings)
        assert settings.mode == "pilot"
        assert settings.profile == "slurm"
        assert settings.nodes == 2
        assert settings.walltime == "1h"
        assert settings.transport == "tls"
        assert settings.partition == "debug"
        assert settings.account == "proj1"
        assert settings.poll_interval == 0.25
        assert settings.runner == "command"
        assert settings.local_groups is True

    def get_example_args(self):
        return [
            "--hpcflow-mode", "pilot",
            "--hpcflow-profile", "slurm",
            "--hpcflow-nodes", "2",
            "--hpcflow-walltime", "1h",
            "--hpcflow-transport", "tls",
            "--hpcflow-partition", "debug",
            "--hpcflow-account", "proj1",
            "--hpcflow-poll-interval", "0.25",
            "--hpcflow-runner", "command",
            "--hpcflow-local-groups",
        ]  # fmt: skip


def test_every_flag_has_help_text():
    import configargparse

    parser = configargparse.ArgumentParser()
    ExecutorPluginRegistry().register_cli_args(parser)
    flags = {
        action.option_strings[0]: action.help
        for action in parser._actions
        if action.option_strings and action.option_strings[0].startswith("--hpcflow-")
    }
    assert set(flags) == {
        "--hpcflow-mode",
        "--hpcflow-profile",
        "--hpcflow-nodes",
        "--hpcflow-walltime",
        "--hpcflow-transport",
        "--hpcflow-partition",
        "--hpcflow-account",
        "--hpcflow-poll-interval",
        "--hpcflow-runner",
        "--hpcflow-local-groups",
    }
    assert all(text and len(text) > 20 for text in flags.values())


def test_an_unknown_mode_is_refused_by_the_parser():
    import configargparse

    parser = configargparse.ArgumentParser()
    ExecutorPluginRegistry().register_cli_args(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--hpcflow-mode", "cloud"])


def test_importing_the_plugin_leaves_what_runs_jobs_unimported():
    """Snakemake imports the plugin in every process it starts, each warm runner included
    (its registry reads ``Executor``): the runner only serves jobs, so the plugin's import
    must not bring in the sessions, the Dask calls, the run's record or the translation's
    pydantic models (about 0.2 s of each runner's start). A fresh interpreter shows it."""
    heavy = (
        "pydantic",
        "hpcflow.spec.models",
        "hpcflow.store.statedb",
        "hpcflow.worker.local_cluster",
        "snakemake_executor_plugin_hpcflow.session",
        "snakemake_executor_plugin_hpcflow.batch_sessions",
        "snakemake_executor_plugin_hpcflow.calls",
        "snakemake_executor_plugin_hpcflow.translate",
        "snakemake_executor_plugin_hpcflow.record",
        "distributed",
    )
    code = (
        "import sys, snakemake_executor_plugin_hpcflow\n"
        f"print(' '.join(m for m in {heavy!r} if m in sys.modules))"
    )
    imported = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert imported == []
