"""Runs task attempts on a worker: real subprocesses in their own process groups.

This module is what a Dask worker imports; it keeps to the standard library. A chunk of
calls runs one after another in one worker thread (:func:`hpcflow.worker.chunk.run_chunk`),
so thousands of tiny tasks cost a few Dask round trips instead of thousands.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any, TextIO

from hpcflow.store.atomic import write_text_atomic
from hpcflow.store.states import TaskState
from hpcflow.store.values import load_value, save_value, worker_key
from hpcflow.worker import checkpoints
from hpcflow.worker.calls import Outcome, TaskCall
from hpcflow.worker.confine import may_remove
from hpcflow.worker.gpus import worker_devices
from hpcflow.worker.groups import LIVE, Deadline, signal_group
from hpcflow.worker.guardian import GUARDIAN, MARK_VAR, claim_environment
from hpcflow.worker.journal import note_success
from hpcflow.worker.leaders import note_leader
from hpcflow.worker.logfiles import ensure_dir
from hpcflow.worker.scratch import Scratch
from hpcflow.worker.values import arguments, encode_call, file_stats
from hpcflow.worker.worker_logs import open_sink

#: How the message of an attempt its checkpoint signal stopped begins.
INTERRUPTED_BY = "interrupted by"

#: The node, as the batch system names it (logical test nodes share one host name).
_HOST = os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def cancelled(call: TaskCall, started: float) -> Outcome:
    """The outcome of a call the run's cancel stopped (or never started)."""
    return Outcome(
        index=call.index,
        attempt=call.attempt,
        state=TaskState.CANCELLED,
        exit_code=None,
        started=started,
        ended=time.time(),
        host=_HOST,
        message="run cancelled",
    )


def prepare_call(call: TaskCall) -> tuple[dict[str, list[int]], Outcome | None]:
    """Before an attempt: its inputs' signatures, or a failed outcome when one is
    missing; stale outputs removed and their folders made."""
    started = time.time()
    inputs_sig, missing = file_signatures(call.inputs)
    if missing:
        failed = _finish(
            call,
            started,
            TaskState.FAILED,
            None,
            None,
            "missing input files: " + ", ".join(missing[:5]),
        )
        return inputs_sig, failed
    outside = [path for path in call.outputs if not may_remove(path, call.confine)]
    if outside:
        # (Planning refuses these; this is the last line.)
        message = "outputs outside the workflow, not touched: " + ", ".join(outside[:5])
        return inputs_sig, _finish(call, started, TaskState.FAILED, None, None, message)
    ensure_dir(call.workdir)
    for path in call.outputs:
        # A stale file must never pass for this attempt's output. (Looked up first: an
        # unlink locks the folder even when there is nothing to remove.)
        if os.path.lexists(path):
            try:
                os.unlink(path)
            except (FileNotFoundError, IsADirectoryError, PermissionError):
                pass
        # Made here, on the node that runs the task, now: not only once per process.
        ensure_dir(os.path.dirname(path), fresh=True)
    return inputs_sig, None


def conclude_call(
    call: TaskCall,
    started: float,
    exit_code: int,
    peak: int | None,
    message: str | None,
    inputs_sig: dict[str, list[int]],
    ended: float | None = None,
) -> Outcome:
    """After an attempt ran: its outcome from the exit code and the outputs it left."""
    if LIVE.cancelled and exit_code != 0:
        return _finish(call, started, TaskState.CANCELLED, exit_code, peak, "run cancelled")
    if exit_code != 0 and message and message.startswith(INTERRUPTED_BY):
        return _finish(call, started, TaskState.INTERRUPTED, exit_code, peak, message)
    if exit_code != 0:
        return _finish(call, started, TaskState.FAILED, exit_code, peak, message)
    outputs_sig, missing = file_signatures(call.outputs)
    if missing:
        return _finish(
            call,
            started,
            TaskState.FAILED,
            exit_code,
            peak,
            "exited 0 but did not create: " + ", ".join(missing[:5]),
        )
    outcome = Outcome(
        index=call.index,
        attempt=call.attempt,
        state=TaskState.SUCCEEDED,
        exit_code=0,
        started=started,
        ended=ended if ended is not None else time.time(),
        peak_rss=peak,
        host=_HOST,
        message=None,
        inputs_sig=inputs_sig,
        outputs_sig=outputs_sig,
    )
    note_success(call, outcome)
    return outcome


