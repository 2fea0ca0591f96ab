"""Fixtures for the tests that run against a real, private SLURM cluster.

``slurm_cluster`` (session scope) starts the cluster once (4 nodes n1..n4 x 2
CPUs x 2 fake GPUs, partitions ``debug`` and ``gpu``, a GlusterFS volume at
``slurm_cluster.shared``; about 2 to 4 s) and stops it at the end of the session.
Use ``slurm_cluster.env`` as the environment of client commands (it sets
``SLURM_CONF``), or ``slurm_cluster.run([...])``.

The nodes are separate hosts: their own hostnames, PID namespaces and /tmp. So a test
marked ``slurm`` gets its ``tmp_path`` on the shared volume (a fresh folder under
``slurm_cluster.shared``): its run directories, workflow folders and job output are
seen by the nodes, each through its own GlusterFS client. Other clusters a test starts
with ``start_test_cluster`` mount the same volume (see ``set_shared_volume``).
``HPCFLOW_HOME`` (``env``) stays on the submit side, in pytest's own temporary folder.

Without root or without SLURM installed the tests are skipped, unless
``CI=true`` or ``HPCFLOW_REQUIRE_SLURM=1``: then they fail.
"""

import os
import re
import subprocess
from pathlib import Path

import pytest

try:
    from tests.slurm_cluster import set_shared_volume, start_test_cluster
except ImportError:  # repository root not on sys.path (e.g. --import-mode=importlib)
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from tests.slurm_cluster import set_shared_volume, start_test_cluster


@pytest.fixture(scope="session")
def slurm_cluster():
    cluster = start_test_cluster()
    set_shared_volume(cluster)
    try:
        yield cluster
    finally:
        set_shared_volume(None)
        cluster.stop()


def _test_dir_name(request: pytest.FixtureRequest) -> str:
    """The test's name as pytest's own ``tmp_path`` shortens it."""
    return re.sub(r"[\W]", "_", request.node.name)[:30]


@pytest.fixture
def submit_tmp_path(request: pytest.FixtureRequest, tmp_path_factory) -> Path:
    """A fresh folder on the submit side only (pytest's temporary folder, under /tmp:
    the nodes do not see it)."""
    return tmp_path_factory.mktemp(_test_dir_name(request), numbered=True)


@pytest.fixture
def tmp_path(request: pytest.FixtureRequest, tmp_path_factory) -> Path:
    """For a test marked ``slurm``: a fresh folder on the cluster's shared volume, seen
    by every node at the same path. Otherwise pytest's usual one."""
    if request.node.get_closest_marker("slurm") is None:
        return tmp_path_factory.mktemp(_test_dir_name(request), numbered=True)
    cluster = request.getfixturevalue("slurm_cluster")
    return cluster.mkdtemp(prefix=_test_dir_name(request) + "-")


@pytest.fixture
def env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """Environment for CLI runs, as ``tests/conftest.py``'s, but for a ``slurm`` test the
    private HPCFLOW_HOME (the per-user run index) lies on the submit side only."""
    home_parent = tmp_path
    if request.node.get_closest_marker("slurm") is not None:
        home_parent = request.getfixturevalue("submit_tmp_path")
    return {
        **os.environ,
        "HPCFLOW_HOME": str(home_parent / "hpcflow-home"),
        "COLUMNS": "200",
        "NO_COLOR": "1",
        "TERM": "dumb",
    }


@pytest.fixture
def slurm_env(env, slurm_cluster):
    """The CLI's environment (private HPCFLOW_HOME) pointed at the test cluster."""
    return {**env, **slurm_cluster.extra_env}


@pytest.fixture
def hpcflow_slurm(slurm_env):
    """Run ``hpcflow ARGS...`` as a real process against the test cluster."""
    from tests.conftest import CliResult, run_cli

    def run(*args, cwd=None, timeout: float = 180) -> CliResult:
        try:
            return run_cli(args, slurm_env, cwd, timeout)
        except subprocess.TimeoutExpired as exc:
            # Say why: the logs of the run of the workflow named in the arguments.
            workflows = [Path(a) for a in args if str(a).endswith((".yaml", ".yml"))]
            logs = "".join(run_logs(w.parent) for w in workflows if w.is_file())
            raise AssertionError(f"hpcflow {' '.join(map(str, args))} did not end in "
                                 f"{timeout:.0f}s: {exc.output!r}{logs}") from None  # fmt: skip

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


#: The logs that explain a failed cluster run, newest last in each group.
_LOG_PATTERNS = (
    "driver.log",
    "allocations/*.err",
    "allocations/*.out",
    "workers/*.err",
    "jobs/*.err",
    "tasks/*/*.err",
)


def run_logs(folder: Path, per_pattern: int = 6, chars: int = 2000) -> str:
    """The tails of every log of the runs under ``folder`` (a workflow folder, or a run
    directory): driver, allocations, workers, batch jobs and tasks, to put in a failed
    assertion's message. A run that failed in CI leaves nothing else behind."""
    runs = [folder] if (folder / "state.sqlite").exists() else []
    runs += sorted((folder / ".hpcflow" / "runs").glob("*"))
    found = []
    for run_dir in runs:
        for pattern in _LOG_PATTERNS:
            for path in sorted(run_dir.glob(pattern))[-per_pattern:]:
                if path.is_file():
                    text = path.read_text(errors="replace")[-chars:]
                    found.append(f"--- {path}\n{text}")
    return "\n" + "\n".join(found)
