"""SLURM's vocabulary as tables: job states → our states, reason codes → sentences.

Pure data plus three tiny pure functions; no commands are run here.
"""

from __future__ import annotations

from hpcflow.backends.base import AllocationState

_Q = AllocationState.QUEUED
_R = AllocationState.RUNNING

#: SLURM job state (as squeue/sacct print it) → our state.
STATE_MAP: dict[str, AllocationState] = {
    "PENDING": _Q,
    "CONFIGURING": _Q,  # nodes allocated but booting/being set up: not running yet
    "REQUEUED": _Q,
    "REQUEUE_HOLD": _Q,
    "REQUEUE_FED": _Q,
    "RESV_DEL_HOLD": _Q,
    "RUNNING": _R,
    "COMPLETING": _R,  # the script ended; epilogs and step clean-up still run
    "SUSPENDED": _R,  # holds its nodes; processes are stopped until resumed
    "STOPPED": _R,
    "RESIZING": _R,
    "SIGNALING": _R,
    "STAGE_OUT": _R,
    "COMPLETED": AllocationState.COMPLETED,
    "FAILED": AllocationState.FAILED,
    "NODE_FAIL": AllocationState.FAILED,
    "OUT_OF_MEMORY": AllocationState.FAILED,
    "BOOT_FAIL": AllocationState.FAILED,
    "DEADLINE": AllocationState.FAILED,
    "SPECIAL_EXIT": AllocationState.FAILED,
    "CANCELLED": AllocationState.CANCELLED,
    "PREEMPTED": AllocationState.CANCELLED,
    "REVOKED": AllocationState.CANCELLED,  # a federation sibling ran it instead
    "TIMEOUT": AllocationState.TIMEOUT,
}

#: Reason code (squeue %r / sacct Reason) → a plain sentence.
REASONS: dict[str, str] = {
    # Why an allocation waits.
    "Priority": "Waiting for jobs with a higher priority to start first.",
    "Resources": "Waiting for enough free nodes, CPUs, GPUs or memory.",
    "Dependency": "Waiting for the jobs it depends on to finish.",
    "DependencyNeverSatisfied": (
        "Will never start: a job it depends on ended in a way that cannot satisfy the "
        "dependency; cancel it."
    ),
    "BeginTime": "Waiting for its requested start time.",
    "JobHeldUser": "Held by its owner; release it with 'scontrol release ID'.",
    "JobHeldAdmin": "Held by an administrator; ask them to release it.",
    "ReqNodeNotAvail": (
        "Waiting for requested nodes that are down, drained, reserved or otherwise unavailable."
    ),
    "PartitionTimeLimit": (
        "Will not start: its time limit exceeds the partition's maximum; lower the "
        "walltime or choose another partition."
    ),
    "PartitionNodeLimit": (
        "Will not start: it asks for more nodes than the partition allows; lower the "
        "node count or choose another partition."
    ),
    "PartitionConfig": (
        "Will not start as requested: the partition cannot satisfy its node, CPU or "
        "account settings."
    ),
    "PartitionDown": "Waiting for its partition, which is down, to come back up.",
    "PartitionInactive": "Waiting for its partition, which is inactive, to be enabled.",
    "Reservation": "Waiting for its advanced reservation to become usable.",
    "NodeDown": "A node it needs is down.",
    "BadConstraints": "Its constraints (features, GPUs, memory) cannot be satisfied.",
    "Licenses": "Waiting for a license to become free.",
    "QOSMaxJobsPerUserLimit": "Waiting: you already run the most jobs your QOS allows.",
    "QOSMaxSubmitJobPerUserLimit": "Waiting: you already have the most jobs your QOS allows.",
    "QOSMaxCpuPerUserLimit": "Waiting: your running jobs already use your QOS's CPU limit.",
    "QOSMaxGRESPerUser": "Waiting: your running jobs already use your QOS's GPU/GRES limit.",
    "QOSMaxWallDurationPerJobLimit": (
        "Will not start: its time limit exceeds the QOS maximum; lower the walltime or "
        "choose another QOS."
    ),
    "QOSGrpCpuLimit": "Waiting: the QOS's group CPU limit is in use.",
    "QOSGrpNodeLimit": "Waiting: the QOS's group node limit is in use.",
    "QOSJobLimit": "Waiting: the QOS's job limit is reached.",
    "AssocGrpCpuLimit": "Waiting: your account's group CPU limit is in use.",
    "AssocGrpNodeLimit": "Waiting: your account's group node limit is in use.",
    "AssocGrpGRES": "Waiting: your account's group GPU/GRES limit is in use.",
    "AssocGrpCPUMinutesLimit": "Waiting: your account has used up its CPU-minutes.",
    "AssocGrpBillingMinutes": "Waiting: your account has used up its billing allowance.",
    "AssocMaxJobsLimit": "Waiting: your account already runs the most jobs it may.",
    "AssocMaxWallDurationPerJobLimit": (
        "Will not start: its time limit exceeds your account's maximum; lower the walltime."
    ),
    "AssociationJobLimit": "Waiting: your account's job limit is reached.",
    "AssociationResourceLimit": "Waiting: your account's resource limit is reached.",
    "AssociationTimeLimit": "Waiting: your account's time limit is reached.",
    "InvalidAccount": "Will not start: its account is invalid; fix the profile's account.",
    "InvalidQOS": "Will not start: its QOS is invalid; fix the profile's qos.",
    "JobArrayTaskLimit": "Waiting: the array's limit of simultaneously running tasks is reached.",
    "Cleaning": "Waiting while a previous run of it is cleaned up before requeueing.",
    "Prolog": "Its prolog is running.",
    "launch failed requeued held": "Its launch failed; it was requeued and held.",
    # Why an allocation ended.
    "NonZeroExitCode": "The batch script exited with a non-zero exit code.",
    "RaisedSignal": "The batch script was killed by a signal.",
    "TimeLimit": "It reached its time limit.",
    "JobLaunchFailure": "The batch script could not be launched or was killed at once.",
    "OutOfMemory": "It ran out of memory.",
    "NodeFail": "A node it ran on failed.",
    "SystemFailure": "A failure of the batch system ended it.",
}

