"""The workflow's lease (hpcflow/store/lease.py, lock.py): one live driver per workflow.

Races are run by real processes that start together at a barrier; who won is counted
from the files each one leaves (its own line in ``won`` or ``refused``), never from the
lease itself.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from hpcflow.errors import RunLockedError
from hpcflow.store import lease as ls
from hpcflow.store.lock import RunLock
from hpcflow.store.process import ProcessIdentity

REPO = Path(__file__).resolve().parents[2]

RACER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from hpcflow.errors import RunLockedError
    from hpcflow.store.lock import RunLock

    folder, name = Path(sys.argv[1]), sys.argv[2]
    lock = RunLock(folder / "locks" / "wf.lock", ask=None)
    (folder / f"ready-{name}").touch()
    while not (folder / "go").exists():
        time.sleep(0.001)
    try:
        lock.acquire({"run_id": name})
    except RunLockedError as exc:
        with open(folder / "refused", "a") as fh:
            fh.write(name + "\\n")
        sys.exit(0)
    with open(folder / "won", "a") as fh:
        fh.write(name + "\\n")
    # Hold it until every other racer has been refused.
    while not (folder / "done").exists():
        time.sleep(0.01)
    lock.release()
    """
)


def _wait(what: str, predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def _race(folder: Path, n: int) -> tuple[list[str], list[str]]:
    """``n`` processes take the lease at once: (winners, refused), from their files."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen([sys.executable, "-c", RACER, str(folder), f"r{i}"], env=env)
        for i in range(n)
    ]
    try:
        _wait("every racer at the barrier", lambda: len(list(folder.glob("ready-*"))) == n)
        (folder / "go").touch()
        answered = lambda: len(_lines(folder / "won")) + len(_lines(folder / "refused"))  # noqa: E731
        _wait("every racer to win or be refused", lambda: answered() >= n)
        (folder / "done").touch()
        for proc in procs:
            assert proc.wait(timeout=60) == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    return _lines(folder / "won"), _lines(folder / "refused")


def _dead_identity() -> ProcessIdentity:
    """The identity of a process of this machine that has ended."""
    code = "import json; from hpcflow.store.process import ProcessIdentity as P; "
    code += "print(json.dumps(P.current().to_meta()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
    ident = ProcessIdentity.from_meta(json.loads(out.stdout))
    assert ident is not None and not ident.alive_here()
    return ident


def _plant(lock: RunLock, record: ls.LeaseRecord) -> None:
    lock.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(lock.path.parent, 0o700)
    assert ls.create(lock.path, record)


def _lock(tmp_path: Path, **kwargs) -> RunLock:
    return RunLock(tmp_path / "state" / "locks" / "wf.lock", **kwargs)


def test_racing_processes_exactly_one_takes_the_lease(tmp_path):
    for round_ in range(3):
        won, refused = _race(tmp_path / f"round{round_}", 8)
        assert len(won) == 1, (won, refused)
        assert sorted(won + refused) == sorted(f"r{i}" for i in range(8))


def test_racing_processes_exactly_one_takes_over_a_stale_lease(tmp_path):
    for round_ in range(3):
        folder = tmp_path / f"round{round_}"
        stale = ls.LeaseRecord.new("dead-run")
        stale = replace(stale, holder=_dead_identity())
        _plant(RunLock(folder / "locks" / "wf.lock"), stale)
        won, refused = _race(folder, 8)
        assert len(won) == 1, (won, refused)
        assert len(refused) == 7


def test_a_live_holder_on_this_machine_is_refused_with_the_run_and_cancel(tmp_path):
    first = _lock(tmp_path)
    first.acquire({"run_id": "starting"})
    first.set_run("20260101-000000-aaaaaa")
    try:
        with pytest.raises(RunLockedError) as err:
            _lock(tmp_path).acquire({"run_id": "starting"})
        text = str(err.value)
        assert "run 20260101-000000-aaaaaa" in text
        assert "hpcflow cancel 20260101-000000-aaaaaa" in text
        assert err.value.exit_code == 2
    finally:
        first.release()
    assert not first.path.exists()
    again = _lock(tmp_path)
    again.acquire({"run_id": "starting"})  # released: free at once
    again.release()


def test_a_dead_holder_on_this_machine_is_taken_over_and_said(tmp_path, caplog):
    lock = _lock(tmp_path)
    _plant(lock, replace(ls.LeaseRecord.new("old-run"), holder=_dead_identity()))
    with caplog.at_level(logging.WARNING, logger="hpcflow.store.lock"):
        lock.acquire({"run_id": "starting"})
    try:
        assert "took over the workflow's lease from run old-run" in caplog.text
        assert "has ended" in caplog.text
        held = ls.read_lease(lock.path)
        assert held is not None and held.holder == ProcessIdentity.current()
    finally:
        lock.release()


def _other_host(expires: float) -> ls.LeaseRecord:
    record = ls.LeaseRecord.new("remote-run")
    holder = ProcessIdentity("node-17", "some-boot", "pid:[1]", 4242, 99)
    return replace(record, holder=holder, expires=expires, renewed=expires - ls.LEASE_TTL)


def test_another_hosts_lease_is_not_taken_before_its_expiry_and_margin(tmp_path):
    lock = _lock(tmp_path)
    # Expired, but within the margin for clock skew: still the other host's.
    _plant(lock, _other_host(time.time() - ls.OTHER_HOST_MARGIN / 2))
    with pytest.raises(RunLockedError, match="remote-run"):
        lock.acquire({"run_id": "starting"})
    assert ls.read_lease(lock.path).run_id == "remote-run"


def test_another_hosts_lease_past_expiry_and_margin_is_taken_over(tmp_path):
    lock = _lock(tmp_path)
    _plant(lock, _other_host(time.time() - ls.OTHER_HOST_MARGIN - 5))
    lock.acquire({"run_id": "starting"})
    try:
        assert ls.read_lease(lock.path).holder == ProcessIdentity.current()
    finally:
        lock.release()


def _submitted(allocations: tuple[str, ...]) -> ls.LeaseRecord:
    """A run whose submitting command has ended (``--detach``, or killed) and which
    named its allocations."""
    record = replace(ls.LeaseRecord.new("queued-run"), holder=_dead_identity())
    return replace(record, backend="slurm", allocations=allocations)


def test_a_queued_allocation_keeps_the_lease_live_after_its_submitter_ended(tmp_path):
    asked: list[tuple[str, list[str]]] = []

    def queued(backend, ids):
        asked.append((backend, list(ids)))
        return ["77"]

    lock = _lock(tmp_path, ask=queued)
    _plant(lock, _submitted(("77",)))
    with pytest.raises(RunLockedError) as err:
        lock.acquire({"run_id": "starting"})
    assert asked == [("slurm", ["77"])]
    assert "allocation 77 is queued or running" in str(err.value)
    assert "hpcflow cancel queued-run" in str(err.value)


def test_an_unanswerable_batch_system_keeps_the_lease_live(tmp_path):
    def down(backend, ids):
        raise OSError("squeue: cannot reach slurmctld")

    lock = _lock(tmp_path, ask=down)
    _plant(lock, _submitted(("77",)))
    with pytest.raises(RunLockedError, match="cannot reach slurmctld"):
        lock.acquire({"run_id": "starting"})


def test_ended_allocations_and_an_ended_submitter_make_the_lease_stale(tmp_path):
    lock = _lock(tmp_path, ask=lambda backend, ids: [])
    _plant(lock, _submitted(("77",)))
    lock.acquire({"run_id": "starting"})
    lock.release()


def test_the_driver_inside_the_allocation_adopts_its_runs_lease(tmp_path):
    submitter = _lock(tmp_path, ask=lambda backend, ids: list(ids))
    submitter.acquire({"run_id": "starting"})
    submitter.set_run("run-a")
    submitter.note_allocations("slurm", ["77"])
    submitter.hand_over()  # --detach: the command returns, the lease stays
    submitter.release()
    assert ls.read_lease(submitter.path).allocations == ("77",)

    other = _lock(tmp_path, ask=lambda backend, ids: list(ids), adopt_patience=0.3)
    with pytest.raises(RunLockedError, match="run-a"):
        other.adopt("run-b")  # an allocation of another run must not drive

    driver = _lock(tmp_path, ask=lambda backend, ids: list(ids))
    driver.adopt("run-a")
    try:
        held = ls.read_lease(driver.path)
        assert held.run_id == "run-a" and held.allocations == ("77",)
        assert held.submitter == ProcessIdentity.current()
    finally:
        driver.release()
    assert not driver.path.exists()


def test_the_driver_adopts_its_lease_through_a_stale_view_of_the_file(tmp_path):
    """A node's shared-file-system client may show the lease as it was before the
    submitter named the new run in it (the killed run's, say) for a moment: the driver
    inside the allocation reads it again before it judges, and adopts its run's lease
    once the file names it."""
    import threading

    path = tmp_path / "state" / "locks" / "wf.lease"
    # What the node sees first: a run whose driver holds the lease on another host (live
    # for anyone who judges it now).
    away = replace(ProcessIdentity.current(), host="elsewhere", boot_id="another-boot")
    old = replace(ls.LeaseRecord.new("run-old"), holder=away)
    path.parent.mkdir(parents=True)
    assert ls.create(path, old)
    new = replace(ls.LeaseRecord.new("run-new"), holder=away)
    later = threading.Timer(1.0, ls.rewrite, (path, new))  # the fresh view arrives
    later.start()
    driver = _lock(tmp_path, ask=lambda backend, ids: [])
    try:
        driver.adopt("run-new")
        assert ls.read_lease(path).run_id == "run-new"
        assert ls.read_lease(path).holder == ProcessIdentity.current()
    finally:
        later.join()
        driver.release()


def test_the_holder_renews_and_a_run_that_lost_its_lease_is_told(tmp_path):
    lock = _lock(tmp_path, period=0.05)
    lost: list[str] = []
    lock.on_lost = lost.append
    lock.acquire({"run_id": "run-a"})
    first = ls.read_lease(lock.path).expires
    _wait("a renewal", lambda: ls.read_lease(lock.path).expires > first)
    lock.path.unlink()
    assert ls.create(lock.path, ls.LeaseRecord.new("run-b"))
    _wait("the lost lease to be reported", lambda: bool(lost))
    assert "run run-b holds it now" in lost[0]
    lock.release()
    assert ls.read_lease(lock.path).run_id == "run-b"  # not removed: not ours


def test_a_damaged_lease_file_is_not_a_traceback(tmp_path):
    lock = _lock(tmp_path)
    lock.path.parent.mkdir(parents=True, mode=0o700)
    os.chmod(lock.path.parent, 0o700)
    lock.path.write_text("{not json")
    with pytest.raises(RunLockedError, match="another run of this workflow is active"):
        lock.acquire({"run_id": "starting"})  # fresh: it may be another version's run
    old = time.time() - ls.LEASE_TTL - ls.OTHER_HOST_MARGIN - 10
    os.utime(lock.path, (old, old))
    lock.acquire({"run_id": "starting"})
    lock.release()


def test_a_fresh_lease_of_a_driver_whose_allocation_ended_is_stale(tmp_path):
    """A driver on a node cannot be asked about its pid; it lives no longer than the
    allocation it runs in."""
    record = replace(_other_host(time.time() + ls.LEASE_TTL), backend="slurm",
                     allocations=("77",), holder_allocation="77")  # fmt: skip
    running = _lock(tmp_path, ask=lambda backend, ids: list(ids))
    _plant(running, record)
    with pytest.raises(RunLockedError, match="remote-run"):
        running.acquire({"run_id": "starting"})
    ended = _lock(tmp_path, ask=lambda backend, ids: [])
    ended.acquire({"run_id": "starting"})
    ended.release()


def test_a_local_run_whose_lease_another_run_took_stops(tmp_path, env):
    """Should another run ever hold the lease (a takeover the first run could not see
    coming), the first stops as `hpcflow cancel` stops it: its task never finishes."""
    from tests.conftest import write_workflow

    wf = write_workflow(
        tmp_path,
        "name: held\ntasks:\n  - name: nap\n    command: touch started; sleep 60; touch ended\n",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "-q"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _wait("the task to start", lambda: (tmp_path / "started").exists())
        (path,) = (tmp_path / ".hpcflow" / "locks").glob("*.lease")
        assert ls.read_lease(path).run_id != "starting"
        path.unlink()
        assert ls.create(path, ls.LeaseRecord.new("thief"))
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out + err
    assert "lost the workflow's lease" in err and "run thief holds it now" in err, err
    assert not (tmp_path / "ended").exists()
    assert ls.read_lease(path).run_id == "thief"  # the stopped run left it alone
