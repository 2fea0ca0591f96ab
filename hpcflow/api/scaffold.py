"""Writing a new workflow file (and a site profile) that is known to load: each text is
loaded back as a file of its kind before either is put in place (``hpcflow init``)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hpcflow.settings import resolve_profile
from hpcflow.spec.loader import load_workflow
from hpcflow.store.atomic import write_text_atomic


def write_checked(
    workflow_file: Path, workflow_text: str, profile_file: Path | None, profile_text: str | None
) -> None:
    """Validate both texts as files of their kind, then put them in place (mode 0644).

    Raises :class:`~hpcflow.errors.SpecError` (with ``file:line``) or
    :class:`~hpcflow.errors.ProfileError` when a text does not load; then neither file
    is written.
    """
    with tempfile.TemporaryDirectory() as scratch:
        trial = Path(scratch) / "workflow.yaml"
        trial.write_text(workflow_text, encoding="utf-8")
        load_workflow(trial)  # raises SpecError with file:line if a value broke it
        if profile_file and profile_text is not None:
            trial_profile = Path(scratch) / profile_file.name
            trial_profile.write_text(profile_text, encoding="utf-8")
            resolve_profile(str(trial_profile), environ={})
    write_text_atomic(workflow_file, workflow_text, mode=0o644)
    if profile_file and profile_text is not None:
        write_text_atomic(profile_file, profile_text, mode=0o644)
