"""Several tiny shell tasks run by one shell, each still a process group of its own.

Starting ``bash -c CMD`` costs about 1 ms of exec and start-up per task, more than a
tiny task itself (``echo i > out_i.txt``). Here one ``bash`` runs a chunk's shell tasks
one after another, each as a background job of a job-control shell (``set -m``): a
forked subshell in a process group of its own, with stdin from ``/dev/null``, the
task's folder and environment, and its stragglers killed when it ends — what a
separate ``bash -c`` gives, at a fork's cost instead of an exec's.

The shell reports on a status pipe when each task has started (its time and process
group) and when it ends (its exit status and time); after each task it writes an end mark on
its stdout and stderr, so the driver can split the two streams into the tasks' own log
files, created only when a task wrote something. Inputs are checked, stale outputs
removed, outputs checked and failed outputs quarantined per task, as for any task
(:func:`hpcflow.runtime.execute.prepare_call` / ``conclude_call``). Not kept: the peak
memory of each task (the shell cannot tell it).

Only shell tasks without a timeout (a timeout needs its own timer process) and with
plain environment variable names take part, and only with bash 5 or newer (for
``$EPOCHREALTIME``); everything else runs one process per task.
"""

from __future__ import annotations

import functools
import os
import re
import secrets
import select
import shlex
import signal
import subprocess
import time
from collections.abc import Sequence

from hpcflow.runtime.calls import Outcome, TaskCall
from hpcflow.runtime.execute import (
    LIVE,
    LazyFile,
    _signal_group,
    cancelled,
    conclude_call,
    prepare_call,
)

