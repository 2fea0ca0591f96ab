"""Long-lived job-control shells that run chunks of shell tasks, and their protocol.

Each process that runs tasks (the driver with the pool engine, or a Dask worker) keeps a
few ``bash`` shells (``set -m``) alive for the whole run, one per chunk running at once,
in :data:`SHELLS`. A chunk's tasks are written to a small script file in a private
folder; the shell reads the file's path on its command pipe, sources it and runs the
tasks one after another, each as a background job: a forked subshell in a process group
of its own, with stdin from ``/dev/null``, the task's folder and environment, and its
stragglers killed when it ends — what a separate ``bash -c`` gives, at a fork's cost,
and no new shell per chunk either.

The shell reports on a status pipe when each task has started (its time and process
group), when it ends (its exit status and time) and when the chunk is done (``D``);
after each task it writes an end mark on its stdout and stderr, so :class:`LogSplitter`
can cut the two streams into the tasks' own log files, created only when a task wrote
something. A process a task started in a session of its own (``setsid``) escapes the
kill at its end, as it would escape a ``bash -c`` of its own; what it writes to its
inherited stdout later lands in a later task's log of the same shell.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import secrets
import select
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable

from hpcflow.worker.calls import TaskCall
from hpcflow.worker.groups import LIVE, signal_group
from hpcflow.worker.guardian import GUARDIAN
from hpcflow.worker.leaders import note_leader
from hpcflow.worker.worker_logs import Sink, open_sink

log = logging.getLogger(__name__)

#: Most idle shells kept per process (one per chunk running at once is enough).
MAX_IDLE_SHELLS = 64

#: The line before each task of a chunk script: the chunk ends, starting nothing more,
#: once its stop file (the script's path + ``.stop``) exists. A cancel makes that file
#: before it signals any task (:func:`_stop_chunks`), so the end of the task it kills
#: can never let the shell start the next one.
_GATE = '[[ -e "$__hpcflow_f.stop" ]] && return\n'


def folder_lines(call: TaskCall) -> str:
    """The lines that make ``call``'s output folders, where missing, right before it
    starts (a builtin test each; ``mkdir`` only for one that is gone): the worker made
    them when the chunk began, but an earlier task of the chunk may have removed one."""
    folders = dict.fromkeys(os.path.dirname(path) for path in call.outputs)
    return "".join(
        f"[[ -d {q} ]] || mkdir -p -- {q} 2>/dev/null\n"
        for q in (shlex.quote(folder) for folder in folders if folder)
    )


#: The stop files of the chunks running in this process's shells.
_RUNNING: set[str] = set()
_RUNNING_LOCK = threading.Lock()


def _touch(path: str) -> None:
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))


def _stop_chunks() -> None:
    """Make the stop file of every running chunk (a cancel, before any kill)."""
    with _RUNNING_LOCK:
        for stop in _RUNNING:
            _touch(stop)


LIVE.on_cancel(_stop_chunks)


def task_lines(k: int, call: TaskCall, mark: str) -> str:
    """The script lines that run ``call`` as the chunk's ``k``-th task."""
    exports = "".join(
        f"export {name}={shlex.quote(value)}; " for name, value in (call.env or {}).items()
    )
    workdir = shlex.quote(call.workdir)
    body = f"cd -- {workdir} || exit 1; {exports}eval {shlex.quote(call.command or '')}"
    # $__hpcflow_s is the status pipe, $__hpcflow_e the stderr pipe, $__hpcflow_c the
    # shell's commands: a task sees none of them. The shell's own stderr (job-control
    # notices such as "[1]+ Done") goes to /dev/null, its stdin too (tasks inherit it).
    return (
        f'( {body}\n) 2>&"$__hpcflow_e" {{__hpcflow_s}}>&- {{__hpcflow_e}}>&- '
        "{__hpcflow_c}<&- &\n"
        "__hpcflow_p=$!\n"
        f'printf \'S %d %s %d\\n\' {k} "$EPOCHREALTIME" "$__hpcflow_p" >&"$__hpcflow_s"\n'
        'wait "$__hpcflow_p"; __hpcflow_rc=$?\n'
        'kill -KILL -- "-$__hpcflow_p"\n'
        f"printf '{mark}'; printf '{mark}' >&\"$__hpcflow_e\"\n"
        f'printf \'E %d %d %s\\n\' {k} "$__hpcflow_rc" "$EPOCHREALTIME" >&"$__hpcflow_s"\n'
    )


