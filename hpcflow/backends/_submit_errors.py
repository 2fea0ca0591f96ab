"""Sorting a failed submission into transient (retry may help) or permanent (fix the
profile), the same way for every batch system; backends bring their own pattern tables."""

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
