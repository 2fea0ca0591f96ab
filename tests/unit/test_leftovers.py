"""What a run does with the leader records an earlier run left (hpcflow/engine/leftovers.py),
with real processes standing in for that run's tasks."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from hpcflow.engine import leftovers
from hpcflow.errors import RunError
from hpcflow.store.process import ProcessIdentity
from hpcflow.worker.guardian import MARK_VAR
from hpcflow.worker.lifelines import start_ticks


def write_record(folder: Path, run: str, owner: ProcessIdentity, mark: str, leaders) -> Path:
    """An earlier run's record: its owner, then one line per attempt."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{run}.host.{owner.pid}.leaders"
    lines = [json.dumps({"owner": {**owner.to_meta(), "mark": mark}})]
    lines += [json.dumps([task, 1, pid, start_ticks(pid)]) for task, pid in leaders]
    path.write_text("\n".join(lines) + "\n")
    return path


def dead_owner() -> ProcessIdentity:
    """The identity of a process of this machine that has ended."""
    proc = subprocess.Popen(["true"])
    ticks = start_ticks(proc.pid)
    proc.wait()
    return replace(ProcessIdentity.current(), pid=proc.pid, start_ticks=ticks)


def gone(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is not None


def test_what_a_dead_run_left_is_ended_and_named(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(leftovers, "GRACE", 2.0)
    mark = f"test-{time.time_ns()}"
    # A task leader (its own session), and a daemon that only carries the run's mark.
    leader = subprocess.Popen(["sleep", "60"], start_new_session=True)
    daemon = subprocess.Popen(
        ["sleep", "61"], start_new_session=True, env={**os.environ, MARK_VAR: f"x:{mark}"}
    )
    try:
        path = write_record(tmp_path, "r1", dead_owner(), mark, [("make[i=3]", leader.pid)])
        with caplog.at_level(logging.WARNING):
            ended = leftovers.end_leftovers(tmp_path, "r2")
        assert ended == 2
        assert leader.wait(timeout=10) is not None and daemon.wait(timeout=10) is not None
        assert "make[i=3]" in caplog.text and "ended them" in caplog.text
        assert not path.exists()
    finally:
        for proc in (leader, daemon):
            proc.kill()
            proc.wait()


def test_the_current_runs_own_record_is_left_alone(tmp_path):
    leader = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        path = write_record(tmp_path, "r2", dead_owner(), "", [("t", leader.pid)])
        assert leftovers.end_leftovers(tmp_path, "r2") == 0
        assert leader.poll() is None and path.exists()
    finally:
        leader.kill()
        leader.wait()


def test_a_live_process_of_an_earlier_run_makes_the_run_refuse(tmp_path, monkeypatch):
    monkeypatch.setattr(leftovers, "OWNER_WAIT", 0.5)
    owner = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        identity = replace(
            ProcessIdentity.current(), pid=owner.pid, start_ticks=start_ticks(owner.pid)
        )
        write_record(tmp_path, "r1", identity, "", [])
        with pytest.raises(RunError, match=f"process {owner.pid} of run r1 still runs"):
            leftovers.end_leftovers(tmp_path, "r2")
        assert owner.poll() is None  # never killed: it may be a live run's
    finally:
        owner.kill()
        owner.wait()


def test_a_record_from_another_machine_is_only_reported(tmp_path, caplog):
    elsewhere = replace(dead_owner(), host="node-elsewhere", boot_id="another-boot")
    me = psutil.Process()
    path = write_record(tmp_path, "r1", elsewhere, "", [("t", me.pid)])
    with caplog.at_level(logging.WARNING):
        assert leftovers.end_leftovers(tmp_path, "r2") == 0
    assert "node-elsewhere cannot be checked from here" in caplog.text
    assert not path.exists()
