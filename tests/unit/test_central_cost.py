"""What the central processes of a run spend per task: a round of chunks reaches Dask as
one graph update with each chunk's calls packed; chunks run longer where the slots are
many; the driver asks for every worker's details only when a worker is new; a pilot's
Dask processes wake up less often (real settings, checked against Dask's own)."""

from __future__ import annotations

import pickle

import dask
import pytest

from hpcflow.bootstrap.quiet import HEARTBEAT_SECONDS, PILOT_DASK_CONFIG, slow_heartbeats
from hpcflow.engine.chunk_submit import submit_chunks
from hpcflow.engine.driver import Driver
from hpcflow.store.states import TaskState
from hpcflow.worker.chunk import pack_chunk, run_packed_chunk
from hpcflow.worker.pool import PoolClient
from tests.conftest import task_call


def _chunks(tmp_path, sizes: list[int]):
    index = iter(range(1000))
    return [
        [task_call(tmp_path, i, f"echo {i} > out{i}.txt") for i in (next(index) for _ in range(n))]
        for n in sizes
    ]


def test_a_round_of_chunks_is_one_graph_update_of_packed_calls(tmp_path):
    from distributed import Client, LocalCluster
    from distributed.diagnostics.plugin import SchedulerPlugin

    class Updates(SchedulerPlugin):
        def __init__(self) -> None:
            self.rounds: list[set[str]] = []

        def update_graph(self, scheduler, *, keys, **kwargs) -> None:  # type: ignore[override]
            self.rounds.append(set(keys))

    chunks = _chunks(tmp_path, [3, 1, 2])
    keys = ["hpcflow-chunk-a", "hpcflow-chunk-b", "hpcflow-chunk-c"]
    with LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None,
        resources={"cpus": 2},
    ) as cluster, Client(cluster) as client:  # fmt: skip
        updates = Updates()
        cluster.scheduler.add_plugin(updates)
        futures = submit_chunks(client, chunks, keys, {"cpus": 1.0})
        assert [f.key for f in futures] == keys
        results = client.gather(futures)
        # The scheduler holds bytes, not the calls (it passes them on untouched).
        one = submit_chunks(client, chunks[1:2], ["hpcflow-chunk-d"], {"cpus": 1.0})[0]
        one.result()
    assert updates.rounds[0] == set(keys)
    assert len(updates.rounds) == 2
    assert [[o.index for o in r] for r in results] == [[0, 1, 2], [3], [4, 5]]
    assert all(o.state == TaskState.SUCCEEDED for r in results for o in r)
    assert (tmp_path / "out5.txt").read_text() == "5\n"


def test_packed_calls_run_as_they_were(tmp_path):
    calls = _chunks(tmp_path, [2])[0]
    packed = pack_chunk(calls)
    assert isinstance(packed, bytes)
    outcomes = run_packed_chunk(packed)
    assert [(o.index, o.state) for o in outcomes] == [
        (0, TaskState.SUCCEEDED),
        (1, TaskState.SUCCEEDED),
    ]
    # A value pickle cannot take (a local function) still packs, through cloudpickle.
    calls[0].kwargs = {"f": lambda x: x + 1}
    assert pickle.loads(pack_chunk(calls))[0].kwargs["f"](1) == 2


def test_the_pool_engine_takes_a_round_as_it_is(tmp_path):
    client = PoolClient(2, str(tmp_path))
    try:
        futures = submit_chunks(client, _chunks(tmp_path, [2, 1]), ["a", "b"], {"cpus": 1.0})
        assert [f.key for f in futures] == ["a", "b"]
        assert [[o.index for o in f.result(timeout=60)] for f in futures] == [[0, 1], [2]]
    finally:
        client.close()


def test_chunks_run_longer_where_the_slots_are_many():
    few = Driver.__new__(Driver)
    few.slots = 2
    many = Driver.__new__(Driver)
    many.slots = 64
    assert few.chunk_seconds() == Driver.target_chunk_seconds
    assert many.chunk_seconds() == pytest.approx(64 / Driver.central_chunks_per_second)
    # A chunk's worth of the ends, a second, stays under the bound at any size.
    for slots in (2, 16, 64, 1024):
        d = Driver.__new__(Driver)
        d.slots = slots
        assert slots / d.chunk_seconds() <= Driver.central_chunks_per_second + 1e-9


def test_the_driver_asks_for_workers_only_when_one_is_new():
    class Client:
        def __init__(self) -> None:
            self.asked = 0
            self.now = {"tcp://10.0.0.1:1": ["k1"]}

        def processing(self):
            return self.now

        def scheduler_info(self, n_workers=-1):
            self.asked += 1
            return {"workers": {a: {"name": f"rank-0@node{a[-3]}"} for a in self.now}}

    class Calls:
        def __init__(self) -> None:
            self.seen: list[list[tuple[int, str]]] = []

        def set_running_hosts(self, hosts):
            self.seen.append(hosts)

    d = Driver.__new__(Driver)
    d.client = Client()
    d.db = Calls()
    d.where_interval = 0.0
    d._last_where = 0.0
    d._worker_hosts = {}
    d._calls_by_key = {"k1": [task_call_index(1)], "k2": [task_call_index(2)]}
    d._record_where()
    d._record_where()
    assert d.client.asked == 1
    d.client.now = {"tcp://10.0.0.1:1": [], "tcp://10.0.0.2:1": ["k2"]}
    d._record_where()
    assert d.client.asked == 2
    assert d.db.seen == [[(1, "node1")], [(1, "node1")], [(2, "node2")]]


def task_call_index(index: int):
    class Call:
        pass

    call = Call()
    call.index = index  # type: ignore[attr-defined]
    return call


def test_the_quiet_settings_are_dask_settings():
    # A misspelt key would be silently ignored: each must be one Dask knows.
    for key in PILOT_DASK_CONFIG:
        dask.config.get(key)  # raises KeyError for an unknown one
    with dask.config.set(PILOT_DASK_CONFIG):
        assert dask.config.get("distributed.worker.profile.enabled") is False


def test_slow_heartbeats_bounds_what_the_scheduler_asks_for(monkeypatch):
    import distributed.scheduler as dask_scheduler

    original = dask_scheduler.heartbeat_interval
    monkeypatch.setattr(dask_scheduler, "heartbeat_interval", original)
    assert original(32) < HEARTBEAT_SECONDS  # Dask's own: once a second at 32 workers
    slow_heartbeats()
    slow_heartbeats()  # twice changes nothing more
    assert dask_scheduler.heartbeat_interval(32) == HEARTBEAT_SECONDS
    assert dask_scheduler.heartbeat_interval(10_000) == original(10_000)  # longer stays
    assert dask_scheduler.heartbeat_interval.__wrapped__ is original  # type: ignore[attr-defined]