_NO_REASON = frozenset({"", "None", "(null)"})


def to_state(native_state: str) -> AllocationState:
    """Our state for a SLURM state such as ``RUNNING`` or sacct's ``CANCELLED by 0``."""
    word = native_state.strip().split(" ", 1)[0].rstrip("+").upper()
    return STATE_MAP.get(word, AllocationState.UNKNOWN)


def describe_reason(reason: str | None) -> str | None:
    """A sentence for a reason code; None when there is no reason.

    Details SLURM appends (``ReqNodeNotAvail, UnavailableNodes:n4``) are kept after the
    sentence; an unknown code gets a generic sentence that names it.
    """
    if reason is None:
        return None
    text = reason.strip()
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1].strip()  # squeue's default listing wraps reasons in brackets
    if text in _NO_REASON:
        return None
    if text in REASONS:
        return REASONS[text]
    code, _, detail = (part.strip() for part in text.partition(","))
    if code not in REASONS:
        return f"SLURM reports reason {text!r} (see 'man squeue', JOB REASON CODES)."
    return f"{REASONS[code]} ({detail})" if detail else REASONS[code]


def decode_wait_status(status: int) -> int:
    """Exit code from a raw wait status, as squeue's JSON and ``exit_code`` field give it.

    ``exit 5`` is stored as ``5 << 8 == 1280``; death by signal N is stored as N and is
    reported, like a shell does, as ``128 + N``.
    """
    if status < 0:
        return status
    signal_number = status & 0x7F
    if signal_number == 0:  # exited normally: the code is in the second byte
        return (status >> 8) & 0xFF
    if signal_number == 0x7F:  # stopped, not ended: no exit code to speak of
        return status
    return 128 + signal_number


def decode_exit_pair(text: str) -> int | None:
    """Exit code from sacct/scontrol's ``CODE:SIGNAL`` form (``5:0`` → 5, ``0:9`` → 137)."""
    code, _, sig = text.strip().partition(":")
    try:
        exit_code = int(code)
        signal_number = int(sig) if sig else 0
    except ValueError:
        return None
    if signal_number:
        return 128 + signal_number
    return exit_code
