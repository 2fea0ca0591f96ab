"""A ``script:`` rule's Python in a fork of its job's process, not a fresh interpreter.

Snakemake runs a Python ``script:`` (and a Python ``wrapper:``, which is a script) as
``bash -c "set -euo pipefail; PYTHON SCRIPT"``: a fresh interpreter whose preamble
unpickles the rule's ``snakemake`` object, which imports part of Snakemake again (about
0.1 s of CPU per job). In the warm runner's child Snakemake is already imported, so
:func:`install` replaces ``PythonScript.execute_script`` there: the job's process forks,
the fork is made to look like a fresh interpreter (the environment Snakemake's ``shell``
would give it, default signal handlers, fresh standard streams, no inherited exit
handlers, logging or warning filters) and runs the script file as ``__main__``. The job's
process waits for it and fails the way Snakemake's ``shell`` would
(``CalledProcessError``, with the command Snakemake would have run). The fork stays in
the job's process group, so cancelling the job stops it.

Where the fork could not honour the script, Snakemake's own ``execute_script`` runs (see
:func:`why_not_forked`): a container, a Conda environment or environment modules (the
script's interpreter is another one), a ``benchmark:`` (which measures the script's
process: a fork of a large process would report that process's memory), a notebook
being edited, a shell prefix or suffix set in the Snakefile, or a ``shell_exec``
resource (both wrap the interpreter in commands of their own).

The job's process runs Snakemake's threads; the fork is taken from the thread that runs
the job. Locks other threads might hold are not used in the fork: its standard streams,
logging handlers and Snakemake's shell registry are new objects.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures.thread
import logging
import os
import runpy
import shlex
import signal
import subprocess
import sys
import threading
import traceback
import warnings
from typing import IO, Any, NoReturn

log = logging.getLogger(__name__)

#: The warning filters of a fresh interpreter (this module is imported before Snakemake).
_FRESH_WARNING_FILTERS = list(warnings.filters)

#: Variables Snakemake's ``shell`` sets to the job's threads for the commands it runs.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "GOTO_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
TMPDIR_VARIABLES = ("TMPDIR", "TMP", "TEMPDIR", "TEMP")


def install() -> None:
    """Run Python scripts forked from now on, in this process and the ones it forks."""
    from snakemake.script import PythonScript

    original = PythonScript.execute_script

    def execute_script(script: Any, fname: str, edit: bool = False) -> None:
        reason = why_not_forked(script, edit)
        if reason:
            log.debug("script %s runs in a fresh interpreter: %s", fname, reason)
            original(script, fname, edit=edit)
        else:
            run_forked(script, fname)

    PythonScript.execute_script = execute_script  # type: ignore[method-assign]


def why_not_forked(script: Any, edit: bool) -> str:
    """Why ``script`` (a ``PythonScript``) must run as Snakemake runs it; "" if it need not."""
    from snakemake.shell import shell

    if edit:
        return "it is edited"
    if script.container_img is not None:
        return "it runs in a container"
    if script.conda_env is not None:
        return "it runs in a Conda environment"
    if script.env_modules is not None:
        return "it runs with environment modules"
    if script.bench_record is not None:
        return "it is benchmarked"
    if shell._process_prefix or shell._process_suffix:
        return "the Snakefile sets a shell prefix or suffix"
    if (script.resources or {}).get("shell_exec") is not None:
        return "its rule sets shell_exec"
    return ""


def script_environment(script: Any) -> dict[str, str]:
    """The environment Snakemake's ``shell`` gives the commands of ``script``'s job."""
    env = dict(os.environ)
    threads = str(script.threads)
    env.update(dict.fromkeys(THREAD_VARIABLES, threads))
    tmpdir = (script.resources or {}).get("tmpdir")
    if tmpdir:
        env.update(dict.fromkeys(TMPDIR_VARIABLES, str(tmpdir)))
    return env


def run_forked(script: Any, fname: str) -> None:
    """Run the script file ``fname`` in a fork; raise as Snakemake's ``shell`` would."""
    env = script_environment(script)
    # What Snakemake would have run, for its error message.
    command = f"set -euo pipefail;  {sys.executable} {shlex.quote(fname)}"
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    pid = os.fork()
    if pid == 0:
        _child(fname, env)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        code = 128 + os.WTERMSIG(status)  # as bash reports it
    else:
        code = os.waitstatus_to_exitcode(status)
    if code:
        raise subprocess.CalledProcessError(code, command)


