"""A lease whose allocation is only ending (SLURM's COMPLETING after a node failure) is
decided once the batch system has finished with it, not while it cleans up."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from hpcflow.backends import registry
from hpcflow.backends.base import AllocationState, AllocationStatus


class Scripted:
    """A batch system whose answers to ``poll`` come from a list, one per call."""

    name = "slurm"

    def __init__(self, answers: list[dict[str, str]]) -> None:
        self.answers = answers
        self.polls = 0

    def poll(self, ids: Sequence[str]) -> dict[str, AllocationStatus]:
        answer = self.answers[min(self.polls, len(self.answers) - 1)]
        self.polls += 1
        states = {"RUNNING": AllocationState.RUNNING, "COMPLETING": AllocationState.RUNNING,
                  "PENDING": AllocationState.QUEUED}  # fmt: skip
        return {i: AllocationStatus(i, states[s], s) for i, s in answer.items() if i in ids}


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch):
    def use(answers: list[dict[str, str]]) -> Scripted:
        backend = Scripted(answers)
        monkeypatch.setattr(registry, "get_backend", lambda name: backend)
        monkeypatch.setattr(registry.time, "sleep", lambda s: None)
        return backend

    return use


def test_an_ending_allocation_is_waited_for_until_it_is_gone(scripted, caplog) -> None:
    backend = scripted([{"7": "COMPLETING"}, {"7": "COMPLETING"}, {}])
    assert registry.allocations_live("slurm", ["7"]) == []
    assert backend.polls == 3
    assert "ending (COMPLETING)" in caplog.text


def test_a_running_or_queued_allocation_is_answered_at_once(scripted) -> None:
    backend = scripted([{"7": "COMPLETING", "8": "RUNNING"}, {}])
    assert registry.allocations_live("slurm", ["7", "8"]) == ["7", "8"]
    assert backend.polls == 1
    backend = scripted([{"9": "PENDING"}, {}])
    assert registry.allocations_live("slurm", ["9"]) == ["9"]
    assert backend.polls == 1


def test_an_allocation_ending_for_too_long_counts_as_live(scripted) -> None:
    backend = scripted([{"7": "COMPLETING"}])
    assert registry.allocations_live("slurm", ["7"], wait_ending=0) == ["7"]
    assert backend.polls == 1
