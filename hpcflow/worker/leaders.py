"""Who leads each attempt's processes, written where the workflow's next run looks.

A run's tasks die with the process that started them (:mod:`hpcflow.worker.guardian`),
but only if that process's guardian outlives it: a ``kill -9`` of both, or a guardian
that could not start, would leave tasks running, and a re-run would start the same tasks
beside them. So each process that starts attempts writes down, as each starts, the
attempt and the process that leads its processes (the task's own process-group leader,
or the shell that runs a chunk), as host, boot, PID namespace, pid and start time (never
a reused pid), and, once per file, itself and its guardian's mark. The next run of the
workflow reads these records (:mod:`hpcflow.engine.leftovers`) and ends what still runs
before it starts anything.

One append-only file per process and run, beside the run's journal
(``<journal prefix>.<host>.<pid>.leaders``): removed with the journal when the run ends
cleanly. A line is one ``write`` of JSON; a line cut short by a kill is ignored.
Worker side: standard library and :mod:`hpcflow.store.process` only.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Iterable

from hpcflow.store.private import make_dirs
from hpcflow.store.process import ProcessIdentity
from hpcflow.worker.calls import TaskCall
from hpcflow.worker.guardian import current_mark
from hpcflow.worker.lifelines import start_ticks

log = logging.getLogger(__name__)

#: How the records' file names end.
SUFFIX = ".leaders"

_LOCK = threading.Lock()
#: Open record files of this process, by path (a forked child computes its own path).
_FILES: dict[str, int] = {}
_HOST = socket.gethostname().replace("/", "_")


def leaders_file(prefix: str) -> str:
    """This process's record file for the run whose journal prefix is ``prefix``."""
    return f"{prefix}.{_HOST}.{os.getpid()}{SUFFIX}"


def note_leader(calls: Iterable[TaskCall], leader: int) -> None:
    """Write down that process ``leader`` leads the processes of the attempts ``calls``
    (when the run keeps a journal). Never fails a task: without the record a re-run
    relies on the guardian alone."""
    calls = [c for c in calls if c.journal]
    if not calls:
        return
    ticks = start_ticks(leader)
    lines = "".join(
        json.dumps([c.task_id, c.attempt, leader, ticks], separators=(",", ":")) + "\n"
        for c in calls
    )
    path = leaders_file(calls[0].journal)
    try:
        with _LOCK:
            fd = _FILES.get(path)
            if fd is None:
                fd = _open(path)
            os.write(fd, lines.encode("utf-8", "surrogatepass"))
    except OSError as exc:
        log.debug("cannot record the leader of %s: %s", calls[0].task_id, exc)


def _open(path: str) -> int:
    """Open (create) ``path`` and write its first line: who owns it."""
    make_dirs(os.path.dirname(path))  # in the state folder: 0700 whatever the umask
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    owner = {**ProcessIdentity.current().to_meta(), "mark": current_mark()}
    os.write(fd, (json.dumps({"owner": owner}) + "\n").encode())
    _FILES[path] = fd
    return fd


def close_leaders() -> None:
    """Close this process's record files (the run is over)."""
    with _LOCK:
        for fd in _FILES.values():
            try:
                os.close(fd)
            except OSError:
                pass
        _FILES.clear()