class LogSplitter:
    """Cuts one output stream at the end marks into the tasks' lazily made log files.

    One per stream of a long-lived shell: :meth:`start` points it at the next chunk's
    logs; bytes that come between chunks (a straggler's) belong to no task and are dropped.
    """

    def __init__(self, mark: bytes) -> None:
        self.mark = mark
        self.paths: list[tuple[str, str]] = []
        self.task = 0
        self.sink: Sink | None = None
        self.pending = b""

    def start(self, paths: list[tuple[str, str]]) -> None:
        """Cut the next chunk's output into ``paths``: (per-task file, per-worker logs
        folder or "") of each task (:func:`hpcflow.worker.worker_logs.open_sink`)."""
        self.paths, self.task, self.pending = paths, 0, b""
        self.sink = open_sink(*paths[0]) if paths else None

    @property
    def done(self) -> bool:
        """Every task of the chunk has had its end mark."""
        return self.task >= len(self.paths)

    def feed(self, data: bytes) -> None:
        buffer = self.pending + data if self.pending else data
        mark, start = self.mark, 0
        while True:
            at = buffer.find(mark, start)
            if at < 0:
                break
            self._write(buffer[start:at])
            start = at + len(mark)
            self._next()
        # Keep back only a tail that could be the start of a mark cut by the read (a mark
        # holds one NUL, its first byte: such a tail starts at the last NUL).
        cut = buffer.rfind(mark[:1], max(start, len(buffer) - len(mark) + 1))
        end = len(buffer) if cut < 0 or not mark.startswith(buffer[cut:]) else cut
        self._write(buffer[start:end])
        self.pending = buffer[end:]

    def close(self) -> None:
        self._write(self.pending)
        self.pending = b""
        if self.sink is not None:
            self.sink.close()
            self.sink = None

    def _write(self, data: bytes) -> None:
        if data and self.sink is not None:
            self.sink.write(data)

    def _next(self) -> None:
        if self.sink is not None:
            self.sink.close()
        self.task += 1
        self.sink = open_sink(*self.paths[self.task]) if self.task < len(self.paths) else None


#: What a shell runs: job control on (each task its own process group); the tasks'
#: stderr kept on a new descriptor, the commands read from another, and the shell's own
#: stdin and stderr pointed at /dev/null; then each line it is sent names a chunk's
#: script to source, after which it says ``D``.
_BOOT = (
    "set -m\n"
    "exec {__hpcflow_e}>&2 2>/dev/null {__hpcflow_c}<&0 </dev/null\n"
    'while IFS= read -r -u "$__hpcflow_c" __hpcflow_f; do\n'
    '  . "$__hpcflow_f"\n'
    "  printf 'D\\n' >&\"$__hpcflow_s\"\n"
    "done\n"
)


