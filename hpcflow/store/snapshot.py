"""Snapshots of a run's state: whole commits of ``state.sqlite`` that readers on other
hosts can never see half of.

A reader on another client of a network file system can read pages of two commits of an
SQLite file that SQLite cannot tell from a sound one (measured on GlusterFS: 168 of 400
rows, no error, about once in 100,000 reads). So readers do not read the live file: after
its commits the one writer (the run's driver) publishes a *snapshot*, a new file holding
the whole database image of one commit, renamed over ``state.snapshot`` once it is
written (:func:`~hpcflow.store.atomic.write_atomic`). A snapshot is never changed after
its rename, so a reader sees one commit's image or another's, never a mix.

Each snapshot carries, in a fixed header, a sequence number and a SHA-256 of the header
and the body:

- the sequence is SQLite's file change counter of that image (header offset 24: it grows
  with every commit of the file, whoever commits it), so it never goes back, even when a
  continuation's driver takes over the file;
- a reader checks the checksum (a body that fails it is never returned) and that the
  sequence is not lower than one this process has already seen of the same snapshot; on
  either failure it reads again from a fresh open, and after :data:`READ_TRIES` tries it
  keeps to the newest whole snapshot it has (saying so in the log);
- a *sealed* snapshot is the last one: its writer closed with the run over (succeeded,
  failed or cancelled), and nothing writes ``state.sqlite`` any more.

The writer's cost stays bounded at scale (:class:`SnapshotPublisher`): a snapshot is the
whole file, so after a batched commit (the driver's task updates, at most one a second) it
is published only when the time since the last one is at least
:attr:`SnapshotPublisher.min_interval` and :attr:`SnapshotPublisher.cost_factor` times what
the last one cost; a commit left unpublished is published by the writer's next
:meth:`~SnapshotPublisher.publish_due` (the driver calls it when idle) or at close. A
commit the writer asks for at once (a status, new tasks, a pool's end: rare) is published
at once.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import sqlite3
import struct
import tempfile
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from hpcflow.store.atomic import write_atomic

log = logging.getLogger(__name__)

#: The first bytes of every snapshot file (format version 1).
MAGIC = b"HPCFSNP1"
#: magic, sequence, body length, flags, then the SHA-256 of those and of the body.
_HEADER = struct.Struct(">8sQQI32s")
_FIELDS = struct.Struct(">8sQQI")
#: Flag: the writer closed with the run over; nothing writes the state file any more.
SEALED = 1

#: How often a reader reads a snapshot that failed its checksum, went back or was
#: missing for a moment (0.01 s, then twice as long each time up to 1 s: 3.3 s in all).
READ_TRIES = 10


class TornSnapshot(ValueError):
    """Bytes that are not one whole snapshot (short, damaged, or of another format)."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One commit of a state file: its SQLite image, its sequence, and whether it is the
    last (``sealed``)."""

    seq: int
    body: bytes = field(repr=False)
    sealed: bool = False


def change_counter(image: bytes) -> int:
    """SQLite's file change counter of a database image (0 for an image too short)."""
    if len(image) < 28:
        return 0
    return int.from_bytes(image[24:28], "big")


def _digest(seq: int, length: int, flags: int, body: bytes) -> bytes:
    """SHA-256 of the header's fields and the body: a flipped bit anywhere shows."""
    digest = hashlib.sha256(_FIELDS.pack(MAGIC, seq, length, flags))
    digest.update(body)
    return digest.digest()


def encode(snapshot: Snapshot) -> bytes:
    """The file's bytes: the header, then the body."""
    flags = SEALED if snapshot.sealed else 0
    length = len(snapshot.body)
    digest = _digest(snapshot.seq, length, flags, snapshot.body)
    return _HEADER.pack(MAGIC, snapshot.seq, length, flags, digest) + snapshot.body


