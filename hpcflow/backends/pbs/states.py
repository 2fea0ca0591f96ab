"""PBS's vocabulary as tables: job-state letters → our states, exit statuses → sentences.

PBS Pro / OpenPBS and Torque share the one-letter ``job_state`` alphabet (Torque ends
jobs in ``C``, PBS Pro in ``F``) but neither letter says whether the job succeeded: that
is in ``Exit_status`` (PBS Pro) / ``exit_status`` (Torque), when the server reports it.
Both write negative exit statuses for failures of the batch system itself, numbered
differently (PBS Pro: ``src/include/job.h`` ``JOB_EXEC_*``; Torque: the admin guide's
"Job exit status" page).

Pure data plus small pure functions; no commands are run here.
"""

from __future__ import annotations

from typing import Literal

from hpcflow.backends.base import AllocationState

Flavor = Literal["pro", "torque"]

_Q = AllocationState.QUEUED
_R = AllocationState.RUNNING

#: job_state letters of jobs that have not ended → our state. The letters that mean
#: "ended" (:data:`FINAL_LETTERS`) are decided by the exit status instead.
STATE_MAP: dict[str, AllocationState] = {
    "Q": _Q,  # queued, eligible to run or to be routed
    "H": _Q,  # held (user, operator, system or dependency hold)
    "W": _Q,  # waiting for its requested start time (PBS Pro: or a failed stage-in)
    "T": _Q,  # in transit to a new location
    "M": _Q,  # PBS Pro: moved to another server (it may still run there)
    "R": _R,
    "E": _R,  # exiting: the script ended; the server is still cleaning up
    "B": _R,  # PBS Pro job arrays: at least one subjob has started
    "S": _R,  # suspended: holds its nodes, processes stopped until resumed
    "U": _R,  # PBS Pro: suspended because its workstation became busy
}

#: Letters of jobs that ended: Torque's C(ompleted), PBS Pro's F(inished) and X
#: (an expired subjob).
FINAL_LETTERS = frozenset({"C", "F", "X"})

#: Why a job waits, by letter, when the scheduler gave no comment.
WAITING_REASONS: dict[str, str] = {
    "H": "Held; release it with 'qrls ID' (or wait for the jobs it depends on).",
    "W": "Waiting for its requested start time (or for a failed file stage-in to be retried).",
    "T": "Being moved to another queue or server.",
    "M": "Moved to another PBS server.",
}

#: PBS Pro / OpenPBS negative exit statuses (JOB_EXEC_* in src/include/job.h).
PRO_EXEC_CODES: dict[int, str] = {
    -1: "The job could not be started (before its files were set up); not retried.",
    -2: "The job could not be started (after its files were set up); not retried.",
    -3: "The job could not be started; PBS retries it.",
    -4: "The job was aborted while its execution host (MoM) initialised it.",
    -5: "The job was aborted while its execution host initialised it (checkpointed, not migrated).",
    -6: "The job was aborted while its execution host initialised it (checkpointed, migrated).",
    -7: "Restarting the job from a checkpoint failed.",
    -10: "The job's user or group id is invalid on the execution host.",
    -11: "The job was requeued to be run again.",
    -12: "The job was checkpointed and killed.",
    -13: "The job failed because of a bad password.",
    -14: "A sister execution host failed; the job was requeued or deleted.",
    -15: "The job was requeued to restart from a checkpoint.",
    -16: "A hook rejected the job; it was requeued.",
    -17: "A hook rejected the job; it was deleted.",
    -18: "A hook asked for the job to be requeued.",
    -19: "A hook asked for the job to be deleted.",
    -20: "The server lost contact with the job's primary execution host; it was requeued.",
    -21: "PBS found a security problem in its own directories and did not run the job.",
    -22: "A hook failed or timed out; the job did not run.",
    -23: "No Kerberos credentials were supplied.",
    -24: "It used more CPUs than requested (ncpus, burst) and was killed.",
    -25: "It used more CPUs than requested (ncpus, sum) and was killed.",
    -26: "It used more virtual memory than requested (vmem) and was killed.",
    -27: "It used more memory than requested (mem) and was killed.",
    -28: "It used more CPU time than requested (cput) and was killed.",
    -29: "It reached its walltime limit and was killed.",
    -30: "Joining the job's execution hosts failed.",
}