class Shell:
    """One long-lived job-control ``bash`` that runs chunk scripts sent to it."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.mark_text = f"\\0hpcflow-end-{secrets.token_hex(8)}\\n"
        mark = self.mark_text.replace("\\0", "\0").replace("\\n", "\n").encode()
        self.chunks = 0
        status_read, status_write = os.pipe()
        try:
            self.proc = subprocess.Popen(
                ["bash", "-c", f"__hpcflow_s={status_write}\n{_BOOT}"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(status_write,),
                start_new_session=True,
                # The shell and every task it runs die with this process.
                env=GUARDIAN.with_env(None),
            )
        except OSError:
            os.close(status_read)
            raise
        finally:
            os.close(status_write)
        GUARDIAN.watch(self.proc.pid)  # its session's group: the shell, and tasks' stragglers
        self.status = status_read
        self.status_buffer = b""
        if self.proc.stdin is None or self.proc.stdout is None or self.proc.stderr is None:
            raise RuntimeError("the shell's pipes are missing")
        self.out = LogSplitter(mark)
        self.err = LogSplitter(mark)
        self.streams = {self.proc.stdout.fileno(): self.out, self.proc.stderr.fileno(): self.err}
        self.poller = select.poll()
        for fd in (*self.streams, status_read):
            self.poller.register(fd, select.POLLIN)
        self.open_fds = {*self.streams, status_read}

    def alive(self) -> bool:
        return self.proc.poll() is None and len(self.open_fds) == 3

    def run(
        self,
        group: list[TaskCall],
        on_end: Callable[[int], None] | None = None,
        started: dict[int, float] | None = None,
        ended: dict[int, tuple[int, float]] | None = None,
    ) -> tuple[dict[int, float], dict[int, tuple[int, float]], bool]:
        """Run ``group``: (start times, (exit status, end time) per task, whether the shell
        finished the chunk and can take another). ``on_end(k)`` is called as soon as the
        ``k``-th task has ended (its exit status is in the returned dict by then), so its
        outcome can be recorded before the chunk is over; ``started`` and ``ended`` are the
        dicts to fill (new ones if not given), which ``on_end`` may read."""
        started = {} if started is None else started
        ended = {} if ended is None else ended
        groups: dict[int, int] = {}
        self.chunks += 1
        path = os.path.join(self.folder, f"chunk-{self.proc.pid}-{self.chunks}.sh")
        script = "".join(
            _GATE + folder_lines(call) + task_lines(k, call, self.mark_text)
            for k, call in enumerate(group)
        )
        self.out.start([(c.stdout, c.logs) for c in group])
        self.err.start([(c.stderr, c.logs) for c in group])
        note_leader(group, self.proc.pid)  # the shell's session holds the chunk's tasks
        # Not in LIVE: a cancel stops the shell through the stop file and kills its tasks'
        # groups; killed, it could leave a task it had just started unknown and running.
        stop = path + ".stop"
        with _RUNNING_LOCK:
            _RUNNING.add(stop)
        if LIVE.cancelled:  # a cancel that came before this chunk was in _RUNNING
            _touch(stop)
        done = False
        try:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(script)
            if self.proc.stdin is None:
                raise RuntimeError("the shell's stdin is missing")
            self.proc.stdin.write(path.encode() + b"\n")
            self.proc.stdin.flush()
            done = self._follow(group, started, ended, groups, on_end)
        except (OSError, ValueError) as exc:  # the shell is gone (its pipe broke)
            log.debug("shell %d: %s", self.proc.pid, exc)
        finally:
            self.out.close()
            self.err.close()
            with _RUNNING_LOCK:
                _RUNNING.discard(stop)
            for name in (path, stop):
                with contextlib.suppress(OSError):
                    os.unlink(name)
            for k, pgid in groups.items():
                if k not in ended:
                    # The shell died before it could end this task: stop its group now.
                    signal_group(pgid, signal.SIGKILL)
                LIVE.discard(pgid)
        return started, ended, done

    def _follow(
        self,
        group: list[TaskCall],
        started: dict[int, float],
        ended: dict[int, tuple[int, float]],
        groups: dict[int, int],
        on_end: Callable[[int], None] | None = None,
    ) -> bool:
        """Read the shell's streams until the chunk is done (True) or the shell is gone."""
        chunk_done = False
        exited = False
        ends = 0  # tasks that ended: each wrote its end marks before saying so
        while self.open_fds:
            if chunk_done and self.out.task >= ends and self.err.task >= ends:
                return True
            events = self.poller.poll(100)
            for fd, _event in events:
                data = os.read(fd, 65536)
                if not data:
                    self.poller.unregister(fd)
                    self.open_fds.discard(fd)
                    continue
                splitter = self.streams.get(fd)
                if splitter is not None:
                    splitter.feed(data)
                    continue
                self.status_buffer += data
                *lines, self.status_buffer = self.status_buffer.split(b"\n")
                for line in lines:
                    if line == b"D":
                        chunk_done = True
                    else:
                        k = _status_line(line.decode(), started, ended, groups)
                        if k is not None:
                            ends += 1
                        if k is not None and on_end is not None:
                            on_end(k)
            if not events and not exited and self.proc.poll() is not None:
                exited = True
                signal_group(self.proc.pid, signal.SIGKILL)  # stragglers holding the pipes
            elif not events and exited:
                break
        return chunk_done and self.out.task >= ends and self.err.task >= ends

    def close(self) -> None:
        """End the shell: no more commands (it exits), or killed if it does not."""
        with contextlib.suppress(OSError, ValueError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            signal_group(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for fd in list(self.open_fds):
            with contextlib.suppress(OSError):
                self.poller.unregister(fd)
        self.open_fds.clear()
        os.close(self.status)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


class ShellPool:
    """This process's idle shells, handed to one chunk at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[Shell] = []
        self._folder: str | None = None
        self._registered = False

    def acquire(self) -> Shell:
        """An idle shell, or a new one."""
        with self._lock:
            while self._idle:
                shell = self._idle.pop()
                if shell.alive():
                    return shell
                shell.close()
            if self._folder is None:
                self._folder = tempfile.mkdtemp(prefix="hpcflow-shells-")
            if not self._registered:
                atexit.register(self.close)
                self._registered = True
            folder = self._folder
        return Shell(folder)

    def release(self, shell: Shell, healthy: bool) -> None:
        """Keep ``shell`` for the next chunk if it finished this one, else end it."""
        if healthy and shell.alive() and not LIVE.cancelled:
            with self._lock:
                if len(self._idle) < MAX_IDLE_SHELLS and self._folder is not None:
                    self._idle.append(shell)
                    return
        shell.close()

    def close(self) -> None:
        """End every idle shell and remove the scripts' folder (at exit, or when the
        engine closes)."""
        with self._lock:
            idle, self._idle = self._idle, []
            folder, self._folder = self._folder, None
        for shell in idle:
            shell.close()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


#: The shells of this process (the driver with the pool engine, or a Dask worker).
SHELLS = ShellPool()


def _status_line(
    line: str,
    started: dict[int, float],
    ended: dict[int, tuple[int, float]],
    groups: dict[int, int],
) -> int | None:
    """Note one status line; the task's number when the line says it ended."""
    parts = line.split()
    if len(parts) < 3 or not parts[1].isdigit():
        return None
    k = int(parts[1])
    if parts[0] == "S":
        started[k] = _seconds(parts[2])
        if len(parts) >= 4 and parts[3].isdigit():
            groups[k] = int(parts[3])
            LIVE.add(groups[k])  # a cancel kills the task's group too
    elif parts[0] == "E" and len(parts) >= 4:
        ended[k] = (int(parts[2]), _seconds(parts[3]))
        if k in groups:
            LIVE.discard(groups[k])
        return k
    return None


def _seconds(text: str) -> float:
    """``$EPOCHREALTIME`` (its decimal point follows the locale)."""
    try:
        return float(text.replace(",", "."))
    except ValueError:
        return time.time()