def decode(data: bytes) -> Snapshot:
    """The snapshot in ``data``; :class:`TornSnapshot` unless its header is ours and its
    body is whole and matches the checksum."""
    if len(data) < _HEADER.size:
        raise TornSnapshot(f"{len(data)} bytes: shorter than a snapshot's header")
    magic, seq, length, flags, digest = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise TornSnapshot(f"not a snapshot (starts {magic!r})")
    body = data[_HEADER.size :]
    if len(body) != length:
        raise TornSnapshot(f"body of {len(body)} bytes, its header says {length}")
    if _digest(seq, length, flags, body) != digest:
        raise TornSnapshot("the snapshot does not match its checksum")
    return Snapshot(seq, body, bool(flags & SEALED))


def publish(path: Path, snapshot: Snapshot) -> int:
    """Replace ``path`` with ``snapshot`` (a new file, fsynced, then renamed over it);
    the bytes written."""
    return write_atomic(path, lambda handle: handle.write(encode(snapshot)), make_parents=False)


def snapshot_path(db_path: Path) -> Path:
    """Where the snapshots of the SQLite file ``db_path`` are published
    (``state.sqlite`` → ``state.snapshot``)."""
    return db_path.with_name(db_path.stem + ".snapshot")


class SnapshotPublisher:
    """The writer's side: publishes the image of ``db_path`` to ``path`` after commits,
    at a bounded cost.

    The owner calls :meth:`committed` after each commit, :meth:`publish_due` when idle,
    and :meth:`close` last. A publish that fails (a full disk) is logged and tried again
    at the next one: readers then see an older whole commit, never a part of one.
    """

    #: Seconds between two snapshots at least.
    min_interval = 0.0
    #: Between two snapshots, at least this many times what the last one cost: the
    #: writer spends at most about 1/(1 + cost_factor) of its time publishing.
    cost_factor = 10.0

    def __init__(self, db_path: Path, path: Path | None = None) -> None:
        self.db_path = db_path
        self.path = path or snapshot_path(db_path)
        self._dirty = False
        self._last = float("-inf")  # monotonic time of the last publish
        self._cost = 0.0  # seconds the last publish took
        #: Snapshots published, and the seconds they took in all (for measurements).
        self.published = 0
        self.seconds = 0.0

    def _due(self) -> bool:
        wait = max(self.min_interval, self.cost_factor * self._cost)
        return time.monotonic() - self._last >= wait

    def committed(self, urgent: bool = False) -> None:
        """A commit happened: publish it now if ``urgent`` (the writer asked for it at
        once: a status, a new task, a pool's end that another process waits for) or due,
        else at the next due moment."""
        self._dirty = True
        if urgent or self._due():
            self.publish()

    def publish_due(self) -> None:
        """Publish the last commit if it is unpublished and due (cheap otherwise)."""
        if self._dirty and self._due():
            self.publish()

    def publish(self, *, sealed: bool = False) -> None:
        """Publish the file's image as it is now (the writer holds no transaction)."""
        started = time.monotonic()
        try:
            body = self.db_path.read_bytes()
            publish(self.path, Snapshot(change_counter(body), body, sealed))
        except OSError as exc:
            log.warning("could not publish the snapshot %s: %s", self.path, exc)
            return
        finally:
            self._last = time.monotonic()
        self._cost = self._last - started
        self._dirty = False
        self.published += 1
        self.seconds += self._cost

    def close(self, *, sealed: bool) -> None:
        """Publish what is unpublished; a ``sealed`` snapshot always (the last one)."""
        if self._dirty or sealed:
            self.publish(sealed=sealed)


