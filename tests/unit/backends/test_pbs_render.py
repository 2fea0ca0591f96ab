"""The PBS batch scripts (PBS Pro and Torque): what only PBS's do (the checks shared by
every backend, golden files included, are in test_batch_backends.py): resource lines per
flavor, oversubscription, and the checks on every value that reaches a #PBS line or qsub."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from hpcflow.backends._commands import CommandRunner
from hpcflow.backends.pbs import PbsBackend
from hpcflow.backends.pbs.backend import (
    MAX_JOB_NAME,
    cpus_per_node,
    directive_value,
    job_name,
    needs_oversubscribe,
    qsub_path,
    ranks_per_node,
    validate_extra_directive,
)
from hpcflow.backends.registry import get_backend
from hpcflow.errors import ProfileError, RunError
from hpcflow.settings.profile import Profile
from tests.conftest import HOSTILE_VALUES
from tests.unit.backends.cases import PBS_REQUESTS, request

FLAVORS = ("pro", "torque")


@pytest.fixture(scope="module", params=FLAVORS)
def backend(request) -> PbsBackend:
    return PbsBackend(CommandRunner(), flavor=request.param)


def test_resource_lines_per_flavor():
    req = PBS_REQUESTS["multinode_gpu"]
    pro = PbsBackend(CommandRunner(), flavor="pro").render(req)
    assert "#PBS -l select=4:ncpus=24:mpiprocs=3:ngpus=2:mem=16384mb\n" in pro
    assert "#PBS -l place=scatter\n" in pro
    assert "#PBS -l walltime=51:04:05\n" in pro
    torque = PbsBackend(CommandRunner(), flavor="torque").render(req)
    assert "#PBS -l nodes=4:ppn=24:gpus=2\n" in torque
    assert "#PBS -l mem=65536mb\n" in torque  # Torque's mem is the whole job's
    assert "place=" not in torque and "select=" not in torque
    for script in (pro, torque):
        assert "#PBS -N train_sweep\n#PBS -o " in script
        assert "#PBS -q gpu\n" in script and "#PBS -A proj-42\n" in script
        assert "#PBS -m abe\n#PBS -W group_list=hpc\n" in script


def test_overcommit_lets_mpirun_oversubscribe_only_where_slots_are_short():
    req = PBS_REQUESTS["overcommit_short"]
    pro = PbsBackend(CommandRunner(), flavor="pro").render(req)
    assert "#PBS -l select=1:ncpus=2:mpiprocs=3\n" in pro  # 3 slots listed: enough
    assert "oversubscribe" not in pro
    torque = PbsBackend(CommandRunner(), flavor="torque").render(req)
    assert "#PBS -l nodes=1:ppn=2\n" in torque  # 2 slots for 3 ranks
    assert "\nexport OMPI_MCA_rmaps_base_oversubscribe=1\n" in torque
    # Three nodes of 2 slots hold the 5 ranks of a 3-worker pilot: nothing to allow.
    spread = replace(req, nodes=3, ntasks=5)
    assert not needs_oversubscribe(spread, "torque")
    assert not needs_oversubscribe(replace(req, overcommit=False), "torque")


def test_shape_arithmetic():
    req = request(nodes=3, ntasks=7, cpus_per_task=4)
    assert ranks_per_node(req) == 3
    assert cpus_per_node(req) == 12
    assert cpus_per_node(replace(req, overcommit=True)) == 4


def test_paths_that_qsub_cannot_carry_are_refused(backend, tmp_path):
    unsafe = [v for v in HOSTILE_VALUES if not re.fullmatch(r"[\w./-]+", v)]
    assert len(unsafe) >= 8
    for value in [*unsafe, "host:path", "50%", "a\\b", "~user"]:
        bad = Path("/scratch") / value.replace("/", "_") / "out.log"
        with pytest.raises(RunError, match="PBS cannot be given the path") as info:
            backend.render(request(stdout=bad))
        assert "letters, digits" in info.value.hint
        with pytest.raises(RunError):
            qsub_path(bad)
    # submit refuses before running anything (the runner would count a call).
    runner = CommandRunner()
    pbs = PbsBackend(runner, flavor=backend.flavor)
    with pytest.raises(RunError):
        pbs.submit(tmp_path / "a b.sh", request())
    assert sum(runner.calls.values()) == 0
    assert qsub_path("/scratch/a-b_c.d/x+y,z@w=1/out.log") == "/scratch/a-b_c.d/x+y,z@w=1/out.log"


def test_queue_and_account_must_be_plain(backend):
    assert directive_value("workq@pbs01", "partition") == "workq@pbs01"
    for bad in ("a b", "debug\n#PBS -A other", "x;y", "'q'", "$(x)"):
        with pytest.raises(ProfileError, match="partition"):
            backend.render(request(partition=bad))
        with pytest.raises(ProfileError, match="account"):
            backend.render(request(account=bad))


def test_slurm_only_settings_are_refused(backend):
    with pytest.raises(ProfileError, match="qos") as info:
        backend.render(request(qos="high"))
    assert "partition" in info.value.hint
    with pytest.raises(ProfileError, match="constraint") as info:
        backend.render(request(constraint="a100"))
    assert "-l feature=value" in info.value.hint


def test_an_extra_directive_is_one_pbs_option():
    assert validate_extra_directive("-j oe") == "-j oe"


def test_an_extra_place_replaces_scatter():
    pro = PbsBackend(CommandRunner(), flavor="pro")
    script = pro.render(request(nodes=2, ntasks=4, extra_directives=["-l place=scatter:excl"]))
    assert script.count("place=") == 1 and "#PBS -l place=scatter:excl\n" in script


def test_job_names_start_with_a_letter_and_fit():
    assert job_name("20261129-run") == "j20261129-run"  # PBS wants a leading letter
    assert len(job_name("x" * 500)) == MAX_JOB_NAME


def test_registry_picks_the_flavor_from_the_profile():
    assert get_backend("pbs").flavor == "pro"  # type: ignore[attr-defined]
    torque = Profile(name="t", backend="pbs", pbs_flavor="torque")
    backend = get_backend("pbs", profile=torque)
    assert backend.name == "pbs" and backend.flavor == "torque"  # type: ignore[attr-defined]
    assert Profile(name="p", backend="pbs").pbs_flavor == "pro"
    with pytest.raises(ValueError):
        Profile(name="x", pbs_flavor="sge")
    with pytest.raises(ProfileError, match="flavor"):
        PbsBackend(CommandRunner(), flavor="sge")  # type: ignore[arg-type]
