"""Pure parts of the in-allocation bootstrap: rank detection, roles, preflight, rendezvous."""

from __future__ import annotations

import json
import threading
import time

import pytest

from hpcflow.bootstrap.config import PilotConfig
from hpcflow.bootstrap.preflight import PreflightError, check_run_dir, check_world
from hpcflow.bootstrap.rendezvous import publish, receive
from hpcflow.bootstrap.roles import Role, gpu_rotation, role_for, worker_count
from hpcflow.errors import ProfileError
from hpcflow.launchers import bootstrap_argv, environment, task_prefix


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"SLURM_PROCID": "3", "SLURM_NTASKS": "6", "SLURM_LOCALID": "1"}, (3, 6, 1)),
        (
            {
                "OMPI_COMM_WORLD_RANK": "2",
                "OMPI_COMM_WORLD_SIZE": "4",
                "OMPI_COMM_WORLD_LOCAL_RANK": "0",
            },
            (2, 4, 0),
        ),
        ({"PMI_RANK": "5", "PMI_SIZE": "8"}, (5, 8, 0)),
        # Open MPI's variables win over SLURM's when both are present (mpirun inside sbatch).
        (
            {
                "OMPI_COMM_WORLD_RANK": "1",
                "OMPI_COMM_WORLD_SIZE": "3",
                "SLURM_PROCID": "0",
                "SLURM_NTASKS": "1",
            },
            (1, 3, 0),
        ),
    ],
)
def test_rank_from_launcher_variables(env, expected):
    info = environment.from_environment(env)
    assert info is not None
    assert (info.rank, info.size, info.local_rank) == expected


def test_no_launcher_variables_means_unknown():
    assert environment.from_environment({"HOME": "/root"}) is None
    assert environment.from_environment({"SLURM_PROCID": "x", "SLURM_NTASKS": "2"}) is None


def test_roles_are_a_pure_function_of_rank():
    assert [role_for(r) for r in range(5)] == [
        Role.SCHEDULER,
        Role.DRIVER,
        Role.WORKER,
        Role.WORKER,
        Role.WORKER,
    ]
    assert worker_count(3) == 1 and worker_count(2) == 0


def test_gpu_rotation_puts_own_gpu_first_and_keeps_peers():
    assert gpu_rotation(["0", "1", "2", "3"], 0) == ["0", "1", "2", "3"]
    assert gpu_rotation(["0", "1", "2", "3"], 2) == ["2", "3", "0", "1"]
    assert gpu_rotation(["0", "1"], 3) == ["1", "0"]
    assert gpu_rotation([], 1) == []


def test_preflight_world_too_small_says_the_fix():
    with pytest.raises(PreflightError) as err:
        check_world(2)
    assert "needs at least 3" in str(err.value) and "--ntasks" in str(err.value)
    check_world(3)


def test_preflight_run_dir(tmp_path):
    with pytest.raises(PreflightError, match="not an hpcflow run directory"):
        check_run_dir(tmp_path)
    (tmp_path / "run.json").write_text("{}")
    check_run_dir(tmp_path)
    tmp_path.chmod(0o500)
    try:
        import os

        if os.geteuid() != 0:  # root writes anyway
            with pytest.raises(PreflightError, match="not writable"):
                check_run_dir(tmp_path)
    finally:
        tmp_path.chmod(0o700)


def test_file_rendezvous_ignores_a_stale_address(tmp_path):
    path = tmp_path / "scheduler.json"
    path.write_text(json.dumps({"address": "tcp://old:1", "allocation": "41"}))
    got: list[str] = []
    reader = threading.Thread(
        target=lambda: got.append(receive(comm=None, path=path, allocation="42", timeout=10))
    )
    reader.start()
    time.sleep(0.3)
    publish("tcp://new:2", comm=None, path=path, allocation="42")
    reader.join(timeout=10)
    assert got == ["tcp://new:2"]
    with pytest.raises(PreflightError, match="no scheduler address"):
        receive(comm=None, path=path, allocation="43", timeout=0.3)


def test_pilot_config_round_trip(tmp_path):
    config = PilotConfig(
        workers_expected=4, threads_per_worker=2, gpus_per_worker=1, base_dir="/x", env={"A": "b"}
    )
    config.write(tmp_path / "pilot.json")
    assert PilotConfig.read(tmp_path / "pilot.json") == config
    assert config.slots == 8


def test_launcher_argv():
    argv = bootstrap_argv("srun", "/py", "/run dir", 5, mpi="pmix")
    assert argv[:4] == ["srun", "--mpi=pmix", "--ntasks=5", "--kill-on-bad-exit=0"]
    assert argv[-4:] == ["/py", "-m", "hpcflow.bootstrap", "/run dir"]
    assert bootstrap_argv("mpirun", "/py", "/r", 3)[:3] == ["mpirun", "-n", "3"]
    assert bootstrap_argv("single", "/py", "/r", 3) == ["/py", "-m", "hpcflow.bootstrap", "/r"]
    with pytest.raises(ProfileError):
        bootstrap_argv("aprun", "/py", "/r", 3)
    prefix = task_prefix("srun", 4, 2)
    assert "--overlap" in prefix and "--ntasks=4" in prefix and "--nodes=2" in prefix
    assert task_prefix("mpirun", 4, 2)[:3] == ["mpirun", "-n", "4"]
    assert task_prefix("single", 4, None) == []


def test_transport_preflight():
    from hpcflow.bootstrap.preflight import check_transport

    check_transport("tcp")
    check_transport("tls")
    try:
        import distributed_ucxx  # noqa: F401
    except ImportError:
        with pytest.raises(PreflightError, match="distributed-ucxx") as err:
            check_transport("ucx")
        assert "hpcflow[ucx]" in str(err.value)
    else:
        check_transport("ucx")  # installed here: the check lets it through


def test_transport_preflight_asks_the_ranks_interpreter(tmp_path):
    """UCX lives in its own venv: the check runs the profile's `python:`, not ours."""
    import sys

    from hpcflow.bootstrap.preflight import check_transport
    from tests.integration.slurm.test_transports import _ucx_python
    from tests.strict_skips import strict

    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(PreflightError, match=r"the ranks' Python \(") as err:
        check_transport("ucx", python=str(fake))
    assert "python:" in err.value.hint
    # A path that does not exist here (only on the nodes) is left to the ranks.
    check_transport("ucx", python=str(tmp_path / "on-the-nodes-only" / "python"))
    # An interpreter without distributed-ucxx is refused, one with it passes (the UCX venv
    # that scripts/test.sh builds; required where skips are failures).
    if not _has_ucxx(sys.executable):
        with pytest.raises(PreflightError, match="distributed-ucxx"):
            check_transport("ucx", python=sys.executable)
    ucx = _ucx_python()
    if ucx is None:
        assert not strict(), "no .venv-ucx: scripts/test.sh builds it (distributed-ucxx-cu12)"
    else:
        assert _has_ucxx(str(ucx))
        check_transport("ucx", python=str(ucx))
    assert str(fake) != sys.executable


def _has_ucxx(python: str) -> bool:
    """Whether ``python`` can import distributed_ucxx (asked of that interpreter)."""
    import subprocess

    probe = [
        python,
        "-c",
        "import importlib.util as u; print(bool(u.find_spec('distributed_ucxx')))",
    ]
    return subprocess.run(probe, capture_output=True, text=True).stdout.strip() == "True"