class SnapshotReader:
    """The readers' side: the newest whole snapshot of a file, checked.

    It remembers, per snapshot path, the newest snapshot it returned (at most
    ``remember`` paths), so that what it returns never goes back within this process.
    """

    def __init__(self, remember: int = 16, tries: int = READ_TRIES) -> None:
        self.tries = tries
        self._remember = remember
        self._newest: OrderedDict[Path, Snapshot] = OrderedDict()
        self._lock = threading.Lock()  # (one reader may serve a process's threads)
        #: Reads that were not whole (checksum, length), went back, or found the file
        #: missing for a moment (a name a rename replaced): each read again.
        self.torn = 0
        self.stale = 0
        self.missing = 0

    def read(self, path: Path) -> Snapshot | None:
        """The newest whole snapshot at ``path``; None when there is none (a run from
        before snapshots), or when no read of it succeeded and this process has seen
        none of it before (said in the log: the caller then reads the state file)."""
        key = path.absolute()
        with self._lock:
            known = self._newest.get(key)
        delay = 0.01
        for attempt in range(1, self.tries + 1):
            got = self._read_once(path, known)
            if isinstance(got, Snapshot):
                self._keep(key, got)
                return got
            if got is None:
                # Missing: a run from before snapshots, or, for a moment, a client that
                # still looks the name up as the file a rename replaced. The folder's
                # listing (read afresh, where a name's lookup may be cached) tells them
                # apart, and on GlusterFS it also renews the client's lookup: with two
                # readers on one client a reader missed the name about once a view and
                # slowed to 5-12 views/s without it, with it once in ten (270 views/s).
                listed = _listed(path)
                if known is None and not listed:
                    return None
                self.missing += 1
                got = "missing for a moment"
            log.debug("snapshot %s: %s; reading it again", path, got)
            if attempt < self.tries:
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
        if known is not None:
            log.warning(
                "the snapshot %s failed %d reads (torn, missing, or older than sequence %d "
                "already seen); showing that newer whole snapshot instead",
                path, self.tries, known.seq,
            )  # fmt: skip
            return known
        log.warning(
            "the snapshot %s failed %d reads (torn or missing); reading the state file "
            "itself instead",
            path, self.tries,
        )  # fmt: skip
        return None

    def _read_once(self, path: Path, known: Snapshot | None) -> Snapshot | str | None:
        """One read: the snapshot, what was wrong with it, or None when it is missing."""
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ESTALE:  # renamed over while this client opened it
                return None
            raise
        try:
            snapshot = decode(data)
        except TornSnapshot as exc:
            self.torn += 1
            return f"torn: {exc}"
        if known is not None and snapshot.seq < known.seq:
            self.stale += 1
            return f"sequence {snapshot.seq} after {known.seq}"
        return snapshot

    def _keep(self, key: Path, snapshot: Snapshot) -> None:
        with self._lock:
            newest = self._newest.get(key)
            if newest is None or newest.seq <= snapshot.seq:  # (another thread's newer)
                self._newest[key] = snapshot
            self._newest.move_to_end(key)
            while len(self._newest) > self._remember:
                self._newest.popitem(last=False)


def _listed(path: Path) -> bool:
    """Whether ``path``'s folder lists it."""
    try:
        return path.name in os.listdir(path.parent)
    except OSError:
        return False


#: The reader every :class:`~hpcflow.store.statedb.StateDB` of this process shares, so
#: that no view goes back to a commit older than one this process already showed.
READER = SnapshotReader()


def open_image(body: bytes) -> sqlite3.Connection:
    """A read-only connection to a database image held in memory (URIs enabled, so read-
    only files can be joined with ``ATTACH``)."""
    conn = sqlite3.connect(":memory:", uri=True)
    try:
        if hasattr(conn, "deserialize"):  # Python 3.11+
            conn.deserialize(body)
        else:  # pragma: no cover - Python 3.10: a private temporary copy
            conn.close()
            fd, name = tempfile.mkstemp(suffix=".sqlite")
            with os.fdopen(fd, "wb") as handle:
                handle.write(body)
            conn = sqlite3.connect(f"{Path(name).as_uri()}?mode=ro", uri=True)
            os.unlink(name)  # (open: the connection keeps it until it closes)
        conn.execute("PRAGMA query_only=ON")
    except BaseException:
        conn.close()
        raise
    return conn