def in_process(call: TaskCall) -> bool:
    """Whether a python call can run in this process: in-process is fast, but it needs
    the task's directory to be the process's own, no timeout (a thread cannot be
    killed), no other environment, and no choice among several GPUs (a thread cannot
    have its own CUDA_VISIBLE_DEVICES). Otherwise it runs as a child process."""
    return (
        call.kind == "python"
        and call.timeout is None
        and not call.wrap
        and os.getcwd() == call.workdir
        and not (call.gpus and len(worker_devices().devices) > 1)
        and not call.checkpoint_signal  # a thread cannot be sent a signal of its own
    )


@contextmanager
def _devices_for(call: TaskCall) -> Iterator[None]:
    """Hold this worker's GPUs (or a share of one) for ``call``, named in its process's
    CUDA_VISIBLE_DEVICES (:mod:`hpcflow.worker.gpus`)."""
    devices = worker_devices() if call.gpus else None
    if devices is None or not devices.devices:
        yield
        return
    with devices.held(call.gpus) as chosen:
        if chosen:
            call.env = {**(call.env or {}), "CUDA_VISIBLE_DEVICES": ",".join(chosen)}
        yield


def run_call(call: TaskCall, inline: bool = True) -> Outcome:
    """Run one attempt: check inputs, run, check outputs, quarantine them on failure."""
    return run_call_for_value(call, inline)[0]


def run_call_for_value(
    call: TaskCall,
    inline: bool = True,
    given: dict[str, Any] | None = None,
    accept: Callable[[Any], str | None] | None = None,
) -> tuple[Outcome, Any]:
    """:func:`run_call`, and the return value of a python call that ran in this process
    (None otherwise). ``given``: the upstream values the call receives, already here (a
    Dask worker has them); without it they are read from the files ``call`` names.

    ``accept``: asked about the value before the attempt counts as a success (and goes
    into the journal); a reason it returns fails the attempt. With it, a value a child
    process wrote to ``call.value_out`` is loaded and returned too."""
    started = time.time()
    try:
        inputs_sig, failed = prepare_call(call)
        if failed is not None:
            return failed, None
        scratch = Scratch.enter(call) if call.scratch is not None else None
        try:
            exit_code, peak, message, value = _attempt(
                scratch.inner if scratch else call, inline, given, accept
            )
        except BaseException:
            if scratch is not None:
                scratch.leave(False)
            raise
        if scratch is not None:
            refused = scratch.leave(exit_code == 0)
            if refused is not None:
                return _finish(call, started, TaskState.FAILED, exit_code, peak, refused), None
    except OSError as exc:
        return _finish(call, started, TaskState.FAILED, None, None, f"cannot start: {exc}"), None
    outcome = conclude_call(call, started, exit_code, peak, message, inputs_sig)
    if outcome.state != TaskState.SUCCEEDED:
        return outcome, None
    if given is None and (call.received or call.values_in):
        outcome.values = file_stats(call, value, inline and in_process(call))
    return outcome, value


def _attempt(
    call: TaskCall,
    inline: bool,
    given: dict[str, Any] | None,
    accept: Callable[[Any], str | None] | None,
) -> tuple[int, int | None, str | None, Any]:
    """Run ``call`` where it is to run: (exit code, peak memory, message, value)."""
    value = None
    with _devices_for(call):
        if inline and in_process(call):
            exit_code, peak, message, value = _run_python_inline(call, given)
        else:
            exit_code, peak, message = _run_process(call)
            if accept is not None and exit_code == 0 and call.value_out:
                there = os.path.exists(call.value_out)
                value = load_value(call.value_out, worker_key(call.value_key)) if there else None
    if accept is not None and exit_code == 0:
        refused = accept(value)
        if refused is not None:
            exit_code, message, value = 1, refused, None
    return exit_code, peak, message, value


def _finish(
    call: TaskCall,
    started: float,
    state: TaskState,
    exit_code: int | None,
    peak: int | None,
    message: str | None,
) -> Outcome:
    quarantine_outputs(call)
    return Outcome(
        index=call.index,
        attempt=call.attempt,
        state=state,
        exit_code=exit_code,
        started=started,
        ended=time.time(),
        peak_rss=peak,
        host=_HOST,
        message=message,
    )


def file_signatures(paths: tuple[str, ...]) -> tuple[dict[str, list[int]], list[str]]:
    """(size, mtime_ns) of each existing path, and the paths that are missing."""
    sig: dict[str, list[int]] = {}
    missing: list[str] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            missing.append(path)
            continue
        sig[path] = [st.st_size, st.st_mtime_ns]
    return sig, missing