def _child(fname: str, env: dict[str, str]) -> NoReturn:
    code = 1
    try:
        _as_fresh_interpreter(fname, env)
        code = _run_main(fname)
    except BaseException:  # in the set-up itself: say what, as an interpreter would
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # a closed pipe: nobody reads what is left
                code = code or 120
        os._exit(code)


def _as_fresh_interpreter(fname: str, env: dict[str, str]) -> None:
    """Make this fork look, to the script, like ``python FNAME`` started anew."""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
                   signal.SIGUSR2, signal.SIGALRM, signal.SIGCHLD):  # fmt: skip
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    os.environ.clear()
    os.environ.update(env)
    for name, fd, mode, errors in (("stdin", 0, "r", None), ("stdout", 1, "w", None),
                                   ("stderr", 2, "w", "backslashreplace")):  # fmt: skip
        stream = _stream(fd, mode, getattr(sys, name), errors)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
    atexit._clear()
    warnings.filters[:] = _FRESH_WARNING_FILTERS  # type: ignore[index]
    warnings._filters_mutated()  # type: ignore[attr-defined]
    # Logging as a fresh import of snakemake.logging finds it: the loggers the job's
    # Snakemake configured have no handlers and their default levels (others, which
    # libraries set up when imported, stay as they are: their imports do not run again).
    logging.root.handlers.clear()
    logging.root.setLevel(logging.WARNING)
    snakemake_logger = logging.getLogger("snakemake.logging")
    snakemake_logger.handlers.clear()
    snakemake_logger.setLevel(logging.NOTSET)
    snakemake_logger.propagate = True
    snakemake_logger.disabled = False
    # The job's thread runs an asyncio loop, and its process thread pools whose exit
    # handler would join them: neither exists for the script.
    asyncio.events._set_running_loop(None)
    asyncio.set_event_loop_policy(None)
    concurrent.futures.thread._threads_queues.clear()  # type: ignore[attr-defined]
    from snakemake.shell import shell

    shell._processes = {}
    shell._lock = threading.Lock()
    sys.argv = [fname]
    sys.path.insert(0, os.path.dirname(os.path.abspath(fname)))


def _stream(fd: int, mode: str, like: Any, errors: str | None) -> IO[str]:
    """A new text stream on ``fd`` with ``like``'s encoding (stderr: line-buffered)."""
    encoding = getattr(like, "encoding", None) or "utf-8"
    errors = errors or getattr(like, "errors", None) or "strict"
    buffering = 1 if fd == 2 else -1
    return open(fd, mode, buffering=buffering, encoding=encoding, errors=errors, closefd=False)


def _run_main(fname: str) -> int:
    """Run ``fname`` as ``__main__``; the exit status ``python FNAME`` would have."""
    try:
        runpy.run_path(fname, run_name="__main__")
    except SystemExit as exc:
        code = _exit_status(exc)
    except BaseException as exc:
        _print_traceback(exc)
        code = 1
    else:
        code = 0
    # What the interpreter does before it ends: wait for threads, run exit handlers.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    return code


def _exit_status(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def _print_traceback(exc: BaseException) -> None:
    """The traceback ``python FNAME`` would print: without this module's and runpy's
    frames above the script's."""
    ours = {__file__, runpy.__file__, "<frozen runpy>"}
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename in ours:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb or exc.__traceback__)
