"""Snakemake's job command, read as the warm runner needs it: a pure parser.

Snakemake hands the plugin one shell command per job (``format_job_exec``)::

    [export VAR='value' ... &&] PYTHON -m snakemake --snakefile ... --target-jobs ...
        --allowed-rules ... --cores ... --attempt N ... --mode 'remote'

(in local mode, a local executor to Snakemake, ``--mode 'subprocess' --local-groupid
'local'``).
That command is the contract: :func:`read_job_command` turns it into the argv Snakemake's
own command line would parse (what ``bash`` would make of it), the environment it
declares, and a *key*: the argv without the options that differ from job to job
(:data:`PER_JOB_OPTIONS`). Jobs with one key can share one warm runner, which has loaded
the workflow with exactly those arguments
(:mod:`snakemake_executor_plugin_hpcflow.warm_server`).

Anything this module does not understand is refused with the reason, and the job runs its
command as it is (:class:`NotWarm`): a precommand (``--precommand``, sources deployed
before the job, plugins installed), a job prefix or suffix, shell syntax whose meaning
depends on the shell (``$``, globs, ``~``, backquotes, operators other than the one
``&&`` after the declarations), or a command that is not ``-m snakemake ... --mode
remote`` or ``--mode subprocess``. Standard library only: the worker side imports it too.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

#: Options whose values change from job to job; everything else is the same for every
#: job of a Snakemake run (``general_args``), and is what a warm runner is loaded with.
#: Value: how many values follow (``"+"``/``"*"``: up to the next option).
PER_JOB_OPTIONS: dict[str, int | str] = {
    "--target-jobs": "+",
    "--allowed-rules": "+",
    "--local-groupid": 1,
    "--attempt": 1,
    "--force-use-threads": 0,
    "--unneeded-temp-files": "+",
    "--wait-for-files": "*",
    "--wait-for-files-file": 1,
}

#: Characters that mean themselves to bash outside quotes (no globbing, expansion,
#: operators, comments or escapes).
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=,+@%^")
_OPERATOR = "&&"


class NotWarm(ValueError):
    """A job command the warm runner cannot run as the shell would: run it as it is."""


@dataclass(frozen=True)
class JobCommand:
    """One job's command, as the warm runner runs it."""

    #: The interpreter the command starts (``sys.executable`` of Snakemake, or "python").
    python: str
    #: ``export``-ed variables that precede the command, in order.
    env: tuple[tuple[str, str], ...]
    #: Snakemake's arguments: everything after ``-m snakemake``.
    argv: tuple[str, ...]
    #: What jobs sharing a warm runner have in common (a digest of the interpreter, the
    #: environment, the working folder and the argv without the per-job options).
    key: str


def read_job_command(command: str, workdir: str) -> JobCommand:
    """Read ``command`` (Snakemake's ``format_job_exec``) for the warm runner.

    Raises
    ------
    NotWarm
        The command has a part the warm runner does not honour (the message says which).
    """
    words = _words(command)
    env: list[tuple[str, str]] = []
    if words and words[0] == ("export", False):
        try:
            end = words.index((_OPERATOR, True))
        except ValueError:
            raise NotWarm("an export without '&&'") from None
        for word, _ in words[1:end]:
            name, eq, value = word.partition("=")
            if not eq or not name.isidentifier():
                raise NotWarm(f"an export that is not NAME=VALUE: {word!r}")
            env.append((name, value))
        words = words[end + 1 :]
    if any(op for _, op in words):
        raise NotWarm("a precommand or suffix ('&&') besides the environment")
    argv = [word for word, _ in words]
    if len(argv) < 3 or argv[1:3] != ["-m", "snakemake"]:
        raise NotWarm("not 'PYTHON -m snakemake ...'")
    args = tuple(argv[3:])
    if _option_values(args, "--mode") not in (["remote"], ["subprocess"]):
        raise NotWarm("not a job in Snakemake's remote or subprocess mode")
    general = strip_per_job(args)
    digest = hashlib.sha256(
        json.dumps([argv[0], env, workdir, general], separators=(",", ":")).encode()
    ).hexdigest()[:16]
    return JobCommand(python=argv[0], env=tuple(env), argv=args, key=digest)


def strip_per_job(args: tuple[str, ...] | list[str]) -> list[str]:
    """``args`` without the :data:`PER_JOB_OPTIONS` and their values."""
    kept: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        arity = PER_JOB_OPTIONS.get(word)
        if arity is None:
            kept.append(word)
            i += 1
            continue
        i += 1
        if isinstance(arity, int):
            i += arity
        else:
            while i < len(args) and not args[i].startswith("-"):
                i += 1
    return kept


def _option_values(args: tuple[str, ...], option: str) -> list[str] | None:
    """The values that follow the last ``option`` in ``args`` (None if it is absent)."""
    found: list[str] | None = None
    for i, word in enumerate(args):
        if word == option:
            found = []
            for value in args[i + 1 :]:
                if value.startswith("-"):
                    break
                found.append(value)
    return found


def _words(command: str) -> list[tuple[str, bool]]:
    """``command`` split as bash splits it: ``(word, is_operator)`` pairs.

    Only the shell syntax Snakemake writes is accepted: plain words, single quotes
    (literal), double quotes without ``$`` or backquotes (``\\"`` and ``\\\\``
    escapes), and ``&&`` on its own. Anything else raises :class:`NotWarm`.
    """
    words: list[tuple[str, bool]] = []
    i, n = 0, len(command)
    while i < n:
        if command[i] in " \t":
            i += 1
            continue
        if command.startswith(_OPERATOR, i) and (i + 2 == n or command[i + 2] in " \t"):
            words.append((_OPERATOR, True))
            i += 2
            continue
        parts: list[str] = []
        while i < n and command[i] not in " \t":
            char = command[i]
            if char == "'":
                end = command.find("'", i + 1)
                if end < 0:
                    raise NotWarm("an unterminated quote")
                parts.append(command[i + 1 : end])
                i = end + 1
            elif char == '"':
                i, text = _double_quoted(command, i + 1)
                parts.append(text)
            elif char in _PLAIN:
                parts.append(char)
                i += 1
            else:
                raise NotWarm(f"shell syntax the warm runner does not read: {char!r}")
        words.append(("".join(parts), False))
    return words


def _double_quoted(command: str, i: int) -> tuple[int, str]:
    """The text of a double-quoted string starting at ``i`` (after the quote), and the
    index after its closing quote."""
    text: list[str] = []
    while i < len(command):
        char = command[i]
        if char == '"':
            return i + 1, "".join(text)
        if char in "$`":
            raise NotWarm(f"an expansion ({char!r}) inside double quotes")
        if char == "\\":
            following = command[i + 1 : i + 2]
            if following in ('"', "\\"):
                text.append(following)
                i += 2
                continue
            if following in ("$", "`", "\n"):
                raise NotWarm("a backslash escape the warm runner does not read")
        text.append(char)
        i += 1
    raise NotWarm("an unterminated quote")
