"""Fault 3, the pieces that need no cluster: which node is an allocation's first (the one
whose loss ends the run) and what the rendered scripts ask of SLURM and PBS."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcflow.backends._commands import CommandRunner
from hpcflow.backends.base import AllocationRequest
from hpcflow.backends.pbs.backend import PbsBackend
from hpcflow.backends.slurm.backend import SlurmBackend
from hpcflow.modes.pilot_plan import first_node


@pytest.mark.parametrize(
    ("nodes", "first"),
    [
        ("n1", "n1"),
        ("n[1-3]", "n1"),
        ("n[2-3]", "n2"),
        ("n[10]", "n10"),
        ("node[07,09-12]", "node07"),
        ("a1,b[2-3]", "a1"),
        ("gpu-a[003-004]", "gpu-a003"),
    ],
)
def test_first_node_of_a_hostlist(nodes, first):
    assert first_node(nodes) == first


def pilot(nodes: int) -> AllocationRequest:
    run_dir = Path("/scratch/run")
    return AllocationRequest(
        run_id="r1", job_name="hpcflow-r1", run_dir=run_dir, stdout=run_dir / "1.out",
        stderr=run_dir / "1.err", command=["srun", "python"], nodes=nodes, ntasks=nodes + 2,
    )  # fmt: skip


def test_slurm_pilot_survives_a_node_and_is_never_requeued():
    backend = SlurmBackend(CommandRunner())
    one = [line for line, _ in backend.directives(pilot(1))]
    many = [line for line, _ in backend.directives(pilot(3))]
    assert "--no-requeue" in one and "--no-kill" not in one  # one node: nothing to survive
    assert "--no-requeue" in many and "--no-kill" in many


def test_pbs_pilot_is_not_rerunnable():
    for flavor in ("pro", "torque"):
        lines = [
            line for line, _ in PbsBackend(CommandRunner(), flavor=flavor).directives(pilot(2))
        ]
        assert "-r n" in lines, (flavor, lines)


def test_slurm_extra_no_kill_is_refused_with_a_plain_hint():
    from hpcflow.errors import ProfileError

    request = pilot(3)
    request = type(request)(**{**request.__dict__, "extra_directives": ("--no-kill",)})
    with pytest.raises(ProfileError) as caught:
        SlurmBackend(CommandRunner()).directives(request)
    assert "hpcflow sets it" in (caught.value.hint or "")
