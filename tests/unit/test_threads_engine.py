"""The threads engine's slot accounting, cancel and bookkeeping, on real processes."""

from __future__ import annotations

import time
from pathlib import Path

from hpcflow.backends.local.threads import ADDRESS, LocalThreads, ThreadsClient
from hpcflow.runtime.calls import TaskCall
from hpcflow.runtime.execute import LIVE, kill_running, run_chunk


def _call(tmp_path: Path, index: int, command: str) -> TaskCall:
    logs = tmp_path / "logs"
    return TaskCall(
        index=index, attempt=1, kind="shell", command=command, argv=None, python=None,
        kwargs=None, workdir=str(tmp_path), env=None, timeout=None, inputs=(), outputs=(),
        stdout=str(logs / f"{index}.out"), stderr=str(logs / f"{index}.err"),
        result=str(logs / f"{index}.json"), quarantine_dir=str(tmp_path / "q" / str(index)),
    )  # fmt: skip


def _spans(outcomes) -> list[tuple[float, float]]:
    return sorted((o.started, o.ended) for o in outcomes)


def _overlaps(spans: list[tuple[float, float]]) -> bool:
    return any(b[0] < a[1] for a, b in zip(spans, spans[1:], strict=False))


def _sleeps(client: ThreadsClient, tmp_path: Path, n: int, seconds: float, cpus: float):
    """``n`` one-task chunks of ``sleep seconds``, each holding ``cpus`` slots."""
    return [
        client.submit(run_chunk, [_call(tmp_path, i, f"sleep {seconds}")], key=f"k{i}",
                      resources={"cpus": cpus})
        for i in range(n)
    ]  # fmt: skip


def test_chunks_that_need_every_slot_run_one_at_a_time(tmp_path):
    client = ThreadsClient(2)
    try:
        futures = _sleeps(client, tmp_path, 3, 0.3, 2.0)
        outcomes = [o for f in futures for o in f.result(timeout=30)]
    finally:
        client.close()
    assert [o.state for o in outcomes] == ["succeeded"] * 3
    assert not _overlaps(_spans(outcomes))


def test_one_slot_chunks_share_the_slots(tmp_path):
    client = ThreadsClient(2)
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
    with LocalThreads(2) as engine:
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
    with LocalThreads(1) as engine:
        assert not LIVE.cancelled
        assert engine.client is not None
        (outcome,) = engine.client.submit(run_chunk, [_call(tmp_path, 2, "true")], key="k2").result(
            timeout=30
        )
    assert outcome.state == "succeeded"
