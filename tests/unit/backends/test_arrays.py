"""Job arrays (jobs mode): index ranges, element ids in each batch system's spelling, the
element's own identity from its environment, and element states from real outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcflow.backends._commands import CommandResult, CommandRunner
from hpcflow.backends.arrays import (
    array_range,
    element_index,
    element_label,
    element_native_id,
    split_element_id,
)
from hpcflow.backends.base import AllocationState
from hpcflow.backends.pbs import PbsBackend
from hpcflow.backends.pbs.backend import parse_qstat_full, parse_qstat_json
from hpcflow.backends.slurm import SlurmBackend
from hpcflow.backends.slurm.backend import parse_squeue
from hpcflow.errors import SubmitError

SAMPLES = Path(__file__).resolve().parent / "samples"


def refused(backend_class: type[SlurmBackend | PbsBackend], stderr: str) -> SubmitError:
    """What ``backend_class`` makes of a submission refused with ``stderr``."""
    program = "sbatch" if backend_class is SlurmBackend else "qsub"
    result = CommandResult((program,), 1, "", stderr, 0.0)
    return backend_class(CommandRunner()).classify_submit_error(result)


@pytest.mark.parametrize(
    ("size", "cap", "text"),
    [(2, None, "0-1"), (200, 8, "0-199%8"), (5, 5, "0-4"), (5, 9, "0-4"), (1000, 1, "0-999%1")],
)
def test_array_range(size, cap, text):
    assert array_range(size, cap) == text


def test_an_array_has_two_elements_at_least():
    with pytest.raises(ValueError, match="at least 2"):
        array_range(1)


@pytest.mark.parametrize(
    ("native_id", "parts"),
    [
        ("123_4", ("123", 4)),  # SLURM, as squeue -o %i and sacct print it
        ("123[4].server", ("123[].server", 4)),  # PBS Pro / Torque subjob
        ("123[17].pbs.example.org", ("123[].pbs.example.org", 17)),
        ("123[4]", ("123[]", 4)),
        ("123", None),  # a plain job (or the wrappers' element job ids)
        ("123[].server", None),  # the array itself
        ("123_[2-3%2]", None),  # SLURM's pending rest of an array
        ("abc_1", None),
    ],
)
def test_split_element_id(native_id, parts):
    assert split_element_id(native_id) == parts


@pytest.mark.parametrize(
    ("environ", "index", "native", "label"),
    [
        # SLURM (and SLURM's PBS wrappers: the job sees only SLURM_* variables).
        (
            {"SLURM_JOB_ID": "158", "SLURM_ARRAY_JOB_ID": "156", "SLURM_ARRAY_TASK_ID": "1"},
            1, "158", "156_1",
        ),
        ({"SLURM_JOB_ID": "42"}, 0, "42", "42"),
        # PBS Pro: PBS_JOBID names the subjob; PBS_ARRAY_INDEX its index.
        ({"PBS_JOBID": "123[4].server", "PBS_ARRAY_INDEX": "4"}, 4, "123[4].server",
         "123[4].server"),
        # Torque: PBS_ARRAYID.
        ({"PBS_JOBID": "77[2].torque", "PBS_ARRAYID": "2"}, 2, "77[2].torque", "77[2].torque"),
        ({}, 0, None, None),
    ],
)  # fmt: skip
def test_element_identity_from_the_environment(environ, index, native, label):
    assert element_index(environ) == index
    assert element_native_id(environ) == native
    assert element_label(environ) == label


def test_slurm_array_elements_are_polled_by_their_own_job_ids():
    """Real squeue output (22.05) for array 156 = elements 0..3 with a cap of 2: the
    running elements have job ids of their own (157, 158); the array's id names the
    pending rest (and, in the end, the last element)."""
    ids = (SAMPLES / "squeue_array_ids.txt").read_text().split()
    assert ids[0:3] == ["156_[2-3%2]", "156", "PENDING"]
    running = parse_squeue((SAMPLES / "squeue_array_running.txt").read_text(), ["157", "156"])
    assert running["157"].state is AllocationState.RUNNING
    assert running["156"].state is AllocationState.QUEUED
    assert "simultaneously running" in (running["156"].reason or "")  # the % cap
    ended = parse_squeue((SAMPLES / "squeue_array_ended.txt").read_text(), ["156", "157", "158"])
    assert ended["158"].state is AllocationState.FAILED and ended["158"].exit_code == 3
    assert ended["157"].state is AllocationState.COMPLETED
    assert ended["156"].state is AllocationState.COMPLETED


def test_pbs_pro_subjobs_are_matched_by_their_ids():
    text = (SAMPLES / "pbs" / "qstat_pro_array.json").read_text()
    wanted = ["123[].pbs", "123[0].pbs", "123[1].pbs", "123[2].pbs", "123[3].pbs"]
    statuses = parse_qstat_json(text, wanted)
    assert statuses["123[].pbs"].state is AllocationState.RUNNING  # B: begun
    assert statuses["123[0].pbs"].state is AllocationState.COMPLETED
    assert statuses["123[1].pbs"].state is AllocationState.FAILED
    assert statuses["123[1].pbs"].exit_code == 3
    assert statuses["123[2].pbs"].state is AllocationState.RUNNING
    assert statuses["123[3].pbs"].state is AllocationState.QUEUED
    assert "ncpus" in (statuses["123[3].pbs"].reason or "")
    # Asked with the short server name, answered with the long one: still matched.
    again = parse_qstat_json(text.replace(".pbs", ".pbs.example.org"), ["123[1].pbs"])
    assert again["123[1].pbs"].exit_code == 3


def test_torque_wrapper_elements_are_plain_jobs():
    """Through SLURM's qsub/qstat wrappers an element is a plain job id (its SLURM job
    id, which the job sees as SLURM_JOB_ID): hpcflow polls it as such."""
    text = (SAMPLES / "pbs" / "qstat_array_elements.txt").read_text()
    statuses = parse_qstat_full(text, ["160", "161"])
    assert {k: s.state for k, s in statuses.items()} == {
        "160": AllocationState.RUNNING,
        "161": AllocationState.RUNNING,
    }


@pytest.mark.parametrize(
    "stderr",
    [
        "sbatch: error: QOSMaxSubmitJobPerUserLimit\nsbatch: error: Batch job submission "
        "failed: Job violates accounting/QOS policy (job submit limit, user's size and/or "
        "time limits)",
        "sbatch: error: AssocMaxSubmitJobLimit\nsbatch: error: Batch job submission failed: "
        "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)",
    ],
)
def test_submit_limits_are_a_class_of_their_own(stderr):
    """A queue limit means "wait" in jobs mode; pilot mode still fails at once."""
    error = refused(SlurmBackend, stderr)
    assert error.limit and not error.transient
    assert "qos" in (error.hint or "")


def test_other_refusals_are_not_limits():
    error = refused(
        SlurmBackend, "sbatch: error: Batch job submission failed: Invalid partition name specified"
    )
    assert not error.limit and not error.transient


def test_pbs_queue_limits_are_limits():
    for text in (
        "qsub: Maximum number of jobs already in queue for user",
        "qsub: would exceed queue generic's per-user limit of jobs in 'Q' state",
    ):
        error = refused(PbsBackend, text)
        assert error.limit, text


def test_pbs_dependency_spelling_per_flavor():
    from hpcflow.backends.pbs.backend import depend_value

    ids = ["101.srv", "102[].srv", "103[].srv"]
    assert depend_value(ids, "pro") == "afterok:101.srv:102[].srv:103[].srv"
    assert depend_value(ids, "torque") == "afterok:101.srv,afterokarray:102[].srv:103[].srv"
    # SLURM's wrappers print bare ids (arrays too): plain afterok, which sbatch reads.
    assert depend_value(["7", "8"], "torque") == "afterok:7:8"
