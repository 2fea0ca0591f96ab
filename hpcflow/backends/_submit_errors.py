"""Sorting a failed submission into transient (retry may help) or permanent (fix the
profile), the same way for every batch system; backends bring their own pattern tables.

The tables here are the ones that reach more than one backend: queue limits, and
sbatch's own messages, which SLURM prints and so do the PBS commands that are SLURM's
wrappers around sbatch (:mod:`hpcflow.backends.pbs.slurm_wrapper`).
"""

from __future__ import annotations

from collections.abc import Sequence

from hpcflow.errors import SubmitError

#: Refusals because a limit on queued or submitted jobs was reached (SLURM's QOS and
#: association limits, PBS queue limits). Waiting for jobs to finish lifts them.
LIMIT_ERRORS = (
    "QOSMaxSubmitJobPerUserLimit",
    "QOSMaxSubmitJobPerAccountLimit",
    "AssocMaxSubmitJobLimit",
    "MaxSubmitJobs",
    "job submit limit",
    "Maximum number of jobs already in queue",
    "would exceed queue",
    "would exceed complex",
    "per-user limit",
)

#: sbatch errors worth retrying: the controller was busy or unreachable.
SBATCH_TRANSIENT_ERRORS = (
    "Socket timed out",
    "Unable to contact slurm controller",
    "Resource temporarily unavailable",
    "Connection refused",
    "Connection timed out",
    "Zero Bytes were transmitted or received",
    "Communication connection failure",
    "Slurm temporarily unable to accept job",
    "slurm_persist_conn_open",
)

#: sbatch errors that a retry cannot fix → the profile setting that can.
SBATCH_PERMANENT_ERRORS: tuple[tuple[str, str], ...] = (
    ("Invalid partition name specified", "partition"),
    ("invalid partition specified", "partition"),
    ("Invalid account", "account"),
    ("Invalid qos", "qos"),
    ("Job violates accounting/QOS policy", "account / qos (limits)"),
    ("Invalid feature specification", "constraint"),
    ("Memory specification can not be satisfied", "memory_per_node"),
    ("Invalid generic resource (gres) specification", "gpus_per_node"),
    ("Requested time limit is invalid", "walltime"),
    ("Node count specification invalid", "nodes"),
    ("More processors requested than permitted", "ntasks / cpus_per_task"),
    (
        "Requested node configuration is not available",
        "resources (nodes, ntasks, cpus_per_task, gpus_per_node, memory_per_node, constraint)",
    ),
    ("Invalid directive", "extra_directives"),
    ("unrecognized option", "extra_directives"),
    ("Access/permission denied", "account / partition"),
)

#: What sbatch writes before each of its messages, longest first.
SBATCH_PREFIXES = ("sbatch: error:", "sbatch:")


def without_prefix(line: str, prefixes: Sequence[str], chars: str | None = None) -> str:
    """``line`` without the first of ``prefixes`` it starts with, then stripped of
    ``chars`` (blanks by default); ``line`` as it is when it starts with none."""
    for prefix in prefixes:
        if line.startswith(prefix):
            return line[len(prefix) :].strip(chars)
    return line


def classify_submit_failure(
    program: str,
    message: str,
    output: str,
    transient: Sequence[str],
    permanent: Sequence[tuple[str, str]],
    busy_hint: str,
) -> SubmitError:
    """A SubmitError for ``program``'s failure; ``output`` is searched for the patterns.

    A permanent error's hint names the profile setting that fixes it; an unknown error is
    treated as permanent, so a bad request fails fast instead of being retried.
    """
    folded = output.lower()
    if any(pattern.lower() in folded for pattern in transient):
        return SubmitError(f"{program} failed: {message}", transient=True, hint=busy_hint)
    if any(pattern.lower() in folded for pattern in LIMIT_ERRORS):
        # Not transient for a single submission (pilot mode fails at once, as before);
        # jobs mode reads ``limit`` and waits for its queued jobs to finish.
        return SubmitError(
            f"{program} refused the job: a queue limit was reached: {message}",
            transient=False,
            limit=True,
            hint="too many jobs queued or submitted: wait for some to finish, lower the "
            "profile's max_queued_jobs, or check its account / qos (limits) setting",
        )
    for pattern, setting in permanent:
        if pattern.lower() in folded:
            return SubmitError(
                f"{program} rejected the allocation: {message}",
                transient=False,
                hint=f"check the profile's {setting} setting",
            )
    return SubmitError(
        f"{program} failed: {message}",
        transient=False,
        hint=f"read {program}'s message above; 'hpcflow render' shows the script it was given",
    )
