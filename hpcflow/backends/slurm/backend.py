"""SLURM: render a batch script, ``sbatch`` it, poll with ``squeue``, ``scancel`` it.

The backend is argv builders and output parsers around one template
(``templates/pilot.sbatch.j2``); the submit/poll/cancel rules are
:class:`~hpcflow.backends.batch.BatchBackend`'s, and every command goes through its
:class:`~hpcflow.backends._commands.CommandRunner`. State and reason vocabularies live
in :mod:`hpcflow.backends.slurm.states`.

Polling facts (SLURM 22.05, checked on a real cluster; see tests/unit/backends/samples):

* One ``squeue --noheader --states=all --jobs=ID,ID --Format=...`` call per poll. The
  ``--json`` output of 22.05 ignores ``--jobs``/``--states``/``--user`` and lists every
  job the controller holds, so on a busy cluster each poll would transfer megabytes;
  it is therefore opt-in (``squeue_json=True``) and always filtered on our side.
* ``--states=all`` is needed, or finished jobs are not listed.
* ``exit_code`` is a raw wait status (``exit 5`` reads 1280; SIGTERM reads 15).
* Finished jobs are purged after MinJobAge (default 300 s). When every id asked for is
  purged, squeue fails with "Invalid job id specified"; that means "none known", not
  an error. Purged ids are looked up with ONE ``sacct`` call when accounting is
  enabled. Without accounting (sacct prints "Slurm accounting storage is disabled";
  remembered, so it is asked once) they are left out of the answer: per-id
  ``scontrol show job`` calls would not know them either, and the poller reports an
  id that stays missing as unknown.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Iterable
from pathlib import Path

from hpcflow.backends import batch
from hpcflow.backends._commands import CommandResult, CommandRunner
from hpcflow.backends._render import label, validate_extra_directive
from hpcflow.backends._submit_errors import (
    SBATCH_PERMANENT_ERRORS,
    SBATCH_PREFIXES,
    SBATCH_TRANSIENT_ERRORS,
    without_prefix,
)
from hpcflow.backends.base import AllocationRequest, AllocationStatus
from hpcflow.backends.batch import BatchBackend, Directive, HarmlessErrors
from hpcflow.backends.slurm.states import (
    decode_exit_pair,
    decode_wait_status,
    describe_reason,
    to_state,
)
from hpcflow.errors import ProfileError, RunError, SchedulerCommandError

log = logging.getLogger(__name__)

TEMPLATE = "pilot.sbatch.j2"
#: Jobs mode: one task (or one array of a task's instances) per batch job.
JOB_TEMPLATE = "job.sbatch.j2"

#: squeue columns, each followed by "|" (no padding): id, state, raw wait status,
#: nodes, reason. The reason comes last because it may contain ", " and ":".
SQUEUE_FORMAT = "JobID:|,State:|,exit_code:|,NodeList:|,Reason:|"
SACCT_FORMAT = "JobID,State,ExitCode,Reason"

#: Directive values that sbatch reads as one token without quotes.
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9_.,:/+=@%-]+")
_PARSABLE = re.compile(r"(\d+)(?:;(\S+))?")
_ACCOUNTING_DISABLED = "accounting storage is disabled"
_INVALID_JOB_ID = "Invalid job id specified"

#: sbatch errors worth retrying, and those a profile setting fixes (shared with the PBS
#: commands that wrap sbatch).
TRANSIENT_ERRORS = SBATCH_TRANSIENT_ERRORS
PERMANENT_ERRORS = SBATCH_PERMANENT_ERRORS
#: scancel's words for ids that already ended or are unknown.
HARMLESS_CANCEL = HarmlessErrors((_INVALID_JOB_ID, "already completing or completed"))

#: Long sbatch option that a typed request field produces → that field's name.
_TYPED_OPTIONS = {
    "job-name": "job_name", "output": "stdout", "error": "stderr", "nodes": "nodes",
    "ntasks": "ntasks", "ntasks-per-node": "workers_per_node",
    "cpus-per-task": "cpus_per_task", "overcommit": "overcommit",
    "gres": "gpus_per_node", "mem": "memory_per_node", "time": "walltime",
    "partition": "partition", "account": "account", "qos": "qos",
    "constraint": "constraint", "array": "max_array_size / array_parallelism",
    "dependency": "dependencies",
}  # fmt: skip
#: Options hpcflow sets on its own (no setting stands behind them).
_FIXED_OPTIONS = {"no-kill", "no-requeue"}
#: Short spellings of those options.
_SHORT_OPTIONS = {
    "J": "job-name", "o": "output", "e": "error", "N": "nodes", "n": "ntasks",
    "c": "cpus-per-task", "O": "overcommit", "t": "time", "p": "partition",
    "A": "account", "q": "qos", "C": "constraint", "a": "array", "d": "dependency",
    "k": "no-kill",
}  # fmt: skip


class SlurmBackend(BatchBackend):
    """The SLURM batch system, driven through ``runner``.

    Parameters
    ----------
    runner
        Runs every command (and counts them).
    squeue_json
        Poll with ``squeue --json`` instead of the delimited ``--Format`` listing. The
        answer is filtered to the ids asked for either way (22.05 ignores the filters).
    **timeouts
        Passed on to :class:`~hpcflow.backends.batch.BatchBackend`.
    """

    name = "slurm"
    system = "SLURM"
    templates_package = "hpcflow.backends.slurm"
    pilot_template = TEMPLATE
    job_template = JOB_TEMPLATE
    busy_hint = "the SLURM controller is busy or unreachable; retry later"
    transient_errors = TRANSIENT_ERRORS
    permanent_errors = PERMANENT_ERRORS
    harmless_cancel = HARMLESS_CANCEL

    def __init__(
        self, runner: CommandRunner, *, squeue_json: bool = False, **timeouts: float
    ) -> None:
        super().__init__(runner, **timeouts)
        self.squeue_json = squeue_json
        #: Whether ``sacct`` works here: None until the first purged id needs it.
        self.accounting: bool | None = None

    # -- rendering --------------------------------------------------------------

    def directives(self, request: AllocationRequest) -> list[Directive]:
        """The ``#SBATCH`` lines (without the prefix), each with an optional comment."""
        request.check()
        # An array's elements each write their own log: %a is the element's index.
        element = ".%a" if request.is_array else ""
        lines: list[Directive] = [
            (f"--job-name={job_name(request.job_name)}", None),
            (f"--output={directive_path(request.stdout, element)}", None),
            (f"--error={directive_path(request.stderr, element)}", None),
            (f"--nodes={request.nodes}", None),
            (f"--ntasks={request.ntasks}", None),
        ]
        if request.ntasks_per_node is not None:
            lines.append((f"--ntasks-per-node={request.ntasks_per_node}", None))
        lines.append((f"--cpus-per-task={request.cpus_per_task}", None))
        if request.overcommit:
            lines.append(("--overcommit", "More ranks than CPUs: ranks share cores."))
        if request.gpus_per_node:
            kind = f"{request.gpu_kind}:" if request.gpu_kind else ""
            lines.append((f"--gres=gpu:{kind}{request.gpus_per_node}", "GPUs on every node."))
        if request.memory_per_node is not None:
            lines.append(
                (f"--mem={batch.memory_mib(request.memory_per_node)}M", "Memory per node, in MiB.")
            )
        if request.walltime is not None:
            lines.append((f"--time={format_walltime(request.walltime)}", "Walltime: [D-]H:MM:SS."))
        for option in ("partition", "account", "qos", "constraint"):
            value = getattr(request, option)
            if value is not None:
                lines.append((f"--{option}={directive_value(value, option)}", None))
        lines.extend(batch.array_directives(request, "--array="))
        if request.task_name is None and not request.is_array:
            lines.extend(pilot_fault_directives(request.nodes))
        if request.depends_on:
            lines.append(
                (f"--dependency=afterok:{':'.join(request.depends_on)}", batch.DEPENDENCY_COMMENT)
            )
            # A dependency that can no longer be met cancels the job instead of leaving
            # it pending (DependencyNeverSatisfied); hpcflow cancels it too.
            lines.append(("--kill-on-invalid-dep=yes", None))
        emitted = {line.split("=", 1)[0][2:] for line, _ in lines}

        def check(text: str) -> None:
            validate_extra_directive(text)
            _check_not_typed(text, emitted)

        return lines + batch.extra_directives(request, check)

    # -- submitting ---------------------------------------------------------------

    def submit_argv(self, script: Path, request: AllocationRequest) -> list[str]:
        """``sbatch --parsable SCRIPT``: the job id, alone, is the answer."""
        return ["sbatch", "--parsable", str(script)]

    def parse_submit(self, stdout: str) -> str:
        return parse_sbatch_parsable(stdout)

    def submit_error_text(self, result: CommandResult) -> str:
        return result.stderr or result.stdout

    def submit_error_message(self, text: str) -> str:
        return _sbatch_message(text)

    # -- polling ------------------------------------------------------------------

    def poll_argv(self, ids: list[str]) -> list[str]:
        """ONE ``squeue`` for all ids, finished ones included (``--states=all``)."""
        argv = ["squeue", "--noheader", "--states=all", f"--jobs={','.join(ids)}"]
        argv.append("--json" if self.squeue_json else f"--Format={SQUEUE_FORMAT}")
        return argv

    def parse_poll(self, result: CommandResult, ids: list[str]) -> dict[str, AllocationStatus]:
        if result.returncode != 0:
            if _INVALID_JOB_ID in result.stderr:
                return {}  # every id asked for is purged (or never existed)
            result.check()
        if self.squeue_json:
            return parse_squeue_json(result.stdout, ids)
        return parse_squeue(result.stdout, ids)

    def poll_missing(self, ids: list[str]) -> dict[str, AllocationStatus]:
        """Ids squeue has purged, from ONE sacct call, while accounting may work."""
        if self.accounting is False:
            return {}
        argv = [
            "sacct", "--parsable2", "--noheader", "--allocations",
            f"--jobs={','.join(ids)}", f"--format={SACCT_FORMAT}",
        ]  # fmt: skip
        try:
            result = self.runner.run(argv, timeout=self.query_timeout)
        except SchedulerCommandError as exc:
            # The fallback must not fail a poll that squeue answered.
            log.warning("sacct could not be run: %s", exc.message)
            if exc.returncode in (126, 127):
                self.accounting = False  # not installed: do not try again
            return {}
        if _ACCOUNTING_DISABLED in (result.stdout + result.stderr).lower():
            log.info("SLURM accounting is disabled: purged jobs are reported as unknown")
            self.accounting = False
            return {}
        if result.returncode != 0:
            log.warning("sacct failed (%d): %s", result.returncode, result.stderr.strip())
            return {}
        self.accounting = True
        return parse_sacct(result.stdout, ids)

    # -- cancelling -------------------------------------------------------------

    def cancel_argv(self, ids: list[str]) -> list[str]:
        return ["scancel", *ids]


