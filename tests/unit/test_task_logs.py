"""Per-worker task logs (``task_logs: per-worker``): records written by each process to a
file of its own, read back per task, whole or cut short, from several writers at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hpcflow.store.paths import RunPaths
from hpcflow.store.tasklogs import (
    LogIndex,
    encode_record,
    locate_attempt_log,
    read_attempt_log,
    scan_records,
)
from hpcflow.worker.chunk import run_chunk
from hpcflow.worker.worker_logs import WorkerLogs
from tests.conftest import task_call


def _per_task(run: Path, slug: str, attempt: int, stream: str) -> Path:
    return run / "tasks" / slug / f"{attempt}.{stream}"


def test_records_read_back_per_task(tmp_path):
    logs = WorkerLogs()
    folder = tmp_path / "run" / "logs"
    logs.append(str(folder), "a/1.out", b"first ")
    logs.append(str(folder), "b/1.out", b"other\n")
    logs.append(str(folder), "a/1.err", b"oops\n")
    logs.append(str(folder), "a/1.out", b"second\n\0hpcflow-log x/1.out 3\n")  # mark-like
    logs.append(str(folder), "a/2.out", b"retry\n")
    logs.close()
    assert len(list(folder.iterdir())) == 1
    index = LogIndex(folder)
    index.refresh()
    assert index.read("a/1.out") == b"first second\n\0hpcflow-log x/1.out 3\n"
    assert index.read("a/1.err") == b"oops\n"
    assert index.read("a/2.out") == b"retry\n"
    assert index.read("b/1.err") is None
    assert index.read("x/1.out") is None
    run = tmp_path / "run"
    assert read_attempt_log(_per_task(run, "b", 1, "out")) == b"other\n"
    assert read_attempt_log(_per_task(run, "b", 1, "err")) is None


def test_a_per_task_file_wins_and_no_logs_folder_reads_none(tmp_path):
    path = _per_task(tmp_path, "a", 1, "out")
    assert read_attempt_log(path) is None
    path.parent.mkdir(parents=True)
    path.write_bytes(b"own file\n")
    assert read_attempt_log(path) == b"own file\n"


def test_where_a_failure_points_per_task_and_per_worker(tmp_path):
    run = tmp_path / "run"
    paths = RunPaths(run)
    err = _per_task(run, "a", 2, "err")
    per_task = locate_attempt_log(paths, "R1", "a[i=1]", err)  # no logs folder: the file
    assert (per_task.command, per_task.describe(), per_task.as_json("stderr")) == (
        None,
        str(err),
        {"stderr": str(err)},
    )
    logs = WorkerLogs()
    logs.append(str(paths.logs_dir), "a/2.out", b"out\n")
    logs.append(str(paths.logs_dir), "a/2.err", b"bad\n")
    logs.close()
    (file,) = paths.logs_dir.iterdir()
    where = locate_attempt_log(paths, "R1", "a[i=1]", err, attempt=2)
    command = "hpcflow logs R1 'a[i=1]' --stream stderr --attempt 2"
    assert where.command == command and where.files == [file]
    assert where.describe() == f"{command}  (in {file})"
    shown = where.as_json("stderr")
    assert shown["stderr"] is None and shown["log_command"] == command
    (record,) = shown["stderr_records"]  # type: ignore[misc]
    assert file.read_bytes()[record["offset"] :][: record["length"]] == b"bad\n"
    nothing = locate_attempt_log(paths, "R1", "a[i=1]", _per_task(run, "a", 1, "err"))
    assert (
        nothing.records == () and nothing.describe() == "hpcflow logs R1 'a[i=1]' --stream stderr"
    )
    err.parent.mkdir(parents=True)
    err.write_bytes(b"own file\n")  # a per-task file (a run resumed with per-task logs)
    assert locate_attempt_log(paths, "R1", "a[i=1]", err).command is None


def test_a_cut_last_record_keeps_the_finished_ones(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    whole = encode_record("done/1.out", b"finished\n")
    last = encode_record("busy/1.out", b"0123456789")
    file = folder / "n-1-aa.log"
    file.write_bytes(whole + last[:-4])  # a crash in the middle of the last record
    index = LogIndex(folder)
    index.refresh()
    assert index.read("done/1.out") == b"finished\n"
    assert index.read("busy/1.out") == b"012345"
    # The writer finishes it (a live run): the next refresh reads it whole, once.
    with open(file, "ab") as handle:
        handle.write(last[-4:] + encode_record("busy/1.out", b"!"))
    index.refresh()
    assert index.read("busy/1.out") == b"0123456789!"
    # A header cut short: nothing of that record, everything before it.
    file.write_bytes(whole + last[:7])
    records, end, partial = scan_records(file)
    assert [key for key, _ in records] == ["done/1.out"] and end == len(whole)
    assert partial is None


def test_garbage_stops_the_scan_of_that_file_only(tmp_path, caplog):
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "a-1-aa.log").write_bytes(encode_record("t/1.out", b"ok\n") + b"garbage\n")
    (folder / "b-2-bb.log").write_bytes(encode_record("u/1.out", b"fine\n"))
    index = LogIndex(folder)
    index.refresh()
    assert index.read("t/1.out") == b"ok\n" and index.read("u/1.out") == b"fine\n"
    assert "no log record" in caplog.text


_WRITER = """
import sys
from hpcflow.worker.worker_logs import WORKER_LOGS
folder, name = sys.argv[1], sys.argv[2]
for i in range(300):
    for stream in ("out", "err"):
        text = f"{name} {i} {stream}\\n".encode() * (i % 7)
        WORKER_LOGS.append(folder, f"{name}.{i}/1.{stream}", text)
