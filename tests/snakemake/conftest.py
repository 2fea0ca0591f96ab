"""Fixtures for the Snakemake plugin tests: run the real ``snakemake`` CLI in a folder."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from tests.snakemake.helpers import clean_env, run_snakemake

# Missing, it fails these tests (never a skip), naming the package.
importlib.import_module("snakemake")


@pytest.fixture
def snakemake_env(env: dict[str, str]) -> dict[str, str]:
    """The CLI environment without variables that would send Snakemake elsewhere."""
    return clean_env(env)


@pytest.fixture
def snakemake(snakemake_env: dict[str, str]):
    """Run ``snakemake ARGS...`` as a real process in ``cwd``; returns a CliResult."""

    def run(*args: str, cwd: Path, timeout: float = 240, env=None):
        return run_snakemake(*args, cwd=cwd, env=env or snakemake_env, timeout=timeout)

    return run
