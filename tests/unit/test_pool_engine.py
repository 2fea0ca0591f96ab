"""The pool engine's slot accounting, Python workers, cancel and bookkeeping, on real
processes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import psutil
import pytest

from hpcflow.worker.calls import TaskCall
from hpcflow.worker.chunk import run_chunk
from hpcflow.worker.groups import LIVE, kill_running
from hpcflow.worker.pool import ADDRESS, LocalPool, PoolClient
from tests.conftest import processes_with, task_call


def _call(tmp_path: Path, index: int, command: str) -> TaskCall:
    return task_call(tmp_path, index, command)


@pytest.fixture(autouse=True)
def _not_cancelled():
    """A cancel marks this process's task runner cancelled; later tests start clean."""
    yield
    LIVE.cancelled = False


MODULE = """
import os, signal, time
from pathlib import Path

def pid():
    return os.getpid()

def dies_once(marker):
    if not Path(marker).exists():
        Path(marker).write_text("dying")
        os.kill(os.getpid(), signal.SIGKILL)
    return os.getpid()

def always_dies():
    os.kill(os.getpid(), signal.SIGKILL)

def naps(marker):
    Path(marker).write_text(str(os.getpid()))
    time.sleep(60)
"""


def _python(tmp_path: Path, index: int, func: str, **kwargs: object) -> TaskCall:
    (tmp_path / "tasks_mod.py").write_text(MODULE)
    call = _call(tmp_path, index, "")
    call.kind, call.command, call.python, call.kwargs = "python", None, f"tasks_mod:{func}", kwargs
    return call


def _result(call: TaskCall) -> object:
    return json.loads(Path(call.result).read_text())


def test_python_calls_run_in_a_worker_process_and_commands_here(tmp_path):
    calls = [_python(tmp_path, 0, "pid"), _call(tmp_path, 1, "echo $PPID > ppid")]
    with LocalPool(2, str(tmp_path)) as engine:
        assert engine.client is not None
        outcomes = engine.client.submit(run_chunk, calls, key="k").result(timeout=60)
    assert [(o.index, o.state) for o in outcomes] == [(0, "succeeded"), (1, "succeeded")]
    assert _result(calls[0]) != os.getpid()
    assert int((tmp_path / "ppid").read_text()) == os.getpid()


def test_a_chunk_whose_worker_died_runs_again_on_a_fresh_one(tmp_path):
    marker = tmp_path / "died"
    call = _python(tmp_path, 0, "dies_once", marker=str(marker))
    with LocalPool(1, str(tmp_path)) as engine:
        assert engine.client is not None
        (outcome,) = engine.client.submit(run_chunk, [call], key="k").result(timeout=60)
    assert marker.read_text() == "dying"
    assert outcome.state == "succeeded"


def test_a_chunk_that_kills_every_worker_fails_and_the_commands_stand(tmp_path):
    calls = [_call(tmp_path, 0, "echo ok > ok"), _python(tmp_path, 1, "always_dies")]
    with LocalPool(1, str(tmp_path)) as engine:
        assert engine.client is not None
        outcomes = engine.client.submit(run_chunk, calls, key="k").result(timeout=120)
        # The engine goes on: a new worker runs the next Python call.
        (after,) = engine.client.submit(run_chunk, [_python(tmp_path, 2, "pid")], key="k2").result(
            timeout=60
        )
    assert [o.state for o in outcomes] == ["succeeded", "failed"]
    assert "worker lost" in (outcomes[1].message or "")
    assert after.state == "succeeded"


def test_cancel_stops_a_running_python_call(tmp_path):
    marker = tmp_path / "napping"
    call = _python(tmp_path, 0, "naps", marker=str(marker))
    with LocalPool(1, str(tmp_path)) as engine:
        assert engine.client is not None
        future = engine.client.submit(run_chunk, [call], key="k")
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        worker = int(marker.read_text())
        started = time.monotonic()
        engine.client.run(kill_running)
    # Leaving the engine after a cancel kills the workers: the call is not waited for.
    assert time.monotonic() - started < 10
    assert [o.state for o in future.result(timeout=1)] == ["cancelled"]
    assert not psutil.pid_exists(worker) or psutil.Process(worker).status() == "zombie"


def _spans(outcomes) -> list[tuple[float, float]]:
    return sorted((o.started, o.ended) for o in outcomes)


def _overlaps(spans: list[tuple[float, float]]) -> bool:
    return any(b[0] < a[1] for a, b in zip(spans, spans[1:], strict=False))


def _sleeps(client: PoolClient, tmp_path: Path, n: int, seconds: float, cpus: float):
    """``n`` one-task chunks of ``sleep seconds``, each holding ``cpus`` slots."""
    return [
        client.submit(run_chunk, [_call(tmp_path, i, f"sleep {seconds}")], key=f"k{i}",
                      resources={"cpus": cpus})
        for i in range(n)
    ]  # fmt: skip


def test_chunks_that_need_every_slot_run_one_at_a_time(tmp_path):
    client = PoolClient(2, str(tmp_path))
    try:
        futures = _sleeps(client, tmp_path, 3, 0.3, 2.0)
        outcomes = [o for f in futures for o in f.result(timeout=30)]
    finally:
        client.close()
    assert [o.state for o in outcomes] == ["succeeded"] * 3
    assert not _overlaps(_spans(outcomes))


def test_one_slot_chunks_share_the_slots(tmp_path):
    client = PoolClient(2, str(tmp_path))
    try:
        futures = _sleeps(client, tmp_path, 2, 0.5, 1.0)
        time.sleep(0.2)
        running = client.processing()[ADDRESS]
        outcomes = [o for f in futures for o in f.result(timeout=30)]
    finally:
        client.close()
    assert sorted(running) == ["k0", "k1"]
    assert _overlaps(_spans(outcomes))
    assert client.processing() == {ADDRESS: []}


def test_cancel_kills_the_running_tasks_and_a_new_engine_starts_clean(tmp_path):
    with LocalPool(2, str(tmp_path)) as engine:
        assert engine.client is not None
        future = engine.client.submit(
            run_chunk, [_call(tmp_path, 0, "sleep 30"), _call(tmp_path, 1, "true")], key="k"
        )
        deadline = time.monotonic() + 10
        while not engine.client.processing()[ADDRESS] and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)
        started = time.monotonic()
        engine.client.run(kill_running)
        states = [o.state for o in future.result(timeout=30)]
        assert time.monotonic() - started < 10
    assert states == ["cancelled", "cancelled"]
    with LocalPool(1, str(tmp_path)) as engine:
        assert not LIVE.cancelled
        assert engine.client is not None
        (outcome,) = engine.client.submit(run_chunk, [_call(tmp_path, 2, "true")], key="k2").result(
            timeout=30
        )
    assert outcome.state == "succeeded"


def test_leaving_on_an_error_stops_the_running_tasks(tmp_path):
    marker = f"hpcflow-pool-error-{time.time_ns()}"
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="disk is full"), LocalPool(1, str(tmp_path)) as engine:
        assert engine.client is not None
        engine.client.submit(run_chunk, [_call(tmp_path, 0, f"exec -a {marker} sleep 30")], key="k")
        deadline = time.monotonic() + 20
        while not processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        raise RuntimeError("the disk is full")
    assert time.monotonic() - started < 15
    assert processes_with(marker) == []
