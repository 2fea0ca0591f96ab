"""Snapshots of a run's state (hpcflow.store.snapshot): a reader never returns a torn or
older commit, the writer publishes whole files, and readers of a run read one commit."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from hpcflow.store import snapshot as sn
from hpcflow.store.paths import RunPaths
from hpcflow.store.statedb import StateDB


def _image(tmp_path: Path, tasks: int = 3) -> bytes:
    folder = tmp_path / "image"
    folder.mkdir(exist_ok=True)
    writer = StateDB(folder / "state.sqlite")
    writer.add_tasks((i, f"t[i={i}]", "t", f"t-{i}", [], "pending") for i in range(tasks))
    writer.close()
    return (folder / "state.sqlite").read_bytes()


def test_a_snapshot_reads_back_whole(tmp_path):
    body = _image(tmp_path)
    data = sn.encode(sn.Snapshot(7, body, sealed=True))
    back = sn.decode(data)
    assert (back.seq, back.body, back.sealed) == (7, body, True)


@pytest.mark.parametrize("where", ["header", "body", "last"])
def test_a_flipped_byte_is_never_returned(tmp_path, where):
    data = bytearray(sn.encode(sn.Snapshot(3, _image(tmp_path))))
    at = {"header": 10, "body": len(data) // 2, "last": len(data) - 1}[where]
    data[at] ^= 0x01
    with pytest.raises(sn.TornSnapshot):
        sn.decode(bytes(data))


@pytest.mark.parametrize("cut", [0, 20, 60, -1])
def test_a_short_snapshot_is_torn(tmp_path, cut):
    data = sn.encode(sn.Snapshot(3, _image(tmp_path)))
    with pytest.raises(sn.TornSnapshot):
        sn.decode(data[:cut])


def test_the_reader_rereads_a_torn_file_and_never_returns_it(tmp_path, caplog):
    path = tmp_path / "state.snapshot"
    data = bytearray(sn.encode(sn.Snapshot(5, _image(tmp_path))))
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    reader = sn.SnapshotReader(tries=3)
    with caplog.at_level(logging.WARNING):
        assert reader.read(path) is None  # nothing whole: the caller reads the file itself
    assert reader.torn == 3
    assert "failed 3 reads" in caplog.text and str(path) in caplog.text


def test_the_sequence_never_goes_back(tmp_path, caplog):
    path = tmp_path / "state.snapshot"
    body = _image(tmp_path)
    reader = sn.SnapshotReader(tries=2)
    sn.publish(path, sn.Snapshot(9, body))
    assert reader.read(path).seq == 9
    sn.publish(path, sn.Snapshot(4, body))  # an older commit, as a stale cache shows it
    with caplog.at_level(logging.WARNING):
        assert reader.read(path).seq == 9
    assert reader.stale == 2 and "older than sequence 9" in caplog.text
    sn.publish(path, sn.Snapshot(10, body))
    assert reader.read(path).seq == 10


def test_a_torn_file_after_a_whole_one_shows_the_whole_one(tmp_path):
    path = tmp_path / "state.snapshot"
    body = _image(tmp_path)
    reader = sn.SnapshotReader(tries=2)
    sn.publish(path, sn.Snapshot(9, body))
    assert reader.read(path).seq == 9
    path.write_bytes(sn.encode(sn.Snapshot(10, body))[:-5])
    got = reader.read(path)
    assert (got.seq, got.body) == (9, body) and reader.torn == 2


def test_a_snapshot_missing_for_a_moment_is_read_again(tmp_path, caplog):
    """A name a rename replaced can be missing on a client for a moment: a reader that
    has seen the snapshot reads again, and at last shows the one it saw (never older)."""
    path = tmp_path / "state.snapshot"
    reader = sn.SnapshotReader(tries=3)
    sn.publish(path, sn.Snapshot(9, _image(tmp_path)))
    assert reader.read(path).seq == 9
    path.unlink()
    with caplog.at_level(logging.WARNING):
        assert reader.read(path).seq == 9
    assert reader.missing == 3 and "failed 3 reads" in caplog.text


def test_no_snapshot_at_all_is_said_at_once(tmp_path):
    """A run from before snapshots: its folder lists none, so no read is tried again."""
    reader = sn.SnapshotReader()
    assert reader.read(tmp_path / "state.snapshot") is None
    assert reader.missing == 0


def test_publish_replaces_the_file_atomically(tmp_path):
    """A new file, renamed over the old one: an open reader keeps the whole old file,
    and no temporary file is left."""
    path = tmp_path / "state.snapshot"
    body = _image(tmp_path)
    sn.publish(path, sn.Snapshot(1, body))
    with open(path, "rb") as old:
        inode = os.fstat(old.fileno()).st_ino
        sn.publish(path, sn.Snapshot(2, body + b"x" * 100))
        assert os.stat(path).st_ino != inode
        assert sn.decode(old.read()).seq == 1
    assert sn.decode(path.read_bytes()).seq == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["image", "state.snapshot"]
    assert (path.stat().st_mode & 0o777) == 0o600


def test_the_sequence_is_the_commit_counter(tmp_path):
    """The writer publishes each commit it is asked for at once; the sequence grows with
    every one."""
    db = StateDB(tmp_path / "state.sqlite")
    db.add_tasks((i, f"t[i={i}]", "t", f"t-{i}", [], "pending") for i in range(3))
    seqs = []
    for n in range(4):
        db.set_meta(n=n)
        seqs.append(sn.decode((tmp_path / "state.snapshot").read_bytes()).seq)
    db.close()
    assert seqs == sorted(set(seqs)), seqs


def test_readers_see_one_commit_until_they_refresh(tmp_path):
    path = tmp_path / "state.sqlite"
    writer = StateDB(path)
    writer.add_tasks((i, f"t[i={i}]", "t", f"t-{i}", [], "pending") for i in range(4))
    writer.set_meta(status="running", n=1)
    reader = StateDB(path, readonly=True)
    assert reader.snapshot is not None
    writer.set_states([(0, "succeeded")])
    writer.set_meta(n=2)
    # The file has the new commit; the reader still shows its snapshot's, whole.
    assert reader.meta()["n"] == 1 and reader.counts() == {"t": {"pending": 4}}
    reader.refresh()
    assert reader.meta()["n"] == 2 and reader.counts() == {"t": {"pending": 3, "succeeded": 1}}
    reader.close()
    writer.close()


def test_a_run_over_is_sealed_and_read_from_the_file(tmp_path):
    path = tmp_path / "state.sqlite"
    writer = StateDB(path)
    writer.add_tasks([(0, "t", "t", "t", [], "succeeded")])
    writer.set_meta(status="running")
    writer.close()
    assert not sn.decode((tmp_path / "state.snapshot").read_bytes()).sealed
    writer = StateDB(path)
    writer.set_meta(status="succeeded")
    writer.close()
    assert sn.decode((tmp_path / "state.snapshot").read_bytes()).sealed
    with StateDB(path, readonly=True) as reader:
        assert reader.snapshot is not None and reader.snapshot.sealed
        assert reader.meta()["status"] == "succeeded"


def test_a_run_without_a_snapshot_is_read_from_the_file(tmp_path):
    path = tmp_path / "state.sqlite"
    writer = StateDB(path)
    writer.set_meta(status="running")
    writer.close()
    (tmp_path / "state.snapshot").unlink()
    with StateDB(path, readonly=True) as reader:
        assert reader.snapshot is None and reader.meta()["status"] == "running"


def test_batched_commits_are_published_in_proportion_to_their_cost(tmp_path):
    """After a snapshot that cost c seconds, a batched commit is published only
    cost_factor*c seconds later (when the writer is idle: flush_due), or at close; a
    commit asked for at once is published at once."""
    path = tmp_path / "state.sqlite"
    db = StateDB(path)
    db.add_tasks([(0, "t", "t", "t", [], "pending")])
    publisher, writer = db._publisher, db._writer
    assert publisher is not None and writer is not None
    publisher.cost_factor = 1e6  # the next batched publish is due in a long while
    writer.commit_interval = 0.0  # every batched write commits at once
    db.set_states([(0, "running")])
    db.flush_due()
    assert StateDB(path, readonly=True).counts() == {"t": {"pending": 1}}
    db.set_meta(n=1)  # asked for at once
    assert StateDB(path, readonly=True).counts() == {"t": {"running": 1}}
    db.set_states([(0, "succeeded")])
    db.flush_due()
    assert StateDB(path, readonly=True).counts() == {"t": {"running": 1}}
    db.close()
    assert StateDB(path, readonly=True).counts() == {"t": {"succeeded": 1}}


def test_run_paths_name_the_snapshot_statedb_publishes(tmp_path):
    paths = RunPaths(tmp_path)
    assert sn.snapshot_path(paths.state_db) == paths.state_snapshot
