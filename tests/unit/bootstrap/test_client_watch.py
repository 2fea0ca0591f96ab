"""The driver rank's watch over an external client (the Snakemake plugin's): a run counts
as abandoned only once its client was seen and has then been gone for the grace."""

from __future__ import annotations

import time
from types import SimpleNamespace

from hpcflow.bootstrap.abandoned import ClientWatch, other_clients


class _Client:
    """A client whose scheduler reports the connected clients it is given."""

    id = "Client-me"

    def __init__(self) -> None:
        self.clients: dict[str, object] = {"fire-and-forget": 1, "Client-me": 1}

    def run_on_scheduler(self, function, **kwargs):
        return function(SimpleNamespace(clients=self.clients), **kwargs)


def test_the_scheduler_counts_clients_other_than_the_watcher_and_dasks_own():
    scheduler = SimpleNamespace(clients={"fire-and-forget": 1, "Client-me": 1, "Client-x": 1})
    assert other_clients(scheduler, "Client-me") == 1
    assert other_clients(SimpleNamespace(clients={"Client-me": 1}), "Client-me") == 0


def test_a_client_never_seen_is_waited_for_and_a_gone_one_after_the_grace():
    client = _Client()
    watch = ClientWatch(client, grace=0.2)
    assert not watch.abandoned()  # not connected yet: the allocation started first
    time.sleep(0.3)
    assert not watch.abandoned()
    client.clients["Client-plugin"] = 1
    assert not watch.abandoned()
    del client.clients["Client-plugin"]
    assert not watch.abandoned()  # gone only just now: it may reconnect
    client.clients["Client-plugin"] = 1  # reconnected: the clock starts again
    assert not watch.abandoned()
    del client.clients["Client-plugin"]
    assert not watch.abandoned()
    deadline = time.monotonic() + 5
    while not watch.abandoned():
        assert time.monotonic() < deadline, "never counted as abandoned"
        time.sleep(0.05)


def test_a_scheduler_that_cannot_answer_is_no_verdict():
    class _Broken(_Client):
        def run_on_scheduler(self, function, **kwargs):
            raise OSError("connection closed")

    watch = ClientWatch(_Broken(), grace=0.0)
    watch.seen = True
    assert not watch.abandoned()
