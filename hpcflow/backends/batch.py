"""The batch-system backend written once: render, submit, poll and cancel.

Modelled on PSI/J's ``BatchSchedulerExecutor``: this class holds every rule that does not
depend on the batch system, and a subclass (``slurm/``, ``pbs/``) brings only its words:

* argv builders: :meth:`~BatchBackend.submit_argv`, :meth:`~BatchBackend.poll_argv`,
  :meth:`~BatchBackend.cancel_argv`;
* parsers: :meth:`~BatchBackend.parse_submit`, :meth:`~BatchBackend.parse_poll`;
* tables: ``transient_errors`` / ``permanent_errors`` (how a refused submission is
  sorted), ``harmless_cancel`` (which errors of a cancel mean "it had ended anyway");
  its state tables live in its own ``states.py``;
* its script: :meth:`~BatchBackend.directives`, the templates, and any extra template
  values (:meth:`~BatchBackend.extra_context`).

Every command goes through the one injected
:class:`~hpcflow.backends._commands.CommandRunner`, with ``submit_timeout`` for the
submission and ``query_timeout`` for the rest.
"""

from __future__ import annotations

import abc
import logging
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcflow.backends._commands import CommandResult, CommandRunner, CommandTimedOut
from hpcflow.backends._render import Renderer, label, validate_env_name
from hpcflow.backends._submit_errors import classify_submit_failure
from hpcflow.backends.arrays import array_range
from hpcflow.backends.base import AllocationRequest, AllocationStatus
from hpcflow.errors import SchedulerCommandError, SubmitError

log = logging.getLogger(__name__)

#: Seconds before the submit command is killed, and before the status and cancel commands are.
SUBMIT_TIMEOUT = 60.0
QUERY_TIMEOUT = 30.0

#: One batch-script directive without its prefix (``--nodes=2``, ``-l walltime=1:00:00``)
#: and the comment printed above it, if any.
Directive = tuple[str, str | None]

#: The comments every backend prints above the same kinds of directive.
ARRAY_COMMENT = "One element per task instance; %N caps how many run at once."
DEPENDENCY_COMMENT = "Start only after these jobs (all their elements) ended successfully."
EXTRA_COMMENT = "Extra directives from the profile."


@dataclass(frozen=True)
class HarmlessErrors:
    """Error lines that do not make a failed command an error, e.g. "unknown job id"
    from a cancel of a job that has already ended.

    A failure is harmless when every non-blank line of the output read holds one of
    ``patterns``, which includes a failure that prints nothing.
    """

    patterns: tuple[str, ...]
    #: Read stdout (followed by stderr) too, not only stderr.
    read_stdout: bool = False
    #: Compare without regard to case (the patterns are then written in lower case).
    fold_case: bool = False

    def covers(self, result: CommandResult) -> bool:
        """Whether ``result``'s error lines are all harmless."""
        text = result.stdout + result.stderr if self.read_stdout else result.stderr
        lines = [line for line in text.splitlines() if line.strip()]
        if self.fold_case:
            lines = [line.lower() for line in lines]
        return all(any(pattern in line for pattern in self.patterns) for line in lines)


def unique_ids(native_ids: Iterable[str]) -> list[str]:
    """``native_ids`` as strings, each once, in their first order."""
    return list(dict.fromkeys(str(i) for i in native_ids))


def memory_mib(size_bytes: int) -> int:
    """Bytes → whole MiB, rounded up (never ask for less than the request)."""
    return max(1, math.ceil(size_bytes / 2**20))


