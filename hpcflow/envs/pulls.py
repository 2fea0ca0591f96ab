"""Registry images (``docker://``, ``oras://``) pulled once per run, before anything runs,
where the run starts: the login node usually reaches a registry when compute nodes do
not. Each reference becomes one ``.sif`` file in the profile's ``container_cache`` (or
the workflow's ``.hpcflow/images``); every task that names it runs that file. A pull
that fails names the reference and the tasks, before any task starts."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from hpcflow.errors import HpcflowError

log = logging.getLogger(__name__)

#: Longest a pull may take before the run gives up on it.
PULL_SECONDS = 3600.0


class PullError(HpcflowError):
    """A registry image that could not be pulled."""


def sif_name(reference: str) -> str:
    """The file a reference is pulled to (its name, then a hash of the whole reference)."""
    tail = reference.rsplit("/", 1)[-1]
    stem = "".join(c if c.isalnum() or c in "._-" else "_" for c in tail)[:60]
    digest = hashlib.sha256(reference.encode()).hexdigest()[:12]
    return f"{stem}-{digest}.sif"


def pull_references(
    references: Mapping[str, tuple[str, list[str]]], folder: Path
) -> dict[str, str]:
    """Pull each reference (``reference -> (command, task names)``) into ``folder`` with
    ``COMMAND pull``; return ``reference -> .sif path``. Raises :class:`PullError` naming
    the reference, its tasks and the runtime's own message."""
    folder.mkdir(parents=True, exist_ok=True)
    pulled: dict[str, str] = {}
    for reference, (command, tasks) in references.items():
        target = folder / sif_name(reference)
        partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
        log.info("pulling %s into %s", reference, target)
        argv = [command, "pull", "--force", str(partial), reference]
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=PULL_SECONDS, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PullError(
                f"cannot pull {reference} (for {_names(tasks)}): {exc}",
                hint="check the runtime and the network, or pull it yourself and name the "
                ".sif file as the image",
            ) from None
        if done.returncode != 0 or not partial.exists():
            partial.unlink(missing_ok=True)
            said = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise PullError(
                f"pulling {reference} (for {_names(tasks)}) failed: " + " / ".join(said),
                hint="check the reference and that this machine reaches its registry",
            )
        os.replace(partial, target)
        pulled[reference] = str(target)
    return pulled


def _names(tasks: list[str]) -> str:
    shown = ", ".join(repr(t) for t in tasks[:3])
    return (
        f"task {shown}"
        if len(tasks) == 1
        else f"tasks {shown}" + (f" and {len(tasks) - 3} more" if len(tasks) > 3 else "")
    )


def can_pull(command: str) -> bool:
    """Whether ``command`` (apptainer or singularity) is installed here."""
    return shutil.which(command) is not None