# -- values for #SBATCH lines ---------------------------------------------------


def pilot_fault_directives(nodes: int) -> list[Directive]:
    """What a pilot allocation does when one of its nodes fails.

    ``--no-kill`` (several nodes): SLURM's default ends the whole allocation when one
    node fails (NODE_FAIL); with it the allocation lives on, the Dask scheduler drops
    the lost node's workers and the driver's tasks on them run again on the others.
    ``--no-requeue``: SLURM would otherwise put a failed allocation back in the queue
    under the same id and restart it behind hpcflow's back; hpcflow continues a run in
    an allocation of its own instead (numbered logs, ``hpcflow status`` lists it).
    """
    lines: list[Directive] = []
    if nodes > 1:
        lines.append(
            ("--no-kill", "A failed node does not end the allocation: its tasks run elsewhere.")
        )
    lines.append(("--no-requeue", "hpcflow continues an ended allocation itself."))
    return lines


#: A SLURM job name: any label will do.
job_name = label


def directive_value(value: str, setting: str) -> str:
    """``value`` as ONE token for sbatch's ``#SBATCH`` parser.

    sbatch splits directive lines on blanks, honours double quotes and, inside them,
    backslash escapes (checked on 22.05); lines cannot continue, so line breaks are
    refused.
    """
    if any(c in value for c in "\n\r\x00"):
        raise ProfileError(
            f"{setting} {value!r} contains a line break or NUL character",
            hint=f"fix the profile's {setting} setting",
        )
    if _PLAIN_VALUE.fullmatch(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def directive_path(path: Path | str, pattern: str = "") -> str:
    """An absolute output/error path for ``#SBATCH``, safe from sbatch's parsing.

    ``%`` starts a filename pattern (``%j``...), so it is doubled. A backslash turns
    pattern expansion off and is then dropped by SLURM, so such a path cannot be
    expressed and is refused, like a path with a line break. ``pattern`` (e.g. ``.%a``,
    the array index) is inserted before the path's suffix, unescaped.
    """
    text = os.path.abspath(path)
    if any(c in text for c in "\n\r\x00\\"):
        raise RunError(
            f"SLURM cannot write a log to {text!r}: the path contains a line break, NUL "
            "or backslash",
            hint="put the workflow and its run directory under a path without those characters",
        )
    escaped = text.replace("%", "%%")
    if pattern:
        stem, dot, suffix = escaped.rpartition(".")
        escaped = f"{stem}{pattern}.{suffix}" if dot and "/" not in suffix else escaped + pattern
    return directive_value(escaped, "path")


def format_walltime(seconds: float) -> str:
    """Seconds → ``H:MM:SS``, or ``D-HH:MM:SS`` from one day on (rounded up)."""
    total = math.ceil(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{hours}:{minutes:02d}:{secs:02d}"


def _check_not_typed(text: str, emitted: set[str]) -> None:
    """Refuse an extra directive that repeats an option computed from a typed setting."""
    if text.startswith("--"):
        option = text[2:].split("=", 1)[0]
    else:
        option = _SHORT_OPTIONS.get(text[1:2], "")
    if option in emitted:
        hint = (
            "remove the extra directive: hpcflow sets it for pilot allocations"
            if option in _FIXED_OPTIONS
            else f"use the {_TYPED_OPTIONS[option]} setting instead of an extra directive"
        )
        raise ProfileError(
            f"extra directive {text!r} repeats an option hpcflow already sets", hint=hint
        )


# -- output parsers -------------------------------------------------------------


def parse_sbatch_parsable(stdout: str) -> str:
    """The job id from ``sbatch --parsable`` output: ``123`` or ``123;cluster``.

    The cluster name (multi-cluster setups) is dropped: polling uses the bare id.
    """
    hint = "is 'sbatch' a wrapper that changes its output? hpcflow needs --parsable"
    match = batch.match_last_line(stdout, _PARSABLE, "sbatch", hint)
    if match.group(2):
        log.debug("job %s is on cluster %s", match.group(1), match.group(2))
    return match.group(1)


def _sbatch_message(stderr: str) -> str:
    """sbatch's error lines without the ``sbatch: error:`` prefixes, joined."""
    lines = (without_prefix(line.strip(), SBATCH_PREFIXES) for line in stderr.splitlines())
    return "; ".join(line for line in lines if line)


def _status(
    native_id: str, native_state: str, reason: str | None, exit_code: int | None, nodes: str
) -> AllocationStatus:
    state = to_state(native_state)
    return AllocationStatus(
        native_id=native_id,
        state=state,
        native_state=native_state,
        reason=describe_reason(reason),
        exit_code=exit_code if state.final else None,
        nodes=nodes or None,
    )


def parse_squeue(stdout: str, wanted: Iterable[str]) -> dict[str, AllocationStatus]:
    """Statuses from ``squeue --noheader --Format=SQUEUE_FORMAT``, for ``wanted`` ids only."""
    keep = set(wanted)
    statuses: dict[str, AllocationStatus] = {}
    for line in stdout.splitlines():
        if not line.strip():
            continue
        fields = line.split("|", 4)
        if len(fields) != 5:
            log.warning("ignoring a squeue line that does not have 5 fields: %r", line)
            continue
        native_id, native_state, raw_exit, nodes, reason = (f.strip() for f in fields)
        if native_id not in keep:
            continue
        reason = reason[:-1] if reason.endswith("|") else reason
        exit_code = decode_wait_status(int(raw_exit)) if raw_exit.isdigit() else None
        statuses[native_id] = _status(native_id, native_state, reason, exit_code, nodes)
    return statuses


def parse_squeue_json(stdout: str, wanted: Iterable[str]) -> dict[str, AllocationStatus]:
    """Statuses from ``squeue --json`` (openapi v0.0.38, SLURM 22.05), for ``wanted`` ids."""
    keep = set(wanted)
    statuses: dict[str, AllocationStatus] = {}
    for job in json.loads(stdout).get("jobs", []):
        native_id = str(job.get("job_id"))
        if native_id not in keep:
            continue
        native_state = job.get("job_state", "")
        if isinstance(native_state, list):  # newer releases list state flags
            native_state = native_state[0] if native_state else ""
        raw_exit = job.get("exit_code")
        exit_code = decode_wait_status(raw_exit) if isinstance(raw_exit, int) else None
        statuses[native_id] = _status(
            native_id, str(native_state), job.get("state_reason"), exit_code,
            job.get("nodes") or "",
        )  # fmt: skip
    return statuses


def parse_sacct(stdout: str, wanted: Iterable[str]) -> dict[str, AllocationStatus]:
    """Statuses from ``sacct --parsable2 --noheader --format=JobID,State,ExitCode[,Reason]``.

    Step rows (``123.batch``) are skipped; the allocation's own row is used.
    """
    keep = set(wanted)
    statuses: dict[str, AllocationStatus] = {}
    for line in stdout.splitlines():
        fields = line.strip().split("|")
        if len(fields) < 3 or fields[0] not in keep:
            continue
        reason = fields[3] if len(fields) > 3 else None
        statuses[fields[0]] = _status(fields[0], fields[1], reason, decode_exit_pair(fields[2]), "")
    return statuses