def match_last_line(
    stdout: str, pattern: re.Pattern[str], program: str, hint: str
) -> re.Match[str]:
    """``pattern`` matched against the last non-blank line of ``program``'s output (which
    prints its warnings first and the job id last); SubmitError when it does not match."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    match = pattern.fullmatch(lines[-1]) if lines else None
    if match is None:
        raise SubmitError(
            f"{program} succeeded but printed no job id: {stdout.strip()!r}",
            transient=False,
            hint=hint,
        )
    return match


def array_directives(request: AllocationRequest, option: str) -> list[Directive]:
    """The array directive (``option`` then the index range: ``--array=``, ``-J ``), or
    none for a request that is not an array."""
    if not request.is_array:
        return []
    return [
        (f"{option}{array_range(request.array_size, request.array_parallelism)}", ARRAY_COMMENT)
    ]


def extra_directives(request: AllocationRequest, check: Callable[[str], None]) -> list[Directive]:
    """The profile's extra directives, each passed to ``check`` (which raises ProfileError
    for one that is malformed or repeats a typed setting), commented once."""
    lines: list[Directive] = []
    for index, text in enumerate(request.extra_directives):
        check(text)
        lines.append((text, EXTRA_COMMENT if index == 0 else None))
    return lines


class BatchBackend(abc.ABC):
    """A batch system driven through ``runner``: the generic render/submit/poll/cancel.

    Parameters
    ----------
    runner
        Runs every command (and counts them).
    submit_timeout, query_timeout
        Seconds before the submit command, and before a status or cancel command, is
        killed; a submission that timed out is reported as transient.
    """

    #: The backend's name in profiles (``backend: slurm``).
    name: str
    #: The batch system's name in log lines: ``SLURM``, ``PBS``.
    system: str
    #: The package whose ``templates/`` folder holds the scripts.
    templates_package: str
    #: Templates of a pilot allocation and of jobs mode's per-task job.
    pilot_template: str
    job_template: str
    #: The hint of a transient submit failure (a timeout, a busy controller).
    busy_hint: str
    #: Submit errors worth retrying, and those a profile setting fixes (→ its name).
    transient_errors: Sequence[str]
    permanent_errors: Sequence[tuple[str, str]]
    #: What a failed cancel may say about jobs that have ended or are unknown.
    harmless_cancel: HarmlessErrors

    def __init__(
        self,
        runner: CommandRunner,
        *,
        submit_timeout: float = SUBMIT_TIMEOUT,
        query_timeout: float = QUERY_TIMEOUT,
    ) -> None:
        self.runner = runner
        self.submit_timeout = submit_timeout
        self.query_timeout = query_timeout
        self._templates = Renderer(self.templates_package)

    # -- what a backend supplies ----------------------------------------------------

    @abc.abstractmethod
    def directives(self, request: AllocationRequest) -> list[Directive]:
        """The script's directive lines (without the prefix), each with its comment."""

    def extra_context(self, request: AllocationRequest) -> Mapping[str, Any]:
        """Template values of this backend's own, beyond the common ones."""
        return {}

    @abc.abstractmethod
    def submit_argv(self, script: Path, request: AllocationRequest) -> list[str]:
        """The command that submits ``script``; may raise before anything runs."""

    @abc.abstractmethod
    def parse_submit(self, stdout: str) -> str:
        """The native id in the submit command's output; SubmitError if there is none."""

    @abc.abstractmethod
    def submit_error_text(self, result: CommandResult) -> str:
        """The output of a failed submission that is searched for the error patterns."""

    @abc.abstractmethod
    def submit_error_message(self, text: str) -> str:
        """The error in ``text``, without the batch system's prefixes and framing."""

    @abc.abstractmethod
    def poll_argv(self, ids: list[str]) -> list[str]:
        """The one status command for all ``ids``."""

    @abc.abstractmethod
    def parse_poll(
        self, result: CommandResult, ids: list[str]
    ) -> dict[str, AllocationStatus] | None:
        """The statuses in ``result`` for ``ids`` (ids it does not know are omitted).

        Raise SchedulerCommandError for a real failure. Return None when the command
        refused the way it was asked (an option this installation lacks) after
        switching :meth:`poll_argv` to another way; it is then asked once more.
        """

    def poll_missing(self, ids: list[str]) -> dict[str, AllocationStatus]:
        """Statuses of the ``ids`` the status command no longer knows, from a second
        source where the batch system has one (SLURM's accounting); none by default."""
        return {}

    @abc.abstractmethod
    def cancel_argv(self, ids: list[str]) -> list[str]:
        """The one command that cancels all ``ids``."""

    # -- the rules, written once --------------------------------------------------------

    def render(self, request: AllocationRequest) -> str:
        """The exact batch script that :meth:`submit` would send."""
        if not request.command:
            raise ValueError("an allocation request needs a command")
        env = [(validate_env_name(name), str(value)) for name, value in request.env.items()]
        context = {
            "run_label": label(request.run_id),
            "task_label": label(request.task_name or ""),
            "directives": self.directives(request),
            **self.extra_context(request),
            "workdir": os.path.abspath(request.workdir or request.run_dir),
            "setup_lines": list(request.setup_lines),
            "env": env,
            "command": [str(arg) for arg in request.command],
        }
        template = self.pilot_template if request.task_name is None else self.job_template
        return self._templates.render(template, context)

    def submit(self, script: Path, request: AllocationRequest) -> str:
        """Submit ``script``; return the native id. Raises SubmitError.

        A transient error (``transient=True``: a timeout, a busy controller) may still
        have queued the job (the reply can be lost after the controller accepted it);
        whoever retries should look for a job of the same name before submitting again.
        """
        argv = self.submit_argv(script, request)
        try:
            result = self.runner.run(argv, timeout=self.submit_timeout)
        except CommandTimedOut as exc:
            raise SubmitError(
                f"{argv[0]} did not answer within {exc.timeout:g} s",
                transient=True,
                hint=self.busy_hint,
            ) from exc
        except SchedulerCommandError as exc:
            raise SubmitError(exc.message, transient=False, hint=exc.hint) from exc
        if result.returncode != 0:
            raise self.classify_submit_error(result)
        native_id = self.parse_submit(result.stdout)
        system, run_id = self.system, request.run_id
        log.info("submitted %s for run %s as %s job %s", script, run_id, system, native_id)
        return native_id

    def classify_submit_error(self, result: CommandResult) -> SubmitError:
        """A SubmitError for a submission that exited non-zero: transient (retry may
        help), a queue limit, or permanent (with the profile setting that fixes it)."""
        program = result.argv[0]
        text = self.submit_error_text(result)
        return classify_submit_failure(
            program,
            self.submit_error_message(text) or f"{program} exited with {result.returncode}",
            text,
            self.transient_errors,
            self.permanent_errors,
            self.busy_hint,
        )

    def poll(self, native_ids: Sequence[str]) -> dict[str, AllocationStatus]:
        """The status of every id from ONE status command (an id given twice is asked for
        once; no ids, no command); ids it no longer knows come from :meth:`poll_missing`,
        or are omitted."""
        ids = unique_ids(native_ids)
        if not ids:
            return {}
        statuses = self._query(ids)
        missing = [i for i in ids if i not in statuses]
        if missing:
            statuses.update(self.poll_missing(missing))
        return statuses

    def _query(self, ids: list[str]) -> dict[str, AllocationStatus]:
        for _ in range(2):  # a refused question is asked once more, the other way
            result = self.runner.run(self.poll_argv(ids), timeout=self.query_timeout)
            statuses = self.parse_poll(result, ids)
            if statuses is not None:
                return statuses
        raise SchedulerCommandError(result.argv, result.returncode, result.stdout, result.stderr)

    def cancel(self, native_ids: Sequence[str]) -> None:
        """ONE cancel command for all ids; ids that already ended or are unknown are fine,
        any other failure raises SchedulerCommandError."""
        ids = unique_ids(native_ids)
        if not ids:
            return
        result = self.runner.run(self.cancel_argv(ids), timeout=self.query_timeout)
        if result.returncode != 0 and not self.harmless_cancel.covers(result):
            result.check()
        log.info("cancelled %s jobs %s", self.system, ", ".join(ids))