"""


def test_concurrent_workers_each_own_a_file(tmp_path):
    folder = tmp_path / "logs"
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(folder), f"w{k}"]) for k in range(4)
    ]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0, 0]
    files = sorted(folder.iterdir())
    assert len(files) == 4
    index = LogIndex(folder)
    index.refresh()
    for k in range(4):
        for i in range(300):
            for stream in ("out", "err"):
                expected = f"w{k} {i} {stream}\n".encode() * (i % 7)
                assert (index.read(f"w{k}.{i}/1.{stream}") or b"") == expected
                if expected:
                    assert len(index.files(f"w{k}.{i}/1.{stream}")) == 1


def test_a_forked_process_writes_a_file_of_its_own(tmp_path):
    logs = WorkerLogs()
    folder = str(tmp_path / "logs")
    logs.append(folder, "parent/1.out", b"p\n")
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        logs.append(folder, "child/1.out", b"c\n")
        os._exit(0)
    os.waitpid(pid, 0)
    logs.append(folder, "parent/1.out", b"q\n")
    assert len(os.listdir(folder)) == 2
    index = LogIndex(Path(folder))
    index.refresh()
    assert index.read("parent/1.out") == b"p\nq\n" and index.read("child/1.out") == b"c\n"


def test_tasks_of_a_chunk_write_records_not_files(tmp_path):
    folder = tmp_path / "logs-per-worker"
    calls = [
        task_call(tmp_path, k, f"echo out{k}; echo err{k} >&2", logs=str(folder), tiny=True)
        for k in range(5)
    ]
    calls.append(task_call(tmp_path, 5, "echo alone", logs=str(folder), timeout=30.0))
    outcomes = run_chunk(calls)
    assert [o.state for o in outcomes] == ["succeeded"] * 6
    assert not (tmp_path / "logs").exists()  # no per-task file was made
    index = LogIndex(folder)
    index.refresh()
    for k in range(5):
        assert index.read(f"logs/{k}.out") == f"out{k}\n".encode()
        assert index.read(f"logs/{k}.err") == f"err{k}\n".encode()
    assert index.read("logs/5.out") == b"alone\n"
