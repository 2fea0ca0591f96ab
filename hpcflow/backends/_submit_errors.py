"""Sorting a failed submission into transient (retry may help) or permanent (fix the
profile), the same way for every batch system; backends bring their own pattern tables."""

from __future__ import annotations

from collections.abc import Sequence

from hpcflow.errors import SubmitError


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