#: Torque negative exit statuses (admin guide, "Job exit status").
TORQUE_EXEC_CODES: dict[int, str] = {
    -1: "The job could not be started (before its files were set up); not retried.",
    -2: "The job could not be started (after its files were set up); not retried.",
    -3: "The job could not be started; Torque retries it.",
    -4: "The job was aborted while its execution host (MoM) initialised it.",
    -5: "The job was aborted while its execution host initialised it (checkpointed, not migrated).",
    -6: "The job was aborted while its execution host initialised it (checkpointed, migrated).",
    -7: "Restarting the job from a checkpoint failed.",
    -8: "Starting the job's command (exec) failed.",
    -9: "The job's standard output or error file could not be set up.",
    -10: "It used more memory than requested and was killed.",
    -11: "It reached its walltime limit and was killed.",
    -12: "It used more CPU time than requested and was killed.",
    -13: "Setting up the job's cgroups failed; Torque retries it.",
    -14: "The job's prologue failed; Torque retries it.",
}

#: Negative exit statuses that mean "ran out of walltime".
WALLTIME_CODES: dict[Flavor, int] = {"pro": -29, "torque": -11}

NO_EXIT_STATUS = (
    "It ended, but the batch system does not report how (no exit status; SLURM's "
    "PBS wrappers never do): read the allocation's log files."
)
NON_ZERO = "The batch script exited with a non-zero exit code."


def to_state(letter: str) -> AllocationState:
    """Our state for a job_state letter of a job that has not ended (else UNKNOWN)."""
    return STATE_MAP.get(letter.strip().upper(), AllocationState.UNKNOWN)


def is_final(letter: str) -> bool:
    return letter.strip().upper() in FINAL_LETTERS


def final_outcome(
    exit_status: int | None, flavor: Flavor
) -> tuple[AllocationState, int | None, str | None]:
    """(state, exit code, reason) of an ended job from its raw exit status.

    ``0`` → completed. ``1``-``255`` → failed with that code (a shell reports death by
    signal N as 128 + N). Above 256 PBS and Torque report death by signal N as
    256 + N; it is given, like a shell would, as 128 + N. Negative → the batch system's
    own failure, explained from the flavor's table (walltime → timeout). Unknown (None)
    → completed, with a reason saying that success could not be checked.
    """
    if exit_status is None:
        return AllocationState.COMPLETED, None, NO_EXIT_STATUS
    if exit_status == 0:
        return AllocationState.COMPLETED, 0, None
    if exit_status < 0:
        table = PRO_EXEC_CODES if flavor == "pro" else TORQUE_EXEC_CODES
        reason = table.get(
            exit_status,
            f"The batch system could not run the job (exit status {exit_status}).",
        )
        if exit_status == WALLTIME_CODES[flavor]:
            return AllocationState.TIMEOUT, exit_status, reason
        return AllocationState.FAILED, exit_status, reason
    if exit_status > 256:
        signal_number = exit_status - 256
        reason = (
            f"The batch script was killed by signal {signal_number} (by qdel, a resource "
            "limit or a node problem)."
        )
        return AllocationState.FAILED, 128 + signal_number, reason
    if exit_status > 128:
        return (
            AllocationState.FAILED,
            exit_status,
            (
                f"{NON_ZERO} ({exit_status} = 128 + {exit_status - 128}: killed by signal "
                f"{exit_status - 128}?)"
            ),
        )
    return AllocationState.FAILED, exit_status, NON_ZERO


def describe_waiting(letter: str, comment: str | None) -> str | None:
    """Why a job that has not started waits: the scheduler's comment, else the letter's
    sentence; None for jobs that are not waiting (or no reason is known)."""
    if comment:
        return comment.strip() or None
    return WAITING_REASONS.get(letter.strip().upper())
