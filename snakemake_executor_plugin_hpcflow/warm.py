"""A Snakemake job on an hpcflow worker, through a warm runner.

:func:`run_warm` is what the plugin hands Dask for a job whose command the warm runner
reads (:func:`snakemake_executor_plugin_hpcflow.jobcommand.read_job_command`). The
worker keeps one warm runner (:mod:`snakemake_executor_plugin_hpcflow.warm_server`) per
key: a process that has imported Snakemake and loaded the workflow once, started on the
first job that needs it and kept for the worker's life. For each job the runner forks a
child that runs exactly that job; the worker, here, gives it the job's stdout and stderr
pipes, copies them to the job's log files (created on the first byte, as for every hpcflow
task), registers the child's process group so a cancel or the job's ``runtime`` kills
it, and turns its exit status into the job's :class:`~hpcflow.worker.calls.Outcome`.

Where the warm path cannot honour a job, the job runs Snakemake's own command as before
(:func:`hpcflow.worker.execute.run_call`): the runner cannot be started (its log, in
``RUN_DIR/warm/``, says why; later jobs of that key do not try again), or it answers
that the job's options differ from those it loaded. A runner whose Snakefile or config
changed is replaced by a fresh one; one that died is replaced too. Once a job's child
has started the job is never run a second way: a runner that dies under it fails it
(and Snakemake's ``--retries`` decide).

Standard library and hpcflow's worker code only: Dask workers import this module.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import select
import signal
import socket
import subprocess
import threading
import time
from typing import Any

from hpcflow.worker.calls import Outcome, TaskCall
from hpcflow.worker.execute import cancelled, conclude_call, prepare_call, run_call
from hpcflow.worker.groups import LIVE, Deadline, signal_group
from hpcflow.worker.logfiles import LazyFile, ensure_dir
from snakemake_executor_plugin_hpcflow import warm_protocol as wire
from snakemake_executor_plugin_hpcflow.jobcommand import JobCommand

log = logging.getLogger(__name__)

#: Seconds a warm runner may take to import Snakemake and load the workflow.
STARTUP_SECONDS = 300.0
#: Runners one worker keeps at most (one per Snakefile and options; idle ones go first).
MAX_RUNNERS = 4
#: Seconds the job's pipes are still read after its process ended (stragglers that left
#: its process group may hold them open).
DRAIN_AFTER_EXIT = 2.0


class RunnerFailed(Exception):
    """A warm runner could not be started (the message says why, and where its log is)."""


class WarmRunner:
    """One warm runner process, started for ``command``'s key in ``workdir``."""

    _numbers = itertools.count(1)

    def __init__(self, command: JobCommand, workdir: str, log_dir: str) -> None:
        self.key = command.key
        self.busy = 0
        self.used = time.monotonic()
        self._send_lock = threading.Lock()
        ensure_dir(log_dir)
        host = os.uname().nodename.split(".")[0]
        self.log_path = os.path.join(
            log_dir, f"{host}-{os.getpid()}-{command.key}-{next(self._numbers)}.log"
        )
        self.control, theirs = wire.socket_pair()
        env = dict(os.environ)
        env.update(command.env)
        argv = [command.python, "-m", "snakemake_executor_plugin_hpcflow.warm_server"]
        try:
            with open(self.log_path, "ab") as runner_log:
                self.proc = subprocess.Popen(
                    [*argv, str(theirs.fileno())],
                    pass_fds=(theirs.fileno(),),
                    cwd=workdir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=runner_log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        except OSError as exc:
            self.control.close()
            raise RunnerFailed(f"cannot start {command.python}: {exc}") from None
        finally:
            theirs.close()
        try:
            wire.send(self.control, {"argv": list(command.argv)})
            self.control.settimeout(STARTUP_SECONDS)
            reply, _ = wire.receive(self.control)
        except OSError as exc:
            reply = {"ready": False, "error": str(exc)}
        if not reply or not reply.get("ready"):
            self.close()
            why = (reply or {}).get("error") or "it ended"
            raise RunnerFailed(f"the warm runner did not start ({why}); see {self.log_path}")
        self.control.settimeout(None)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, request: dict[str, Any], out_w: int, err_w: int) -> socket.socket:
        """Hand one job to the runner; returns the socket its answers come on."""
        mine, theirs = wire.socket_pair()
        try:
            with self._send_lock:
                wire.send(self.control, {"job": True}, [theirs.fileno(), out_w, err_w])
            wire.send(mine, request)
        except OSError:
            mine.close()
            raise
        finally:
            theirs.close()
        return mine

    def close(self) -> None:
        """Let the runner go: it ends once it sees its control socket closed."""
        with contextlib.suppress(OSError):
            self.control.close()
        if self.proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=0.1)