#: Fewest shell tasks worth one shell.
MIN_BATCH = 2
#: Largest script handed to one shell (the kernel limits one argument to 128 KiB).
MAX_SCRIPT = 96 * 1024

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@functools.lru_cache(maxsize=1)
def bash_supports_batches() -> bool:
    """Whether ``bash`` here is 5 or newer (``$EPOCHREALTIME``)."""
    try:
        out = subprocess.run(
            ["bash", "-c", "echo ${BASH_VERSINFO[0]}"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return False
    return out.isdigit() and int(out) >= 5


def _fits(call: TaskCall) -> bool:
    return (
        call.kind == "shell"
        and call.timeout is None
        and all(_NAME.fullmatch(name) for name in (call.env or {}))
    )


def batchable(calls: Sequence[TaskCall]) -> list[TaskCall]:
    """The calls of a chunk that run together in shells (none if too few)."""
    together = [c for c in calls if _fits(c)]
    if len(together) < MIN_BATCH or not bash_supports_batches():
        return []
    return together


def _task_lines(k: int, call: TaskCall, mark: str) -> str:
    exports = "".join(
        f"export {name}={shlex.quote(value)}; " for name, value in (call.env or {}).items()
    )
    workdir = shlex.quote(call.workdir)
    body = f"cd -- {workdir} || exit 1; {exports}eval {shlex.quote(call.command or '')}"
    # $__hpcflow_s is the status pipe, $__hpcflow_e the stderr pipe: the shell's own
    # stderr (job-control notices such as "[1]+ Done") goes to /dev/null.
    return (
        f'( {body}\n) 2>&"$__hpcflow_e" {{__hpcflow_s}}>&- {{__hpcflow_e}}>&- &\n'
        "__hpcflow_p=$!\n"
        f'printf \'S %d %s %d\\n\' {k} "$EPOCHREALTIME" "$__hpcflow_p" >&"$__hpcflow_s"\n'
        'wait "$__hpcflow_p"; __hpcflow_rc=$?\n'
        'kill -KILL -- "-$__hpcflow_p"\n'
        f"printf '{mark}'; printf '{mark}' >&\"$__hpcflow_e\"\n"
        f'printf \'E %d %d %s\\n\' {k} "$__hpcflow_rc" "$EPOCHREALTIME" >&"$__hpcflow_s"\n'
    )


#: Job control on (each task its own process group); the tasks' stderr kept on a new
#: descriptor and the shell's own pointed at /dev/null.
_PROLOGUE = "set -m\nexec {__hpcflow_e}>&2 2>/dev/null\n"


def _scripts(calls: list[TaskCall], mark: str) -> list[tuple[list[TaskCall], str]]:
    """The calls cut into scripts of at most MAX_SCRIPT bytes (a huge command alone)."""
    out: list[tuple[list[TaskCall], str]] = []
    group: list[TaskCall] = []
    parts: list[str] = []
    size = 0
    for call in calls:
        lines = _task_lines(len(group), call, mark)
        if group and size + len(lines) > MAX_SCRIPT:
            out.append((group, _PROLOGUE + "".join(parts)))
            group, parts, size = [], [], 0
            lines = _task_lines(0, call, mark)
        group.append(call)
        parts.append(lines)
        size += len(lines)
    if group:
        out.append((group, _PROLOGUE + "".join(parts)))
    return out


def run_batch(calls: list[TaskCall]) -> list[Outcome]:
    """Run shell ``calls`` in as few shells as fit; one outcome each, in order."""
    outcomes: list[Outcome] = []
    ready: list[tuple[TaskCall, dict[str, list[int]]]] = []
    for call in calls:
        if LIVE.cancelled:
            outcomes.append(cancelled(call, time.time()))
            continue
        try:
            inputs_sig, failed = prepare_call(call)
        except OSError as exc:
            now = time.time()
            outcomes.append(
                Outcome(call.index, call.attempt, "failed", None, now, now,
                        message=f"cannot start: {exc}")
            )  # fmt: skip
            continue
        if failed is not None:
            outcomes.append(failed)
        else:
            ready.append((call, inputs_sig))
    mark = f"\\0hpcflow-end-{secrets.token_hex(8)}\\n"
    signatures = {call.index: sig for call, sig in ready}
    for group, script in _scripts([call for call, _ in ready], mark):
        if LIVE.cancelled:
            outcomes.extend(cancelled(call, time.time()) for call in group)
            continue
        outcomes.extend(_run_script(group, script, mark, signatures))
    order = {call.index: k for k, call in enumerate(calls)}
    return sorted(outcomes, key=lambda o: order[o.index])


class _Splitter:
    """Cuts one output stream at the end marks into the tasks' lazily made log files."""

    def __init__(self, mark: bytes, paths: list[str]) -> None:
        self.mark = mark
        self.paths = paths
        self.task = 0
        self.sink: LazyFile | None = LazyFile(paths[0]) if paths else None
        self.pending = b""

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
        # Keep back only a tail that could be the start of a mark cut by the read.
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
        self.sink = LazyFile(self.paths[self.task]) if self.task < len(self.paths) else None


def _run_script(
    group: list[TaskCall], script: str, mark: str, signatures: dict[int, dict[str, list[int]]]
) -> list[Outcome]:
    status_read, status_write = os.pipe()
    try:
        proc = subprocess.Popen(
            ["bash", "-c", f"__hpcflow_s={status_write}\n{script}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(status_write,),
            start_new_session=True,
        )
    except OSError as exc:
        os.close(status_read)
        os.close(status_write)
        now = time.time()
        return [
            Outcome(c.index, c.attempt, "failed", None, now, now, message=f"cannot start: {exc}")
            for c in group
        ]
    os.close(status_write)
    LIVE.add(proc.pid)
    marks = mark.replace("\\0", "\0").replace("\\n", "\n").encode()
    out = _Splitter(marks, [c.stdout for c in group])
    err = _Splitter(marks, [c.stderr for c in group])
    started: dict[int, float] = {}
    ended: dict[int, tuple[int, float]] = {}
    groups: dict[int, int] = {}
    status_buffer = b""
    if proc.stdout is None or proc.stderr is None:
        raise RuntimeError("the shell's output pipes are missing")
    streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    poller = select.poll()
    for fd in (*streams, status_read):
        poller.register(fd, select.POLLIN)
    open_fds = {*streams, status_read}
    exited = False
    try:
        while open_fds:
            events = poller.poll(100)
            for fd, _event in events:
                data = os.read(fd, 65536)
                if not data:
                    poller.unregister(fd)
                    open_fds.discard(fd)
                    continue
                if fd in streams:
                    streams[fd].feed(data)
                    continue
                status_buffer += data
                *lines, status_buffer = status_buffer.split(b"\n")
                for line in lines:
                    _status_line(line.decode(), started, ended, groups)
            if not events and not exited and proc.poll() is not None:
                exited = True
                _signal_group(proc.pid, signal.SIGKILL)  # stragglers holding the pipes
            elif not events and exited:
                break
        proc.wait()
    finally:
        out.close()
        err.close()
        os.close(status_read)
        proc.stdout.close()
        proc.stderr.close()
        for k, pgid in groups.items():
            if k not in ended:
                # The shell died (a cancel) before it could end this task: its group
                # may have started after the cancel's kill; stop it now.
                _signal_group(pgid, signal.SIGKILL)
            LIVE.discard(pgid)
        LIVE.discard(proc.pid)
    return [
        _outcome(k, call, started, ended, signatures[call.index]) for k, call in enumerate(group)
    ]


def _status_line(
    line: str,
    started: dict[int, float],
    ended: dict[int, tuple[int, float]],
    groups: dict[int, int],
) -> None:
    parts = line.split()
    if len(parts) < 3 or not parts[1].isdigit():
        return
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


def _seconds(text: str) -> float:
    """``$EPOCHREALTIME`` (its decimal point follows the locale)."""
    try:
        return float(text.replace(",", "."))
    except ValueError:
        return time.time()


def _outcome(
    k: int,
    call: TaskCall,
    started: dict[int, float],
    ended: dict[int, tuple[int, float]],
    inputs_sig: dict[str, list[int]],
) -> Outcome:
    begin = started.get(k, time.time())
    if k not in ended:
        if LIVE.cancelled or k not in started:
            return cancelled(call, begin) if LIVE.cancelled else _lost(call, begin)
        return _lost(call, begin)
    code, end = ended[k]
    message = None
    if code:
        message = f"exited with {code}"
        if code > 128 and (code - 128) in signal.valid_signals():
            message += f" (128 + {signal.Signals(code - 128).name}: killed by a signal)"
    return conclude_call(call, begin, code, None, message, inputs_sig, ended=end)


def _lost(call: TaskCall, started: float) -> Outcome:
    now = time.time()
    return Outcome(
        call.index, call.attempt, "failed", None, started, now,
        message="the shell running this task ended before it did",
    )  # fmt: skip
