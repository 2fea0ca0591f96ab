"""Every socket authenticates, on the test SLURM cluster: a pilot run and an elastic run.

As in ``tests/security/test_sockets.py`` (whose attack this reuses), a task is held open
on a file; every socket that the run's processes listen on, on the submit host and on the
nodes (the test cluster's nodes share this host's network), is attacked by the second
account: Dask ``Client`` and RPC over ``tcp://`` and ``tls://`` with its own certificate,
``curl`` over http and https. Nothing connects, the canary (on the shared volume, where a
function run on a node would write it) never appears, and the only HTTP answer is
``/health``'s ``ok``, from a server bound to ``127.0.0.1``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from tests.security.conftest import Account, other_account  # noqa: F401  (the fixture)
from tests.security.test_sockets import HeldRun, process_tree

pytestmark = pytest.mark.slurm


def _run_processes(folder: Path) -> Callable[[int], set[int]]:
    """The run's processes: the CLI's tree, and every process (ranks, worker jobs, their
    tasks and children) working in the workflow's folder, wherever SLURM started it."""

    def pids_of(cli_pid: int) -> set[int]:
        pids = process_tree(cli_pid)
        for proc in psutil.process_iter(["pid"]):
            try:
                if Path(proc.cwd()).is_relative_to(folder):
                    pids |= {proc.pid} | {c.pid for c in proc.children(recursive=True)}
            except (psutil.Error, OSError):
                continue
        return pids

    return pids_of


def _held_workflow(run: HeldRun) -> None:
    (run.folder / "workflow.yaml").write_text(
        "name: held\ntasks:\n  - name: hold\n"
        f"    command: {json.dumps(run.shell('{outputs}'))}\n    outputs: [held.txt]\n"
    )


#: Each mode's extra arguments and environment. Pilot: scheduler and worker ranks, a
#: comm port and an HTTP server each. Elastic: the scheduler in the CLI's process, a
#: worker job's nanny and worker.
MODES = {
    "pilot": ([], {}),
    "elastic": (["--mode", "elastic"], {"HPCFLOW_MIN_WORKERS": "1", "HPCFLOW_MAX_WORKERS": "1"}),
}


@pytest.mark.parametrize("mode", list(MODES))
def test_a_cluster_run_takes_no_ones_code(
    mode: str,
    other_account: Account,  # noqa: F811
    tmp_path: Path,
    slurm_env: dict[str, str],
) -> None:
    args, extra_env = MODES[mode]
    run = HeldRun(tmp_path)
    _held_workflow(run)
    cli = [sys.executable, "-m", "hpcflow.cli.main", "run", "workflow.yaml", "-q"]
    run.attack(
        other_account, [*cli, "--profile", "slurm-test", *args], {**slurm_env, **extra_env},
        _run_processes(run.folder), minimum=4, loopback_only=False,
    )  # fmt: skip
