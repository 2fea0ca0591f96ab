"""Who a run's driver is, precisely enough to signal it safely.

A pid names a process only on one kernel, in one PID namespace, and only until the
process ends and the number is handed out again. A driver inside an allocation runs on a
compute node whose pids mean nothing on the login node, even when the two machines share
a host name (containers, test clusters, sloppy DNS). So a run records its driver as host
name, boot id, PID namespace, pid and the process's start time, and a process is "the
run's own" only when all five match here and now.
"""

from __future__ import annotations

import os
import socket
from dataclasses import asdict, dataclass
from typing import Any

#: The environment variable that marks a process as a task (or a task's descendant) of
#: one owner process: its value is the owner's token (:mod:`hpcflow.worker.guardian`).
MARK_VAR = "HPCFLOW_TASKS_OF"


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), None if there is none."""
    stat = _read(f"/proc/{pid}/stat")
    if not stat:
        return None
    # The command name is in parentheses and may hold spaces: fields follow the last ")".
    fields = stat.rsplit(")", 1)[-1].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


@dataclass(frozen=True)
class ProcessIdentity:
    """One process, as another process may recognise it later."""

    host: str
    boot_id: str
    pid_namespace: str
    pid: int
    start_ticks: int | None

    @classmethod
    def current(cls) -> ProcessIdentity:
        pid = os.getpid()
        return cls(
            socket.gethostname(),
            _read("/proc/sys/kernel/random/boot_id"),
            _pid_namespace(),
            pid,
            _start_ticks(pid),
        )

    @classmethod
    def from_meta(cls, value: Any) -> ProcessIdentity | None:
        """The identity a run recorded (None when missing or malformed)."""
        if not isinstance(value, dict):
            return None
        try:
            return cls(
                str(value["host"]),
                str(value["boot_id"]),
                str(value["pid_namespace"]),
                int(value["pid"]),
                None if value.get("start_ticks") is None else int(value["start_ticks"]),
            )
        except (KeyError, TypeError, ValueError):
            return None

    def to_meta(self) -> dict[str, Any]:
        return asdict(self)

    def on_this_machine(self) -> bool:
        """Whether this identity's pid means the same here: same host name, same boot of
        the same kernel, same PID namespace."""
        here = ProcessIdentity.current()
        return (
            self.host == here.host
            and bool(self.boot_id)
            and self.boot_id == here.boot_id
            and self.pid_namespace == here.pid_namespace
        )

    def alive_here(self) -> bool:
        """Whether this very process runs here now (its pid not reused since)."""
        if not self.on_this_machine() or self.start_ticks is None:
            return False
        return _start_ticks(self.pid) == self.start_ticks