class Runners:
    """The warm runners of this worker process, by key."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runners: dict[str, WarmRunner] = {}
        self._starting: dict[str, threading.Lock] = {}
        #: Keys whose runner could not start, and why: their jobs run their command.
        self.broken: dict[str, str] = {}

    def get(self, command: JobCommand, workdir: str, log_dir: str) -> WarmRunner | None:
        """The running runner for ``command``'s key, started if need be; None if none
        can be started for it."""
        with self._lock:
            if command.key in self.broken:
                return None
            starting = self._starting.setdefault(command.key, threading.Lock())
        with starting:
            with self._lock:
                runner = self._runners.get(command.key)
            if runner is not None and runner.alive():
                return runner
            if runner is not None:
                self.drop(runner)
            try:
                runner = WarmRunner(command, workdir, log_dir)
            except RunnerFailed as exc:
                log.warning("%s; its jobs run Snakemake's job command instead", exc)
                with self._lock:
                    self.broken[command.key] = str(exc)
                return None
            with self._lock:
                self._runners[command.key] = runner
                self._evict()
            return runner

    def drop(self, runner: WarmRunner) -> None:
        with self._lock:
            if self._runners.get(runner.key) is runner:
                del self._runners[runner.key]
        runner.close()

    def _evict(self) -> None:
        """Close the least recently used idle runners beyond :data:`MAX_RUNNERS`."""
        idle = sorted((r for r in self._runners.values() if not r.busy), key=lambda r: r.used)
        while len(self._runners) > MAX_RUNNERS and idle:
            runner = idle.pop(0)
            del self._runners[runner.key]
            runner.close()


RUNNERS = Runners()


def run_warm(call: TaskCall, command: JobCommand, log_dir: str) -> list[Outcome]:
    """Run one Snakemake job (``call`` runs its command as it is) through a warm runner
    of this worker, or by its command where the warm path cannot take it."""
    if LIVE.cancelled:
        return [cancelled(call, time.time())]
    outcome = _run_warm(call, command, log_dir)
    return [outcome if outcome is not None else run_call(call)]


def _run_warm(call: TaskCall, command: JobCommand, log_dir: str) -> Outcome | None:
    """The job's outcome, or None when it was not started (run its command instead)."""
    started = time.time()
    inputs_sig, failed = prepare_call(call)
    if failed is not None:
        return failed
    try:
        start = _start(call, command, log_dir)
    except Exception as exc:  # nothing started yet: the job's own command still can
        log.warning("%s could not go to a warm runner (%r); it runs its command", call.task_id, exc)
        return None
    if start is None:
        return None
    runner, sock, pid, out_r, err_r = start
    LIVE.add(pid)
    deadline = Deadline(pid, call.timeout)
    try:
        ended = _follow(sock, pid, out_r, err_r, call.stdout, call.stderr)
    finally:
        deadline.cancel()
        signal_group(pid, signal.SIGKILL)  # stragglers the job left in its group
        LIVE.discard(pid)
        sock.close()
        runner.busy -= 1
        runner.used = time.monotonic()
    if ended is None:
        RUNNERS.drop(runner)
        code, peak = -signal.SIGKILL, None
        message: str | None = f"the warm runner ended during the job (see {runner.log_path})"
    else:
        status, peak = ended
        code = os.waitstatus_to_exitcode(status)
        message = _message(code, call.timeout if deadline.expired.is_set() else None)
        if deadline.expired.is_set() and code == 0:
            code = -signal.SIGTERM
    return conclude_call(call, started, code, peak, message, inputs_sig)


