"""Result and status files are replaced whole: a reader sees the old file or the new one."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest

from hpcflow.store import atomic
from hpcflow.store.states import TaskState
from hpcflow.worker import execute, pycall
from hpcflow.worker.groups import LIVE
from hpcflow.worker.values import encode_call
from tests.conftest import task_call


@pytest.fixture(autouse=True)
def _clean_sys_path(monkeypatch):
    # Python tasks make their working directory importable; keep that to the test.
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    LIVE.cancelled = False


def _leftovers(folder: Path) -> list[str]:
    """Temporary files of an atomic write (``.NAME.xxxx``) still in ``folder``."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def _spy(monkeypatch, module) -> list[str]:
    """Record every path ``module`` writes through the atomic helper (and still write)."""
    written: list[str] = []
    real = atomic.write_text_atomic

    def spy(path, text, **options):  # type: ignore[no-untyped-def]
        written.append(os.fspath(path))
        real(path, text, **options)

    monkeypatch.setattr(module, "write_text_atomic", spy)
    return written


def _python_call(tmp_path: Path, **changes: object):  # type: ignore[no-untyped-def]
    """A Python task (``dict(**kwargs)``) whose result is its large keyword arguments."""
    return task_call(
        tmp_path,
        0,
        "",
        kind="python",
        python="builtins:dict",
        kwargs={"answer": 42, "text": "x" * 100_000},
        **changes,
    )


def test_an_inline_python_task_writes_its_result_atomically(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # inline: the task's folder is the process's
    written = _spy(monkeypatch, execute)
    call = _python_call(tmp_path)
    outcome = execute.run_call(call)
    assert outcome.state == TaskState.SUCCEEDED, outcome.message
    assert written == [call.result]
    assert json.loads(Path(call.result).read_text()) == call.kwargs
    assert _leftovers(Path(call.result).parent) == []


def test_a_python_task_in_its_own_process_writes_its_result_whole(tmp_path):
    call = _python_call(tmp_path, timeout=60.0)  # a timeout: a child process
    outcome = execute.run_call(call)
    assert outcome.state == TaskState.SUCCEEDED, outcome.message
    assert json.loads(Path(call.result).read_text()) == call.kwargs
    assert _leftovers(Path(call.result).parent) == []


def test_pycall_goes_through_the_atomic_helper(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    written = _spy(monkeypatch, execute)  # pycall calls what an in-process call does
    call = task_call(tmp_path, 1, "", kind="python", python="builtins:dict", kwargs={"a": [1, 2]})
    result = Path(call.result)
    assert pycall.main(encode_call(call)) == 0
    assert written == [str(result)]
    assert json.loads(result.read_text()) == {"a": [1, 2]}
    assert _leftovers(result.parent) == []


def test_a_reader_never_sees_a_partial_file(tmp_path):
    path = tmp_path / "status.json"
    versions = [json.dumps({"v": c * 200_000}) for c in "ab"]
    atomic.write_text_atomic(path, versions[0])
    reading, stop = threading.Event(), threading.Event()
    reads: list[str] = []

    def read() -> None:
        while not stop.is_set():
            text = path.read_text()
            reads.append(text if text in versions else f"partial ({len(text)} chars)")
            reading.set()

    reader = threading.Thread(target=read)
    reader.start()
    try:
        assert reading.wait(10)
        for n in range(1, 61):
            atomic.write_text_atomic(path, versions[n % 2])
    finally:
        stop.set()
        reader.join()
    assert [r for r in reads if r not in versions] == []
    assert _leftovers(tmp_path) == []


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "result.json"
    atomic.write_json_atomic(path, {"old": True})

    def broken_fsync(fd: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(atomic.os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk full"):
        atomic.write_json_atomic(path, {"new": True})
    assert json.loads(path.read_text()) == {"old": True}
    assert _leftovers(tmp_path) == []
