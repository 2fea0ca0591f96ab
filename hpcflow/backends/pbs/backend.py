"""PBS: render a batch script, ``qsub`` it, poll with ``qstat``, ``qdel`` it.

Two flavors share this module: PBS Professional / OpenPBS (``flavor="pro"``: chunks,
``-l select=N:ncpus=C:mpiprocs=P``, ``qstat -f -F json -x``) and Torque
(``flavor="torque"``: ``-l nodes=N:ppn=C``, text ``qstat -f``). The backend is argv
builders and output parsers around one template per flavor; the submit/poll/cancel
rules are :class:`~hpcflow.backends.batch.BatchBackend`'s, and every command goes
through its :class:`~hpcflow.backends._commands.CommandRunner`. State and exit-status
vocabularies live in :mod:`hpcflow.backends.pbs.states`; what PBS does only for SLURM's
PBS wrappers, in :mod:`hpcflow.backends.pbs.slurm_wrapper`.

Facts this module is built on (Torque-format ones checked against SLURM's PBS/Torque
wrappers from Debian's slurm-wlm-torque; samples in tests/unit/backends/samples/pbs):

* ``qsub`` prints the job id: ``123.server`` (PBS Pro, Torque) or a bare ``123`` (the
  SLURM wrappers). The id is kept as printed; qstat answers are matched to it exactly
  or, when the server spells its name differently, by the sequence number.
* ``-o``/``-e`` are passed on the qsub command line as well as in the script (for the
  SLURM wrapper). PBS reads ``-o`` as ``[host:]path`` and the wrapper passes its
  arguments through a shell, so the paths given to qsub must be plain (no blanks,
  quotes, ``$``, ``:``, ``%``...): :func:`qsub_path` refuses the others with a hint
  instead of letting a shell see them.
* One ``qstat`` call per poll for every id. An unknown or purged id makes qstat exit
  153 (PBS's "Unknown Job Id", 15001 mod 256) and print the others; such ids are
  omitted from the answer (the poller reports an id that stays missing as lost).
  PBS Pro lists finished jobs only with ``-x`` and only when the server keeps job
  history; Torque keeps completed jobs (state ``C``) for ``keep_completed`` seconds,
  and hides them when ``PBS_QSTAT_NO_COMPLETE`` is set in the environment.
* ``job_state`` does not tell success from failure; the exit status does, when the
  server reports it (the SLURM wrappers never do: such jobs end as completed with a
  reason saying so). The scheduler's ``comment`` is the reason a queued job waits.
* The PBS Pro JSON query is refused by a Torque ``qstat`` ("Unknown option"): the
  backend then says so once in the log and polls in Torque's text format from then on,
  so ``hpcflow status`` still works on a run whose profile it was not told.
* ``qdel`` of a job that has ended or is unknown fails harmlessly (the wrapper exits
  non-zero without a word for those).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hpcflow.backends import batch
from hpcflow.backends._commands import CommandResult, CommandRunner
from hpcflow.backends._render import label, refuse_line_breaks
from hpcflow.backends._submit_errors import without_prefix
from hpcflow.backends.base import AllocationRequest, AllocationState, AllocationStatus
from hpcflow.backends.batch import BatchBackend, Directive, HarmlessErrors
from hpcflow.backends.pbs import slurm_wrapper
from hpcflow.backends.pbs.states import (
    Flavor,
    describe_waiting,
    final_outcome,
    is_final,
    to_state,
)
from hpcflow.errors import ProfileError, RunError, SchedulerCommandError

log = logging.getLogger(__name__)

FLAVORS: tuple[Flavor, ...] = ("pro", "torque")
TEMPLATES: dict[Flavor, str] = {"pro": "pilot.pbs.j2", "torque": "pilot.torque.j2"}
#: Jobs mode: one task (or one array of a task's instances) per batch job.
JOB_TEMPLATES: dict[Flavor, str] = {"pro": "job.pbs.j2", "torque": "job.torque.j2"}
#: The array option of each flavor: PBS Pro ``-J 0-N``, Torque ``-t 0-N``.
ARRAY_OPTION: dict[Flavor, str] = {"pro": "J", "torque": "t"}

#: PBS Pro allows job names of up to 236 characters, starting with a letter.
MAX_JOB_NAME = 236

#: Queue and account values PBS reads as one token, without quoting.
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9_.@+=/-]+")
#: Paths that survive PBS's ``[host:]path`` parsing and a shell unchanged.
_PLAIN_PATH = re.compile(r"[A-Za-z0-9_./+,@=-]+")
#: One extra directive: a single-letter option, optionally one value without blanks,
#: quotes or backslashes (``-m abe``, ``-l place=excl``, ``-W group_list=x``, ``-r``).
_EXTRA_DIRECTIVE = re.compile(r"-([A-Za-z])(?: ([^\s\"'\\]+))?")
_RESOURCE_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_.]*)=")
_JOB_ID = re.compile(r"(\d+(?:\[\d*\])?)(?:\.([A-Za-z0-9_.-]+))?")

#: qstat/qdel messages about ids the server does not know (any more).
_UNKNOWN_JOB = ("unknown job id", "job has finished", "invalid state for job",
                "request invalid for state of job")  # fmt: skip
#: A qstat that failed only for those ids (it lists the others), and such a qdel.
_UNKNOWN_TO_QSTAT = HarmlessErrors(_UNKNOWN_JOB, fold_case=True)
HARMLESS_CANCEL = HarmlessErrors(_UNKNOWN_JOB, read_stdout=True, fold_case=True)
#: qstat's answer when it does not know an option (a Torque qstat asked for JSON).
_UNSUPPORTED_OPTION = ("unknown option", "invalid option", "illegal option", "usage:")

#: qsub errors worth retrying: the server was busy or unreachable. The SLURM wrapper
#: passes sbatch's own messages through, so sbatch's transient messages count too.
TRANSIENT_ERRORS = (
    "cannot connect to server",
    "cannot connect to host",
    "connection refused",
    "connection timed out",
    "cannot read reply",
    "pbs_iff",
    "end of file",
    "server is busy",
    "server shutting down",
    "communication failure",
    *slurm_wrapper.TRANSIENT_ERRORS,
)

#: qsub errors that a retry cannot fix → the profile setting that can.
PERMANENT_ERRORS: tuple[tuple[str, str], ...] = (
    ("Unknown queue", "partition (the PBS queue)"),
    ("requested queue not found", "partition (the PBS queue)"),
    ("Queue is not enabled", "partition (the PBS queue)"),
    ("Access to queue is denied", "partition (the PBS queue) / account"),
    ("Invalid Account", "account"),
    ("Account Name invalid", "account"),
    ("Unauthorized Request", "account / partition"),
    ("Bad UID for job execution", "account"),
    ("Unknown resource", "extra_directives / gpus_per_node (a resource this site lacks)"),
    ("illegal -l value", "extra_directives"),
    ("Illegal attribute or resource value", "extra_directives"),
    ("Job exceeds queue resource limits", "nodes / cpus_per_node / memory_per_node / walltime"),
    ("violates queue and/or server resource limits",
     "nodes / cpus_per_node / memory_per_node / walltime"),
    ("Job violates queue", "nodes / cpus_per_node / memory_per_node / walltime"),
    ("cannot locate feasible nodes", "nodes / cpus_per_node / gpus_per_node"),
    ("Maximum number of jobs already in queue", "partition (your job limit in that queue)"),
    ("invalid option", "extra_directives"),
    ("directive error", "extra_directives"),
    *slurm_wrapper.PERMANENT_ERRORS,
)  # fmt: skip

#: What qsub (and sbatch, through the SLURM wrapper) write before a message, longest first.
_MESSAGE_PREFIXES = ("qsub: submit error", "qsub:", *slurm_wrapper.MESSAGE_PREFIXES)

#: Options computed from a typed request field → that field's name.
_TYPED_OPTIONS = {
    "N": "job_name", "o": "stdout", "e": "stderr", "q": "partition", "A": "account",
    "J": "max_array_size / array_parallelism", "t": "max_array_size / array_parallelism",
}  # fmt: skip
#: ``-l`` resources computed from typed request fields → the fields' names.
_TYPED_RESOURCES = {
    "select": "nodes / ntasks / cpus_per_task / gpus_per_node / memory_per_node",
    "nodes": "nodes / ntasks / cpus_per_task / gpus_per_node",
    "ncpus": "cpus_per_task", "mpiprocs": "ntasks", "ppn": "ntasks / cpus_per_task",
    "ngpus": "gpus_per_node", "gpus": "gpus_per_node", "mem": "memory_per_node",
    "walltime": "walltime", "place": "nodes",
}  # fmt: skip


class PbsBackend(BatchBackend):
    """PBS Professional / OpenPBS (``flavor="pro"``) or Torque (``"torque"``), driven
    through ``runner``.

    Parameters
    ----------
    runner
        Runs every command (and counts them).
    flavor
        Which resource syntax the script uses and how ``qstat`` is asked and read.
    qstat_full
        Torque: poll with ``qstat -f`` (state, exit status, comment, hosts). False polls
        the one-line table (``qstat IDS``), which has the state only.
    **timeouts
        Passed on to :class:`~hpcflow.backends.batch.BatchBackend`.
    """

    name = "pbs"
    system = "PBS"
    templates_package = "hpcflow.backends.pbs"
    busy_hint = "the PBS server is busy or unreachable; retry later"
    transient_errors = TRANSIENT_ERRORS
    permanent_errors = PERMANENT_ERRORS
    harmless_cancel = HARMLESS_CANCEL

    def __init__(
        self, runner: CommandRunner, *, flavor: Flavor = "pro", qstat_full: bool = True,
        **timeouts: float,
    ) -> None:  # fmt: skip
        if flavor not in FLAVORS:
            raise ProfileError(
                f"unknown PBS flavor {flavor!r}", hint="set pbs_flavor to 'pro' or 'torque'"
            )
        super().__init__(runner, **timeouts)
        self.flavor: Flavor = flavor
        self.pilot_template = TEMPLATES[flavor]
        self.job_template = JOB_TEMPLATES[flavor]
        self.qstat_full = qstat_full
        #: Whether qstat answers ``-F json``: starts True for PBS Pro, and is switched
        #: off for good when qstat refuses the option.
        self.json_status = flavor == "pro"
        #: Whose exit-status table the text format is read with: a qstat that refuses
        #: JSON is a Torque one (or SLURM's Torque wrapper).
        self.text_flavor: Flavor = flavor

    # -- rendering --------------------------------------------------------------

    def resources(self, request: AllocationRequest) -> list[Directive]:
        """The ``-l`` resource lines (without ``#PBS``), each with an optional comment."""
        request.check()
        per_node = ranks_per_node(request)
        cpus = cpus_per_node(request)
        lines: list[Directive] = []
        if self.flavor == "pro":
            chunk = f"{request.nodes}:ncpus={cpus}:mpiprocs={per_node}"
            if request.gpus_per_node:
                chunk += f":ngpus={request.gpus_per_node}"
            if request.memory_per_node is not None:
                chunk += f":mem={batch.memory_mib(request.memory_per_node)}mb"
            lines.append((
                f"-l select={chunk}",
                "One chunk per node: its cores (ncpus), MPI ranks (mpiprocs), GPUs, memory.",
            ))  # fmt: skip
            if request.nodes > 1 and not _extra_resources(request) & {"place"}:
                # An extra '-l place=...' (e.g. scatter:excl) replaces this one.
                lines.append(("-l place=scatter", "Each chunk on a different node."))
        else:
            spec = f"{request.nodes}:ppn={cpus}"
            if request.gpus_per_node:
                spec += f":gpus={request.gpus_per_node}"
            lines.append((f"-l nodes={spec}", "Nodes, processors per node (ppn), GPUs per node."))
            if request.memory_per_node is not None:
                total = batch.memory_mib(request.memory_per_node) * request.nodes
                lines.append((f"-l mem={total}mb", "Torque's mem is the whole job's memory."))
        if request.walltime is not None:
            lines.append((
                f"-l walltime={format_walltime(request.walltime)}",
                "Walltime: H:MM:SS (hours may exceed 24).",
            ))  # fmt: skip
        return lines

    def directives(self, request: AllocationRequest) -> list[Directive]:
        """The ``#PBS`` lines (without the prefix), each with an optional comment."""
        if request.qos is not None:
            raise ProfileError(
                "PBS has no quality of service (qos) setting",
                hint="remove qos from the profile; choose a queue with partition instead",
            )
        if request.constraint is not None:
            raise ProfileError(
                "PBS has no generic constraint setting",
                hint="remove constraint from the profile; ask for node features with an "
                "extra directive such as '-l feature=value' where your site defines one",
            )
        lines: list[Directive] = [
            (f"-N {job_name(request.job_name)}", None),
            (f"-o {qsub_path(request.stdout)}", None),
            (f"-e {qsub_path(request.stderr)}", None),
            *self.resources(request),
        ]
        if request.partition is not None:
            lines.append((f"-q {directive_value(request.partition, 'partition')}", None))
        if request.account is not None:
            lines.append((f"-A {directive_value(request.account, 'account')}", None))
        lines.extend(batch.array_directives(request, f"-{ARRAY_OPTION[self.flavor]} "))
        if request.depends_on:
            depend = depend_value(request.depends_on, self.flavor)
            lines.append((f"-W depend={depend}", batch.DEPENDENCY_COMMENT))
        if request.task_name is None and not request.is_array:
            # A pilot allocation: like SLURM's --no-requeue, the batch system must not
            # rerun it behind hpcflow's back (after a node failure, say); hpcflow
            # continues or resumes the run itself.
            lines.append(("-r n", "Not rerunnable: hpcflow continues an ended allocation."))
        emitted = {line.split(" ", 1)[0][1:] for line, _ in lines}
        resources = {key for line, _ in lines if line.startswith("-l ")
                     for key in _resource_names(line[3:])}  # fmt: skip
        return lines + batch.extra_directives(
            request, lambda text: _check_not_typed(text, emitted, resources)
        )

    def extra_context(self, request: AllocationRequest) -> Mapping[str, Any]:
        return {"oversubscribe": needs_oversubscribe(request, self.flavor)}

    # -- submitting ---------------------------------------------------------------

    def submit_argv(self, script: Path, request: AllocationRequest) -> list[str]:
        """``qsub -o OUT -e ERR SCRIPT``; the job id is returned as qsub printed it.

        A path that cannot be passed to qsub raises RunError before anything runs.
        """
        logs = slurm_wrapper.log_options(qsub_path(request.stdout), qsub_path(request.stderr))
        return ["qsub", *logs, qsub_path(script)]

    def parse_submit(self, stdout: str) -> str:
        return parse_qsub_id(stdout)

    def submit_error_text(self, result: CommandResult) -> str:
        return slurm_wrapper.submit_error_text(result)

    def submit_error_message(self, text: str) -> str:
        return _qsub_message(text)

    # -- polling ------------------------------------------------------------------

    def poll_argv(self, ids: list[str]) -> list[str]:
        """ONE qstat for all ids: PBS Pro's JSON while it answers it, else the text."""
        if self.json_status:
            return ["qstat", "-f", "-F", "json", "-x", *ids]
        return ["qstat", "-f", *ids] if self.qstat_full else ["qstat", *ids]

    def parse_poll(
        self, result: CommandResult, ids: list[str]
    ) -> dict[str, AllocationStatus] | None:
        if self.json_status:
            if not _refused_option(result):
                return parse_qstat_json(_known_part(result), ids, self.flavor)
            log.warning(
                "qstat does not answer in JSON (%s); polling its text format instead",
                (result.stderr or result.stdout).strip().splitlines()[0],
            )
            self.json_status = False
            self.text_flavor = "torque"
            return None  # asked again, in the text format
        stdout = _known_part(result)
        if self.qstat_full:
            return parse_qstat_full(stdout, ids, self.text_flavor)
        return parse_qstat_table(stdout, ids)

    # -- cancelling -------------------------------------------------------------

    def cancel_argv(self, ids: list[str]) -> list[str]:
        return ["qdel", *ids]


def _refused_option(result: CommandResult) -> bool:
    text = (result.stdout + result.stderr).lower()
    return result.returncode != 0 and any(m in text for m in _UNSUPPORTED_OPTION)


def _known_part(result: CommandResult) -> str:
    """qstat's stdout, when it failed only because some ids are unknown; else raise."""
    if result.returncode == 0 or _UNKNOWN_TO_QSTAT.covers(result):
        return result.stdout  # rc 153: those ids are unknown; the rest are listed
    result.check()
    return result.stdout  # unreachable: check() raised


# -- values for #PBS lines and the qsub command line ------------------------------


def job_name(text: str) -> str:
    """A PBS job name from ``text``: :func:`label`, starting with a letter, at most
    :data:`MAX_JOB_NAME` characters."""
    name = label(text)
    if not name[0].isalpha():
        name = f"j{name}"
    return name[:MAX_JOB_NAME]


def directive_value(value: str, setting: str) -> str:
    """``value`` if PBS reads it as one plain token (queue, account), else ProfileError."""
    if not _PLAIN_VALUE.fullmatch(value):
        raise ProfileError(
            f"{setting} {value!r} cannot be passed to PBS as it is",
            hint=f"fix the profile's {setting} setting: letters, digits and _ . @ + = / - only",
        )
    return value


def qsub_path(path: Path | str) -> str:
    """An absolute path that qsub and the script's ``#PBS`` lines can carry unchanged.

    PBS reads ``-o``/``-e`` as ``[host:]path``, and SLURM's qsub wrapper passes its
    arguments through a shell, so only plain characters are allowed; anything else is
    refused (rather than quoted for one reader and broken for the other).
    """
    text = os.path.abspath(path)
    if not _PLAIN_PATH.fullmatch(text):
        raise RunError(
            f"PBS cannot be given the path {text!r}: qsub reads ':' as host:path, and "
            "some qsub wrappers pass paths through a shell",
            hint="put the workflow and its run directory under a path of letters, digits "
            "and _ . / + , @ = - only (no spaces, quotes, $, %, :)",
        )
    return text


def depend_value(native_ids: Sequence[str], flavor: Flavor) -> str:
    """``-W depend=`` value: ``afterok:1.srv:2[].srv`` (PBS Pro: afterok covers arrays).

    Torque spells a dependency on a whole array ``afterokarray`` (ids ``123[]``), so
    its arrays are listed apart: ``afterok:1.srv,afterokarray:2[].srv``.
    """
    if flavor == "pro":
        return "afterok:" + ":".join(native_ids)
    jobs = [i for i in native_ids if "[]" not in i]
    arrays = [i for i in native_ids if "[]" in i]
    groups = [f"afterok:{':'.join(jobs)}"] if jobs else []
    if arrays:
        groups.append(f"afterokarray:{':'.join(arrays)}")
    return ",".join(groups)


def format_walltime(seconds: float) -> str:
    """Seconds → PBS's ``H:MM:SS`` (hours unbounded), rounded up."""
    total = math.ceil(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def ranks_per_node(request: AllocationRequest) -> int:
    """MPI ranks on the busiest node: ``ntasks_per_node``, else ``ntasks`` spread over
    ``nodes``."""
    if request.ntasks_per_node is not None:
        return request.ntasks_per_node
    return max(1, math.ceil(request.ntasks / request.nodes))


def cpus_per_node(request: AllocationRequest) -> int:
    """Cores to ask for on each node.

    With ``overcommit`` ranks share cores, as SLURM's ``--overcommit`` allocates them:
    one rank's worth (``cpus_per_task``) per node. Otherwise every rank gets its own.
    """
    if request.overcommit:
        return request.cpus_per_task
    return ranks_per_node(request) * request.cpus_per_task


def needs_oversubscribe(request: AllocationRequest, flavor: Flavor) -> bool:
    """Whether a node gets more ranks than the slots PBS lists for it.

    PBS Pro lists ``mpiprocs`` slots per chunk, one per rank, so never. Torque lists
    ``ppn`` slots per node; with ``overcommit`` that can be fewer than the ranks, and
    the script then allows the MPI launcher to place more ranks than slots.
    """
    if flavor == "pro" or not request.overcommit:
        return False
    return ranks_per_node(request) > cpus_per_node(request)


def validate_extra_directive(text: str, *, setting: str = "extra_directives") -> str:
    """Return ``text`` if it is one PBS option (``-r n``, ``-l place=excl``, ``-V``).

    Raises
    ------
    ProfileError
        ``text`` holds a line break or NUL (which would inject another script line), or
        is not one single-letter option with at most one plain value.
    """
    _split_extra(text, setting)
    return text


def _split_extra(text: str, setting: str = "extra_directives") -> tuple[str, str]:
    """(option letter, value) of a valid extra directive; ProfileError otherwise."""
    refuse_line_breaks(text, setting)
    match = _EXTRA_DIRECTIVE.fullmatch(text)
    if match is None:
        raise ProfileError(
            f"{setting} entry {text!r} is not a single PBS option like '-l place=excl'",
            hint=(
                "write one option per entry as '-x' or '-x value', with no spaces, quotes "
                "or backslashes in the value; use the profile's typed settings (partition, "
                "account, walltime, ...) where one exists"
            ),
        )
    return match.group(1), match.group(2) or ""


def _resource_names(value: str) -> set[str]:
    """Resource names in a ``-l`` value: ``select=2:ncpus=4,walltime=1:00:00`` →
    select, ncpus, walltime (chunk resources count too)."""
    return set(_RESOURCE_NAME.findall(value))


def _extra_resources(request: AllocationRequest) -> set[str]:
    """Names of the ``-l`` resources the profile's extra directives ask for."""
    names: set[str] = set()
    for text in request.extra_directives:
        option, value = _split_extra(text)
        if option == "l":
            names |= _resource_names(value)
    return names


def _check_not_typed(text: str, emitted: set[str], resources: set[str]) -> None:
    """Refuse an extra directive that repeats an option or resource hpcflow computes."""
    option, value = _split_extra(text)
    if option in _TYPED_OPTIONS and option in emitted:
        raise ProfileError(
            f"extra directive {text!r} repeats an option hpcflow already sets",
            hint=f"use the {_TYPED_OPTIONS[option]} setting instead of an extra directive",
        )
    if option != "l":
        return
    # select and nodes both say where the ranks go: one of them is always emitted.
    shape = {"select", "nodes"}
    for key in sorted(_resource_names(value), key=lambda name: (name not in shape, name)):
        if key in resources or (key in shape and resources & shape):
            raise ProfileError(
                f"extra directive {text!r} repeats the resource {key!r} hpcflow already asks for",
                hint=f"use the {_TYPED_RESOURCES.get(key, key)} setting(s) instead",
            )


# -- output parsers -------------------------------------------------------------


def parse_qsub_id(stdout: str) -> str:
    """The job id qsub printed: ``123``, ``123.server`` or ``123[].server`` (arrays)."""
    hint = "is 'qsub' a wrapper that changes its output? hpcflow reads the last line"
    return batch.match_last_line(stdout, _JOB_ID, "qsub", hint).group(0)


def _qsub_message(text: str) -> str:
    """The error lines without prefixes and the SLURM wrapper's framing, each once, joined."""
    lines = (without_prefix(slurm_wrapper.unframe(line), _MESSAGE_PREFIXES, " :")
             for line in text.splitlines())  # fmt: skip
    return "; ".join(dict.fromkeys(line for line in lines if line))


class _IdIndex:
    """Matches the ids qstat prints to the ids asked for: exactly, or by the sequence
    number when the server spells its name differently (``123.pbs`` vs
    ``123.pbs.example.org``, or a bare ``123``)."""

    def __init__(self, wanted: Iterable[str]) -> None:
        self.exact = set(wanted)
        self.by_number: dict[str, str] = {}
        for native_id in self.exact:
            self.by_number.setdefault(native_id.split(".", 1)[0], native_id)

    def find(self, printed: str) -> str | None:
        printed = printed.strip()
        if printed in self.exact:
            return printed
        return self.by_number.get(printed.split(".", 1)[0])


def _status(
    native_id: str,
    letter: str,
    exit_status: int | None,
    comment: str | None,
    exec_host: str | None,
    flavor: Flavor,
) -> AllocationStatus:
    letter = letter.strip().upper()
    if is_final(letter):
        state, exit_code, reason = final_outcome(exit_status, flavor)
    else:
        state, exit_code = to_state(letter), None
        reason = describe_waiting(letter, comment) if state is AllocationState.QUEUED else None
    return AllocationStatus(
        native_id=native_id,
        state=state,
        native_state=letter,
        reason=reason,
        exit_code=exit_code,
        nodes=hosts(exec_host),
    )


def hosts(exec_host: str | None) -> str | None:
    """Node names from ``exec_host`` (``n1/0*2+n2/0*2`` or ``n1/2``), comma-joined."""
    if not exec_host or exec_host.strip() in ("", "--"):
        return None
    names = [part.split("/", 1)[0].strip() for part in exec_host.split("+")]
    return ",".join(dict.fromkeys(name for name in names if name)) or None


def _int_or_none(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def parse_qstat_json(
    stdout: str, wanted: Iterable[str], flavor: Flavor = "pro"
) -> dict[str, AllocationStatus]:
    """Statuses from PBS Pro's ``qstat -f -F json -x``, for the ``wanted`` ids only."""
    if not stdout.strip():
        return {}
    try:
        data = json.loads(stdout)
    except json.JSONDecodeError as exc:
        raise SchedulerCommandError(
            ("qstat", "-f", "-F", "json"), 0, stdout[-2000:], f"qstat printed invalid JSON: {exc}"
        ) from exc
    index = _IdIndex(wanted)
    statuses: dict[str, AllocationStatus] = {}
    for printed, job in (data.get("Jobs") or {}).items():
        native_id = index.find(printed)
        if native_id is None or not isinstance(job, dict):
            continue
        statuses[native_id] = _status(
            native_id, str(job.get("job_state", "")), _int_or_none(job.get("Exit_status")),
            job.get("comment"), job.get("exec_host"), flavor,
        )  # fmt: skip
    return statuses


def parse_qstat_full(
    stdout: str, wanted: Iterable[str], flavor: Flavor = "torque"
) -> dict[str, AllocationStatus]:
    """Statuses from the text ``qstat -f`` (Torque, PBS Pro, SLURM's wrapper).

    A job starts at ``Job Id: ID``; attributes are indented ``name = value`` lines; a
    long value continues on lines indented differently (PBS Pro and Torque wrap at 80
    columns with a tab). Attribute names are compared case-insensitively
    (``exit_status`` in Torque, ``Exit_status`` in PBS Pro).
    """
    index = _IdIndex(wanted)
    statuses: dict[str, AllocationStatus] = {}
    for printed, attributes in _full_blocks(stdout):
        native_id = index.find(printed)
        if native_id is None:
            continue
        statuses[native_id] = _status(
            native_id, attributes.get("job_state", ""),
            _int_or_none(attributes["exit_status"]) if "exit_status" in attributes else None,
            attributes.get("comment"), attributes.get("exec_host"), flavor,
        )  # fmt: skip
    return statuses


def _full_blocks(stdout: str) -> list[tuple[str, dict[str, str]]]:
    blocks: list[tuple[str, dict[str, str]]] = []
    attributes: dict[str, str] = {}
    indent: str | None = None
    last: str | None = None
    for line in stdout.splitlines():
        if line.startswith("Job Id:"):
            attributes, indent, last = {}, None, None
            blocks.append((line[len("Job Id:") :].strip(), attributes))
            continue
        if not blocks or not line.strip():
            continue
        stripped = line.lstrip()
        lead = line[: len(line) - len(stripped)]
        name, sep, value = stripped.partition(" = ")
        if sep and (indent is None or lead == indent) and " " not in name:
            indent = indent if indent is not None else lead
            last = name.lower()
            attributes[last] = value.strip()
        elif last is not None:
            attributes[last] += stripped.strip()
    return blocks


def parse_qstat_table(stdout: str, wanted: Iterable[str]) -> dict[str, AllocationStatus]:
    """Statuses from the one-line-per-job ``qstat IDS`` table (state letter only).

    Columns: Job id, Name, User, Time Use, S, Queue; the state is the next-to-last.
    """
    index = _IdIndex(wanted)
    statuses: dict[str, AllocationStatus] = {}
    for line in stdout.splitlines():
        fields = line.split()
        if len(fields) < 3 or fields[0] in ("Job", "Job id") or set(fields[0]) <= {"-"}:
            continue
        native_id = index.find(fields[0])
        if native_id is not None:
            statuses[native_id] = _status(native_id, fields[-2], None, None, None, "torque")
    return statuses
