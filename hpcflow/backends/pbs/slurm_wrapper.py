"""PBS commands that are SLURM's qsub/qstat wrappers (the test cluster, and sites that run them).

SLURM ships ``qsub``, ``qstat`` and ``qdel`` that translate to sbatch, squeue and scancel
(Debian's slurm-wlm-torque: Perl scripts; samples in tests/unit/backends/samples/pbs).
They speak Torque's text formats, but differ from a real PBS server in ways the PBS
backend has to allow for; everything it does only because of them is named here, so
that it reads as a quirk of one kind of installation rather than as a PBS rule:

* ``qsub`` passes sbatch's error messages through, on **stdout**, framed by lines of its
  own and quoted: both streams are read, the framing is dropped, and sbatch's messages
  are sorted with sbatch's own tables (:data:`TRANSIENT_ERRORS`, :data:`PERMANENT_ERRORS`).
* ``qsub`` ignores the script's ``#PBS -o``/``-e`` lines (it always passes its own to
  sbatch), so the log paths go on its command line too (:func:`log_options`).
* It joins its arguments into ONE shell command line (Perl backticks): the paths given
  to it must be plain (the PBS backend's ``qsub_path`` refuses the others).
* What the PBS backend reads generically, but meets in this form only here: ``qsub``
  prints a bare id (``123``, no ``.server``); ``qstat`` never reports an exit status (an
  ended job is ``C``; see :data:`hpcflow.backends.pbs.states.NO_EXIT_STATUS`) and
  refuses ``-F json`` like a Torque ``qstat``; ``qdel`` of an ended or unknown job exits
  non-zero without a word.
"""

from __future__ import annotations

from hpcflow.backends._commands import CommandResult
from hpcflow.backends._submit_errors import (
    SBATCH_PERMANENT_ERRORS,
    SBATCH_PREFIXES,
    SBATCH_TRANSIENT_ERRORS,
)

#: sbatch's messages that the wrapper passes through: worth retrying, or fixed by a
#: profile setting.
TRANSIENT_ERRORS = SBATCH_TRANSIENT_ERRORS
PERMANENT_ERRORS = SBATCH_PERMANENT_ERRORS
#: What sbatch writes before each of those messages.
MESSAGE_PREFIXES = SBATCH_PREFIXES

#: Lines the wrapper puts around sbatch's error message.
FRAMING = ("There was an error running the Slurm sbatch command.", "The command was:",
           "and the output was:")  # fmt: skip


def submit_error_text(result: CommandResult) -> str:
    """The output of a failed ``qsub`` to search: stderr (PBS), then stdout (the wrapper)."""
    return f"{result.stderr}\n{result.stdout}"


def unframe(line: str) -> str:
    """``line`` without the quotes the wrapper puts around sbatch's command and output;
    empty for the wrapper's framing lines and for the sbatch command line it ran."""
    item = line.strip().strip("'").strip()
    return "" if item in FRAMING or item.startswith("/") else item


def log_options(stdout: str, stderr: str) -> list[str]:
    """``qsub`` options for the log paths, which the wrapper reads from its command line
    only; a real PBS reads them there too (and lets them win over ``#PBS`` lines)."""
    return ["-o", stdout, "-e", stderr]