def _start(
    call: TaskCall, command: JobCommand, log_dir: str
) -> tuple[WarmRunner, socket.socket, int, int, int] | None:
    """Have a runner fork the job: (runner, socket, pid, stdout and stderr read ends),
    or None when the job must run its command instead."""
    for _ in range(2):  # a second runner when the first was stale or had died
        runner = RUNNERS.get(command, call.workdir, log_dir)
        if runner is None:
            return None
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        runner.busy += 1
        reply: dict[str, Any] | None = None
        sock: socket.socket | None = None
        try:
            sock = runner.send({"argv": list(command.argv), "env": call.env or {}}, out_w, err_w)
            reply, _ = wire.receive(sock)
        except OSError as exc:
            log.info("warm runner %s did not take a job: %s", runner.log_path, exc)
        finally:
            os.close(out_w)
            os.close(err_w)
        if reply is not None and sock is not None and "pid" in reply:
            return runner, sock, int(reply["pid"]), out_r, err_r
        runner.busy -= 1
        for fd in (out_r, err_r):
            os.close(fd)
        if sock is not None:
            sock.close()
        if reply is not None and "fallback" in reply:
            log.info("%s runs Snakemake's job command: %s", call.task_id, reply["fallback"])
            return None
        RUNNERS.drop(runner)  # stale, or gone: the next try starts a fresh one
    return None


def _follow(
    sock: socket.socket, pid: int, out_r: int, err_r: int, stdout: str, stderr: str
) -> tuple[int, int | None] | None:
    """Copy the job's output to its log files until it has ended; (wait status, peak
    RSS) as the runner reported them, or None if the runner went away first."""
    sinks = {out_r: LazyFile(stdout), err_r: LazyFile(stderr)}
    poller = select.poll()
    for fd in (*sinks, sock.fileno()):
        poller.register(fd, select.POLLIN)
    ended: tuple[int, int | None] | None = None
    runner_gone = False
    deadline: float | None = None  # set once the runner has said how the job ended
    try:
        while sinks or deadline is None:
            events = poller.poll(100 if deadline is None else 50)
            for fd, _event in events:
                if fd == sock.fileno():
                    poller.unregister(fd)
                    try:
                        message, _ = wire.receive(sock)
                    except OSError:
                        message = None
                    if message is None or "status" not in message:
                        runner_gone = True
                    else:
                        ended = int(message["status"]), message.get("maxrss")
                    signal_group(pid, signal.SIGKILL)  # stragglers holding the pipes
                    deadline = time.monotonic() + DRAIN_AFTER_EXIT
                    continue
                data = os.read(fd, 65536)
                if data:
                    sinks[fd].write(data)
                else:
                    poller.unregister(fd)
                    sinks.pop(fd).close()
                    os.close(fd)
            # After the end: what the job wrote is in the pipes already; stop when idle.
            if deadline is not None and (not events or time.monotonic() > deadline):
                break
    finally:
        for fd, sink in sinks.items():
            sink.close()
            os.close(fd)
    if runner_gone:
        return None
    return ended


def _message(code: int, timeout: float | None) -> str | None:
    """How the worker describes an attempt's end (as for hpcflow's shell tasks)."""
    if timeout is not None:
        return f"timed out after {timeout:g}s"
    if code < 0:
        return f"killed by signal {signal.Signals(-code).name}"
    return f"exited with {code}" if code else None
