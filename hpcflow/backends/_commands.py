"""The one place in hpcflow that runs batch-system commands (sbatch, squeue, qsub...).

Everything goes through :class:`CommandRunner`: argv lists only (never a shell), a
timeout after which the whole process group is killed, and a per-program call count so
tests and benchmarks can say how hard the scheduler was queried. Backends receive a
runner in their constructor; tests build one with the test cluster's environment.
"""

from __future__ import annotations

import collections
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcflow.errors import SchedulerCommandError
from hpcflow.store.process import MARK_VAR

log = logging.getLogger(__name__)

#: Seconds a command may run before it is killed, unless the caller says otherwise.
DEFAULT_TIMEOUT = 60.0

#: Exit status reported for a command we killed at its timeout (as timeout(1) does).
TIMEOUT_RETURNCODE = 124

#: How long to wait for output after killing a timed-out process group.
_REAP_SECONDS = 5.0


class CommandTimedOut(SchedulerCommandError):
    """A batch-system command did not finish within its timeout and was killed.

    A timeout usually means a busy or unreachable controller, so callers treat it as
    transient (worth retrying later), unlike a command that answered with an error.
    """

    def __init__(self, argv: Sequence[str], timeout: float, stdout: str, stderr: str) -> None:
        note = f"killed after {timeout:g} s without finishing"
        super().__init__(argv, TIMEOUT_RETURNCODE, stdout, f"{stderr}\n{note}".strip())
        self.timeout = timeout
        self.message = f"command {' '.join(self.argv)!r} was {note}"
        self.args = (self.message,)
        self.hint = "the batch system did not answer in time: a busy or unreachable controller?"


@dataclass(frozen=True)
class CommandResult:
    """What one finished command printed and returned."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def check(self) -> CommandResult:
        """Return self if the command succeeded, else raise :class:`SchedulerCommandError`."""
        if self.returncode != 0:
            raise SchedulerCommandError(self.argv, self.returncode, self.stdout, self.stderr)
        return self


class CommandRunner:
    """Runs argv lists with a timeout, an environment overlay and call counting.

    Parameters
    ----------
    env
        Variables merged over ``os.environ`` for every command (``os.environ`` is read
        at each call, so later changes to it are seen), e.g. ``{"SLURM_CONF": ...}``.
    timeout
        Default seconds before a command is killed; ``run(timeout=...)`` overrides it.

    Attributes
    ----------
    calls
        How many times each program was started, keyed by its base name
        (``runner.calls["squeue"]``); failed and timed-out calls count too.
    """

    def __init__(
        self, env: Mapping[str, str] | None = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, not {timeout!r}")
        self.env: dict[str, str] = dict(env or {})
        self.timeout = timeout
        self.calls: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        input: str | None = None,
    ) -> CommandResult:
        """Run ``argv`` to completion and return what it printed; never raises on rc != 0.

        Raises
        ------
        CommandTimedOut
            The command ran past ``timeout`` seconds; it and its children were killed.
        SchedulerCommandError
            The program does not exist or cannot be executed (rc 127 / 126, with a hint).
        """
        if isinstance(argv, str):
            raise TypeError("argv must be a sequence of arguments, not a string")
        args = tuple(str(a) for a in argv)
        if not args:
            raise ValueError("empty argv")
        limit = self.timeout if timeout is None else timeout
        program = os.path.basename(args[0])
        with self._lock:
            self.calls[program] += 1
        env = self._environment()
        started = time.monotonic()
        try:
            # A new session gives the command its own process group, so a timeout
            # kills wrapper scripts *and* their children (which would otherwise keep
            # our pipes open and make the read hang).
            proc = subprocess.Popen(
                args,
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                text=True,
                errors="replace",
                start_new_session=True,
            )
        except FileNotFoundError:
            raise _not_runnable(args, 127, "not found", env) from None
        except PermissionError:
            raise _not_runnable(args, 126, "not executable", env) from None
        try:
            stdout, stderr = proc.communicate(input, timeout=limit)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            try:
                stdout, stderr = proc.communicate(timeout=_REAP_SECONDS)
            except subprocess.TimeoutExpired:
                stdout, stderr = "", ""
            seconds = time.monotonic() - started
            log.warning("%s killed after %.1f s (timeout %g s)", program, seconds, limit)
            raise CommandTimedOut(args, limit, stdout or "", stderr or "") from None
        seconds = time.monotonic() - started
        log.debug("%s exited %d in %.3f s: %s", program, proc.returncode, seconds, args)
        return CommandResult(args, proc.returncode, stdout, stderr, seconds)

    def _environment(self) -> dict[str, str]:
        """``os.environ`` with :attr:`env` over it, less the task mark (``MARK_VAR``):
        what a batch command starts (a job, an allocation's ranks) is no task of this
        process, and would otherwise be ended with this process's tasks, or as an earlier
        run's leftovers (a run submitted from inside another run's task, say)."""
        env = {**os.environ, **self.env}
        env.pop(MARK_VAR, None)
        return env

    def spawn(
        self, argv: Sequence[str], *, stdout: Path, stderr: Path, cwd: Path | None = None
    ) -> subprocess.Popen[bytes]:
        """Start a long-running command (its own session) with output to files; not waited."""
        args = tuple(str(a) for a in argv)
        program = os.path.basename(args[0])
        with self._lock:
            self.calls[program] += 1
        env = self._environment()
        with open(stdout, "ab") as out, open(stderr, "ab") as err:
            try:
                return subprocess.Popen(
                    args,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    env=env,
                    cwd=cwd,
                    start_new_session=True,
                )
            except FileNotFoundError:
                raise _not_runnable(args, 127, "not found", env) from None
            except PermissionError:
                raise _not_runnable(args, 126, "not executable", env) from None


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _not_runnable(
    args: tuple[str, ...], returncode: int, what: str, env: Mapping[str, str]
) -> SchedulerCommandError:
    error = SchedulerCommandError(args, returncode, "", f"{args[0]}: {what}")
    error.message = f"cannot run {args[0]!r}: {what}"
    error.args = (error.message,)
    error.hint = (
        f"is the batch system's client installed on this machine and on PATH? "
        f"(PATH={env.get('PATH', '')})"
    )
    return error
