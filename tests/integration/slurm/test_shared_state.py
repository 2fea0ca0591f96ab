"""A run's state, written on a node and read on the submit side, through two clients of
the shared file system (the test cluster's GlusterFS volume).

That is how pilot mode works: the driver commits ``state.sqlite`` inside the allocation
while ``hpcflow run`` follows it (and ``hpcflow status`` reads it) on the login node. A
client serves some pages from its caches and some fresh from the server, so a reader of
the file itself saw pages of two commits now and then, once with no error at all (168 of
400 rows). Readers read the snapshots the writer publishes instead
(:mod:`hpcflow.store.snapshot`): every view must be one whole commit, and the reader must
come to see the last commit. The workload and the check are
:mod:`tests.fault.torn_reads`, whose script makes the recorded run of a million reads.
"""

from __future__ import annotations

import time

import pytest

from hpcflow.store.snapshot import SnapshotReader
from hpcflow.store.statedb import StateDB
from tests.fault.torn_reads import Tally, check_view, read_while_writing, writer_on_node

pytestmark = pytest.mark.slurm

#: Views to take, and commits to see them span, before the writer is stopped.
VIEWS = 300
COMMITS = 40


def enough(tally: Tally) -> bool:
    return tally.views >= VIEWS and tally.last_commit - (tally.first_commit or 0) >= COMMITS


def test_every_view_on_another_client_is_one_whole_commit(slurm_cluster, tmp_path):
    snapshots = SnapshotReader()
    with writer_on_node(slurm_cluster.env, tmp_path, seconds=300) as (writer, state, stop):
        tally = read_while_writing(state, lambda: writer.poll() is None, enough, snapshots)
        stop.touch()
        out, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, out + err
    commits = int(out.split()[-1])
    assert tally.wrong == 0, tally.examples
    assert not tally.errors, tally.errors
    # The views followed the writer through its commits (it was not stopped by its own
    # 300 s limit first).
    assert enough(tally), (tally, commits)

    # The writer ended the run: its last snapshot is sealed; once this client's caches
    # show it (a moment: they may still name an older whole snapshot), readers read the
    # file itself: the last commit, whole, read after read.
    deadline = time.monotonic() + 30
    while True:
        with StateDB(state, readonly=True, snapshots=snapshots) as db:
            if db.snapshot is not None and db.snapshot.sealed:
                break
            seen = db.snapshot
        assert time.monotonic() < deadline, f"the sealed snapshot, 30 s on: still {seen}"
        time.sleep(0.1)
    final = Tally()
    for _ in range(50):
        with StateDB(state, readonly=True, snapshots=snapshots) as db:
            assert db.snapshot is not None and db.snapshot.sealed
            assert db.meta()["status"] == "succeeded"
            check_view(db, final)
    assert final.wrong == 0, final.examples
    assert (final.first_commit, final.last_commit) == (commits, commits)
