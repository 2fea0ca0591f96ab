"""The journal of successes: each task that succeeds is written down by the process that ran
it, the moment it ends, in an append-only file of that process.

The driver records outcomes in ``state.sqlite`` and ``memo.sqlite`` in batches (a commit
on a shared file system costs tens of milliseconds), and a chunk of tiny tasks returns to
the driver only when the whole chunk is done. Without the journal a driver killed with
SIGKILL would lose every success it had not committed yet, and a re-run would run those
tasks again. With it, the next run of the workflow folds the journals of earlier runs into
the memo (:meth:`hpcflow.store.memo.Memo.fold_journals`) before it decides what to run:
a kill at any instant loses at most the tasks that were running.

One file per process (``<run>.<host>.<pid>.jsonl`` in the workflow's journal folder), so
each file has a single writer and appends from two hosts never meet. A line is one
``write`` of a JSON list ``[task id, fingerprint, input signatures, output signatures]``;
a line cut short by a kill does not parse and is ignored. Worker side: standard library
only.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading

from hpcflow.store.private import make_dirs
from hpcflow.store.states import TaskState
from hpcflow.worker.calls import Outcome, TaskCall

log = logging.getLogger(__name__)

_LOCK = threading.Lock()
#: Open journal files of this process, by path (a forked child computes its own path).
_FILES: dict[str, int] = {}
_HOST = socket.gethostname().replace("/", "_")


def journal_file(prefix: str) -> str:
    """This process's journal file for the run whose journal prefix is ``prefix``."""
    return f"{prefix}.{_HOST}.{os.getpid()}.jsonl"


def note_success(call: TaskCall, outcome: Outcome) -> None:
    """Append ``call``'s success to this process's journal (when the run keeps one).

    Never fails the task: a journal that cannot be written only means a killed driver's
    re-run may run this task again.
    """
    if not call.journal or outcome.state != TaskState.SUCCEEDED:
        return
    line = json.dumps(
        [call.task_id, call.fingerprint, outcome.inputs_sig, outcome.outputs_sig],
        separators=(",", ":"),
    )
    data = (line + "\n").encode("utf-8", "surrogatepass")
    path = journal_file(call.journal)
    try:
        with _LOCK:
            fd = _FILES.get(path)
            if fd is None:
                make_dirs(os.path.dirname(path))  # in the state folder: 0700
                fd = _FILES[path] = os.open(
                    path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600
                )
            os.write(fd, data)
    except OSError as exc:
        log.debug("cannot journal %s: %s", call.task_id, exc)


def close_journals() -> None:
    """Close this process's journal files (a run is over; its journals are committed)."""
    with _LOCK:
        for fd in _FILES.values():
            try:
                os.close(fd)
            except OSError:
                pass
        _FILES.clear()