def quarantine_outputs(call: TaskCall) -> None:
    """Move whatever outputs a failed attempt left into the run's quarantine folder."""
    moved = False
    for path in call.outputs:
        if not os.path.lexists(path) or not may_remove(path, call.confine):
            continue
        if not moved:
            os.makedirs(call.quarantine_dir, exist_ok=True)
            moved = True
        target = os.path.join(call.quarantine_dir, os.path.basename(path) or "output")
        try:
            os.replace(path, target)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(path)


def _run_process(call: TaskCall) -> tuple[int, int | None, str | None]:
    if call.kind == "shell":
        argv = ["bash", "-c", call.command or ""]
    elif call.kind == "argv":
        argv = list(call.argv or [])
    else:
        # In a software environment (a container, a venv) its own interpreter, which
        # imports hpcflow's worker code from the zip that PYTHONPATH names.
        argv = [sys.executable, "-m", "hpcflow.worker.pycall"]
        if call.wrap:
            # Every runtime says "not found" its own way: the check makes it 127 with one
            # clear line in the task's log.
            argv = [*call.wrap, "/bin/sh", "-c", _FIND_PYTHON, call.python_exe or "python3"]
    # The task and all it starts die with this process (:mod:`hpcflow.worker.guardian`).
    env = GUARDIAN.with_env(None)
    if call.env:
        env.update(call.env)
    if call.kind == "python":
        ensure_dir(os.path.dirname(call.result), private=True)
    # Pipes, not files: a task that prints nothing leaves no empty log files behind (two
    # file creations per task are most of the per-task cost on a shared file system).
    proc = subprocess.Popen(
        argv,
        # A python task's call (its arguments may be large) goes in on standard input.
        stdin=subprocess.PIPE if call.kind == "python" else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=call.workdir,
        env=env,
        start_new_session=True,
        close_fds=True,
    )
    pgid = proc.pid  # start_new_session: the child leads its own group
    LIVE.add(pgid)
    GUARDIAN.watch(pgid)
    note_leader([call], pgid)
    if call.checkpoint_signal:
        checkpoints.started(call.index, call.attempt, pgid)
    deadline = Deadline(pgid, call.timeout)
    try:
        if proc.stdin is not None:
            _send_call(proc.stdin, call)
        status, usage = _drain_and_wait(proc, call.stdout, call.stderr, call.logs)
    finally:
        deadline.cancel()
        # Kill stragglers the task left in its group (e.g. backgrounded children).
        signal_group(pgid, signal.SIGKILL)
        LIVE.discard(pgid)
        GUARDIAN.forget(pgid)
        interrupted = bool(call.checkpoint_signal) and checkpoints.ended(call.index, call.attempt)
    proc.returncode = os.waitstatus_to_exitcode(status)
    code = proc.returncode
    peak = usage.ru_maxrss * 1024
    if interrupted and code != 0:
        name = signal.Signals(call.checkpoint_signal).name
        return code, peak, f"{INTERRUPTED_BY} {name} before the walltime (exit {code})"
    if deadline.expired.is_set():
        return (code if code != 0 else -signal.SIGTERM), peak, f"timed out after {call.timeout:g}s"
    if code < 0:
        return code, peak, f"killed by signal {signal.Signals(-code).name}"
    if code == 127 and call.kind == "python" and call.wrap:
        return (
            code,
            peak,
            (
                f"exited with 127: no usable {call.python_exe or 'python'} in the task's "
                "environment (see its stderr; a container names its interpreter with "
                "'python:')"
            ),
        )
    return code, peak, (f"exited with {code}" if code else None)


#: Runs ``$0 -m hpcflow.worker.pycall`` inside a task's environment, or exits 127 saying
#: that there is no such interpreter there.
_FIND_PYTHON = (
    'command -v "$0" >/dev/null 2>&1 || '
    '{ echo "hpcflow: no $0 in this environment (a container names its interpreter with '
    "'python:')\" >&2; exit 127; }; "
    'exec "$0" -m hpcflow.worker.pycall'
)


def _send_call(stdin: IO[bytes], call: TaskCall) -> None:
    """Hand a python task's call to its process (which reads it before anything else); a
    process that died first shows as its own exit status, not as an error here."""
    try:
        stdin.write(encode_call(call))
    except BrokenPipeError:
        pass
    finally:
        try:
            stdin.close()
        except BrokenPipeError:
            pass


