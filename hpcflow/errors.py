"""The error hierarchy.

Every error a *user* can cause derives from :class:`HpcflowError`; the CLI prints its
message (no traceback) and exits with :attr:`HpcflowError.exit_code`. Anything else that
escapes is a bug and is shown with its traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class HpcflowError(Exception):
    """Root of every error caused by input, environment or a batch system."""

    exit_code = 2

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message


@dataclass(frozen=True)
class SpecProblem:
    """One problem found in a workflow file, with where it is."""

    file: str
    line: int | None
    column: int | None
    where: str
    message: str
    hint: str | None = None

    def render(self) -> str:
        location = self.file
        if self.line is not None:
            location += f":{self.line}"
            if self.column is not None:
                location += f":{self.column}"
        text = f"{location}: {self.where + ': ' if self.where else ''}{self.message}"
        if self.hint:
            text += f"\n    hint: {self.hint}"
        return text


class SpecError(HpcflowError):
    """A workflow file is malformed; carries every problem found, each with file:line:col."""

    def __init__(self, problems: Sequence[SpecProblem]) -> None:
        self.problems = list(problems)
        first = self.problems[0] if self.problems else None
        super().__init__(
            "\n".join(p.render() for p in self.problems) or "invalid workflow",
            hint=None,
        )
        self.file = first.file if first else None
        self.line = first.line if first else None


class ProfileError(HpcflowError):
    """A profile or setting is invalid or unknown."""


class RunError(HpcflowError):
    """A run cannot start or continue (locked, missing, unwritable run directory...)."""


class WorkersGone(RunError):
    """Every worker of a run's allocation is gone and none will come: the run cannot go on."""


class RunLockedError(RunError):
    """Another run of the same workflow is active."""


class ResourceError(HpcflowError):
    """A task asks for more than the cluster can ever give it."""


class SubmitError(HpcflowError):
    """Submitting an allocation failed; ``transient`` says whether a retry may help.

    ``limit`` marks a refusal because a queue limit was reached (too many jobs queued or
    submitted): jobs mode waits for some of its jobs to finish and submits again.
    """

    def __init__(
        self, message: str, *, transient: bool, hint: str | None = None, limit: bool = False
    ) -> None:
        super().__init__(message, hint=hint)
        self.transient = transient
        self.limit = limit


class SchedulerCommandError(HpcflowError):
    """A batch-system command failed; carries argv, exit code and both streams."""

    def __init__(self, argv: Sequence[str], returncode: int, stdout: str, stderr: str) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        super().__init__(
            f"command {' '.join(self.argv)!r} exited with {returncode}: "
            f"{(stderr or stdout).strip()[-2000:]}"
        )


class AllocationFailed(HpcflowError):
    """An allocation ended badly; names its id, state, reason and log files."""

    def __init__(self, native_id: str, state: str, reason: str, logs: Sequence[str]) -> None:
        self.native_id = native_id
        self.state = state
        self.reason = reason
        self.logs = list(logs)
        super().__init__(
            f"allocation {native_id} ended {state}: {reason}; logs: {', '.join(self.logs)}"
        )
