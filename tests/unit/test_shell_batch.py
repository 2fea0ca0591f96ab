"""Tiny shell tasks run several to a shell: each keeps its own process group, logs,
exit status, folder and environment, and a cancel or a straggler stops nothing else."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from hpcflow.worker import shell_batch, shells
from hpcflow.worker.chunk import run_chunk
from hpcflow.worker.groups import LIVE, kill_running
from tests.conftest import processes_with, task_call

pytestmark = pytest.mark.skipif(
    not shell_batch.bash_supports_batches(), reason="shell batches need bash 5 or newer"
)


@pytest.fixture(autouse=True)
def _not_cancelled():
    yield
    LIVE.cancelled = False


def _read(path: str) -> str | None:
    p = Path(path)
    return p.read_text() if p.exists() else None


def test_each_task_gets_its_own_logs_status_and_outputs(tmp_path):
    calls = [
        task_call(tmp_path, 0, "echo out0; echo err0 >&2; echo 0 > o0",
                  outputs=(str(tmp_path / "o0"),)),
        task_call(tmp_path, 1, "printf 'no newline'; exit 3"),
        task_call(tmp_path, 2, "true", outputs=(str(tmp_path / "never"),)),
        task_call(tmp_path, 3, "read line; echo \"stdin:[$line]\""),
        task_call(tmp_path, 4, "if then fi"),
    ]  # fmt: skip
    assert shell_batch.batchable(calls) == calls
    outcomes = run_chunk(calls)
    assert [o.index for o in outcomes] == [0, 1, 2, 3, 4]
    assert [o.state for o in outcomes] == ["succeeded", "failed", "failed", "succeeded", "failed"]
    assert (_read(calls[0].stdout), _read(calls[0].stderr)) == ("out0\n", "err0\n")
    assert (tmp_path / "o0").read_text() == "0\n"
    assert outcomes[0].outputs_sig and str(tmp_path / "o0") in outcomes[0].outputs_sig
    assert (_read(calls[1].stdout), _read(calls[1].stderr)) == ("no newline", None)
    assert (outcomes[1].exit_code, outcomes[1].message) == (3, "exited with 3")
    assert "did not create" in (outcomes[2].message or "")
    assert _read(calls[3].stdout) == "stdin:[]\n"  # stdin is /dev/null
    assert outcomes[4].exit_code == 2 and "syntax error" in (_read(calls[4].stderr) or "")
    for o in outcomes:
        assert o.started <= o.ended and o.peak_rss is None


def test_folder_environment_and_hostile_text_stay_per_task(tmp_path):
    (tmp_path / "a b").mkdir()
    hostile = 'it\'s $(touch pwned) `touch pwned2` "q"\nline2'
    calls = [
        task_call(tmp_path / "a b", 0, 'pwd > where; echo "$GREETING" > env',
                  env={"GREETING": hostile}),
        task_call(tmp_path, 1, 'echo "${GREETING-unset}" > env2; echo "$(basename "$PWD")" > here'),
        task_call(tmp_path, 2, "echo 'single '\"'\"' quote' > q; cd /; exit 0"),
    ]  # fmt: skip
    outcomes = run_chunk(calls)
    assert [o.state for o in outcomes] == ["succeeded"] * 3
    assert (tmp_path / "a b" / "where").read_text() == f"{tmp_path / 'a b'}\n"
    assert (tmp_path / "a b" / "env").read_text() == hostile + "\n"
    assert (tmp_path / "env2").read_text() == "unset\n"
    assert (tmp_path / "here").read_text() == f"{tmp_path.name}\n"
    assert (tmp_path / "q").read_text() == "single ' quote\n"
    assert not list(tmp_path.rglob("pwned*"))


def test_tasks_are_process_groups_of_their_own_and_stragglers_die(tmp_path):
    marker = f"hpcflow-straggler-{time.time_ns()}"
    calls = [
        task_call(tmp_path, 0, "ps -o pgid= $BASHPID > g0; ps -o pgid= $$ > shell"),
        task_call(tmp_path, 1,
                  f"ps -o pgid= $BASHPID > g1; (exec -a {marker} sleep 30) & echo started"),
        task_call(tmp_path, 2, "echo after > after"),
    ]  # fmt: skip
    started = time.monotonic()
    outcomes = run_chunk(calls)
    assert time.monotonic() - started < 10  # the backgrounded sleep held nothing up
    assert [o.state for o in outcomes] == ["succeeded"] * 3
    groups = {(tmp_path / name).read_text().strip() for name in ("g0", "g1", "shell")}
    assert len(groups) == 3
    time.sleep(0.2)
    assert processes_with(marker) == []
    assert (tmp_path / "after").read_text() == "after\n"


def test_a_cancel_kills_the_running_task_and_skips_the_rest(tmp_path):
    marker = f"hpcflow-batch-cancel-{time.time_ns()}"
    calls = [
        task_call(tmp_path, 0, "echo done > first"),
        task_call(tmp_path, 1, f"exec -a {marker} sleep 30"),
        task_call(tmp_path, 2, "echo never > never"),
    ]
    result: list = []
    runner = threading.Thread(target=lambda: result.extend(run_chunk(calls)))
    runner.start()
    deadline = time.monotonic() + 20
    while not processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    kill_running()
    runner.join(timeout=20)
    assert not runner.is_alive()
    assert [o.state for o in result] == ["succeeded", "cancelled", "cancelled"]
    assert not (tmp_path / "never").exists()
    assert processes_with(marker) == []


def test_shells_live_on_across_chunks_and_take_chunks_of_any_size(tmp_path):
    """The next chunk runs in the same shell (no new bash); a chunk far larger than one
    command-line argument may be (128 KiB) runs whole."""
    first = run_chunk([task_call(tmp_path, i, f"echo $$ > shell{i}") for i in range(2)])
    assert [o.state for o in first] == ["succeeded"] * 2
    filler = "#" + "x" * 900
    calls = [task_call(tmp_path, i, f"echo {i} > f{i}; echo $$ > s{i} {filler}")
             for i in range(200)]  # fmt: skip
    outcomes = run_chunk(calls)
    assert [o.state for o in outcomes] == ["succeeded"] * 200
    assert [(tmp_path / f"f{i}").read_text() for i in range(200)] == [f"{i}\n" for i in range(200)]
    pids = {(tmp_path / name).read_text() for name in ("shell0", "shell1", "s0", "s199")}
    assert len(pids) == 1  # one bash ran both chunks
    assert not list(Path(shells.SHELLS._folder or tmp_path).glob("chunk-*"))


def test_a_shell_a_task_killed_is_replaced(tmp_path):
    calls = [task_call(tmp_path, 0, "kill -KILL $$"), task_call(tmp_path, 1, "echo x > x")]
    outcomes = run_chunk(calls)
    assert outcomes[0].state == "failed" and outcomes[1].state == "failed"
    assert "ended before it did" in (outcomes[1].message or "")
    again = run_chunk([task_call(tmp_path, i, f"echo {i} > y{i}") for i in range(2)])
    assert [o.state for o in again] == ["succeeded"] * 2


def test_only_plain_shell_tasks_take_part(tmp_path):
    plain = task_call(tmp_path, 0, "true")
    timed = task_call(tmp_path, 1, "true", timeout=5.0)
    odd_env = task_call(tmp_path, 2, "true", env={"NOT-A-NAME": "x"})
    argv = task_call(tmp_path, 3, None, kind="argv", argv=["true"])
    assert shell_batch.batchable([plain, timed, odd_env, argv]) == []  # one is too few...
    tiny = task_call(tmp_path, 5, "true", tiny=True)
    assert shell_batch.batchable([tiny, timed]) == [tiny]  # ...unless it is tiny
    twin = task_call(tmp_path, 4, "true")
    assert shell_batch.batchable([plain, timed, twin, odd_env]) == [plain, twin]
    outcomes = run_chunk([plain, timed, odd_env, argv, twin])
    assert [o.state for o in outcomes] == ["succeeded"] * 5


@pytest.mark.parametrize("piece", [1, 2, 5, 13, 64, 10_000])
def test_logs_split_right_whatever_the_read_boundaries(tmp_path, piece):
    """Marks cut by a read, NUL bytes and mark-like text in the output: every byte still
    lands in its own task's log, and a task that wrote nothing gets no log."""
    mark = b"\0hpcflow-end-0123456789abcdef\n"
    texts = [b"plain\n", b"", b"\0hpcflow-end-but-not-a-mark\0\0", b"x" * 300 + b"\0", b"\0"]
    paths = [str(tmp_path / f"log{k}") for k in range(len(texts))]
    stream = b"".join(text + mark for text in texts)
    splitter = shells.LogSplitter(mark)
    splitter.start([(path, "") for path in paths])
    for at in range(0, len(stream), piece):
        splitter.feed(stream[at : at + piece])
    splitter.close()
    for text, path in zip(texts, paths, strict=True):
        assert (Path(path).read_bytes() if Path(path).exists() else b"") == text
    assert not Path(paths[1]).exists()