def _drain_and_wait(
    proc: subprocess.Popen[bytes], stdout: str, stderr: str, logs: str = ""
) -> tuple[int, Any]:
    """Copy the child's output to its log files until it exits; return (status, rusage).

    Stops reading once the child itself has exited (a backgrounded straggler holding the
    pipe open must not keep the task running); the caller kills the rest of the group.
    """
    if proc.stdout is None or proc.stderr is None:
        raise RuntimeError("the task's output pipes are missing")
    sinks = {
        proc.stdout.fileno(): open_sink(stdout, logs),
        proc.stderr.fileno(): open_sink(stderr, logs),
    }
    poller = select.poll()
    for fd in sinks:
        poller.register(fd, select.POLLIN)
    result: tuple[int, int, Any] | None = None
    open_fds = set(sinks)
    try:
        while open_fds:
            events = poller.poll(100)
            for fd, _event in events:
                data = os.read(fd, 65536)
                if data:
                    sinks[fd].write(data)
                else:
                    poller.unregister(fd)
                    open_fds.discard(fd)
            if not events and result is None:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    result = (pid, status, usage)
                    signal_group(proc.pid, signal.SIGKILL)  # stragglers holding the pipes
        if result is None:
            result = os.wait4(proc.pid, 0)
    finally:
        for sink in sinks.values():
            sink.close()
        proc.stdout.close()
        proc.stderr.close()
    return result[1], result[2]


# -- python callables in the worker process -------------------------------------------------


class _ThreadStreams(io.TextIOBase):
    """sys.stdout/err replacement that sends each thread's writes to that thread's file."""

    def __init__(self, fallback: TextIO, local: threading.local, attr: str) -> None:
        self._fallback = fallback
        self._local = local
        self._attr = attr

    def write(self, text: str) -> int:
        target = getattr(self._local, self._attr, None)
        return (target or self._fallback).write(text)

    def flush(self) -> None:
        target = getattr(self._local, self._attr, None)
        (target or self._fallback).flush()


_STREAMS = threading.local()
_STREAMS_LOCK = threading.Lock()
_PATHS_ADDED: set[str] = set()


def _install_streams() -> None:
    with _STREAMS_LOCK:
        if not isinstance(sys.stdout, _ThreadStreams):
            sys.stdout = _ThreadStreams(sys.stdout, _STREAMS, "out")
        if not isinstance(sys.stderr, _ThreadStreams):
            sys.stderr = _ThreadStreams(sys.stderr, _STREAMS, "err")


@contextlib.contextmanager
def _captured(stdout: str, stderr: str, logs: str = "") -> Iterator[None]:
    """Send this thread's prints to the task's logs (written only if non-empty)."""
    _install_streams()
    out, err = io.StringIO(), io.StringIO()
    _STREAMS.out, _STREAMS.err = out, err
    try:
        yield
    finally:
        _STREAMS.out = _STREAMS.err = None
        for path, buffer in ((stdout, out), (stderr, err)):
            if buffer.tell():
                sink = open_sink(path, logs)
                try:
                    sink.write(buffer.getvalue().encode("utf-8", "surrogateescape"))
                finally:
                    sink.close()


def resolve_callable(spec: str, workdir: str) -> Any:
    """Import ``package.module:function`` (the working directory is importable)."""
    with _STREAMS_LOCK:
        if workdir not in _PATHS_ADDED:
            sys.path.insert(0, workdir)
            _PATHS_ADDED.add(workdir)
    module_name, _, attr = spec.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    return target


def call_python(call: TaskCall, workdir: str, given: dict[str, Any] | None = None) -> Any:
    """Call the task's function with its parameters and the upstream values it receives
    (``given``, or read from the files the call names); write the return value to
    ``call.value_out`` if set, and as JSON to ``call.result`` when it is JSON (which it
    must be unless some task receives it). Returns the value."""
    func = resolve_callable(call.python or "", workdir)
    received = given if given is not None else arguments(call.values_in, call.value_key)
    result = func(**(call.kwargs or {}), **received)
    if call.value_out:
        save_value(call.value_out, result, worker_key(call.value_key))
    try:
        text = json.dumps(result)
    except (TypeError, ValueError):
        if not call.received:
            raise
        return result  # a value only other tasks receive (an array, an object): no JSON
    ensure_dir(os.path.dirname(call.result), private=True)
    # Atomic: whoever reads the result (on any node) sees all of it or none of it.
    write_text_atomic(call.result, text, make_parents=False)
    return result


def _run_python_inline(
    call: TaskCall, given: dict[str, Any] | None
) -> tuple[int, int | None, str | None, Any]:
    import traceback

    if MARK_VAR not in os.environ:  # a worker: what the task starts dies with it
        claim_environment()
    note_leader([call], os.getpid())
    with _captured(call.stdout, call.stderr, call.logs):
        try:
            value = call_python(call, call.workdir, given)
        except Exception as exc:  # the task's own error: record it, never crash the worker
            traceback.print_exc()
            return 1, None, f"{type(exc).__name__}: {exc}"[:500], None
    return 0, None, None, value
