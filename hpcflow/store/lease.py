"""A lease file: which run may drive a workflow now, across the hosts of a shared file system.

``flock`` belongs to one kernel (and on NFS to ``lockd``), and a run's driver may live on
a compute node while its run is submitted from a login node. A lease is a small JSON file
beside the workflow's memo that names the run that holds it, the process holding it now
(:class:`~hpcflow.store.process.ProcessIdentity`), the process that submitted the run, the
batch allocations submitted for it, and an expiry that its holder pushes forward every few
seconds. Only its holder rewrites it.

- **Taken** with an atomic create: the record is written whole to a temporary file which
  is then hard-linked to the lease's name; ``link`` fails when the name exists, and the
  file never appears half written (where the file system has no hard links,
  ``O_CREAT|O_EXCL`` and a write).
- **Renewed** by its holder: a new record in a temporary file renamed over the lease.
- **Stale** (:func:`judge`) only when nothing of its run can still drive: its holder and
  its submitter are gone (on this machine: the process is dead or its pid names another
  process; on another host: its expiry passed by :data:`OTHER_HOST_MARGIN`, or the
  allocation it runs in has ended) and none of its allocations is queued or running as
  the batch system says (one that cannot be asked counts as running).
- **Broken** (:func:`break_stale`) by one contender at a time: it first creates a claim
  named after the stale record's token with ``O_EXCL``, checks the lease is still that
  record, removes it and takes a new one with the atomic create.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hpcflow.store.process import ProcessIdentity

log = logging.getLogger(__name__)

#: Seconds between two renewals by the holder.
LEASE_PERIOD = 5.0
#: Seconds a renewal holds the lease for.
LEASE_TTL = 60.0
#: Seconds past its expiry after which a lease held on another host is stale (clock skew
#: between hosts, shared-file-system attribute caches).
OTHER_HOST_MARGIN = 60.0
#: Seconds the driver inside an allocation keeps reading a lease that names another run
#: before it judges that run: its submitter wrote this run's id before submitting, and a
#: node's shared-file-system client may show an older version of the file for a while
#: (GlusterFS caches metadata for a second, NFS for up to its `actimeo`).
ADOPT_PATIENCE = 10.0
#: Seconds after which a claim to break a stale lease is itself stale (its maker died).
CLAIM_STALE = 30.0

#: What the batch system says of allocations: (backend, ids) -> the ids still queued or
#: running (ids it no longer knows count as ended). Raises when it cannot be asked.
AllocationsLive = Callable[[str, Sequence[str]], Sequence[str]]


@dataclass(frozen=True)
class LeaseRecord:
    """What a lease file holds."""

    run_id: str
    token: str
    holder: ProcessIdentity
    expires: float
    renewed: float
    #: The process that submitted the run's allocations (it follows them and may submit
    #: continuations), when another process (the driver inside one) holds the lease now.
    submitter: ProcessIdentity | None = None
    backend: str | None = None
    allocations: tuple[str, ...] = ()
    workflow: str = ""
    #: The allocation the holder runs in (a driver inside one): it ends with it.
    holder_allocation: str | None = None

    @classmethod
    def new(cls, run_id: str, workflow: str = "", ttl: float = LEASE_TTL) -> LeaseRecord:
        """A record held by this process from now on."""
        now = time.time()
        return cls(run_id, os.urandom(8).hex(), ProcessIdentity.current(), now + ttl, now,
                   workflow=workflow)  # fmt: skip

    def renewed_now(self, ttl: float = LEASE_TTL) -> LeaseRecord:
        now = time.time()
        return replace(self, expires=now + ttl, renewed=now)

    def to_bytes(self) -> bytes:
        data: dict[str, Any] = {
            "run_id": self.run_id,
            "token": self.token,
            "holder": self.holder.to_meta(),
            "expires": self.expires,
            "renewed": self.renewed,
            "submitter": self.submitter.to_meta() if self.submitter else None,
            "backend": self.backend,
            "allocations": list(self.allocations),
            "workflow": self.workflow,
            "holder_allocation": self.holder_allocation,
        }
        return json.dumps(data).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> LeaseRecord | None:
        """The record, or None when ``data`` is not one."""
        try:
            raw = json.loads(data)
            holder = ProcessIdentity.from_meta(raw["holder"])
            if holder is None:
                return None
            return cls(
                str(raw["run_id"]),
                str(raw["token"]),
                holder,
                float(raw["expires"]),
                float(raw["renewed"]),
                ProcessIdentity.from_meta(raw.get("submitter")),
                None if raw.get("backend") is None else str(raw["backend"]),
                tuple(str(a) for a in raw.get("allocations") or ()),
                str(raw.get("workflow") or ""),
                None if raw.get("holder_allocation") is None else str(raw["holder_allocation"]),
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


def read_lease(path: Path) -> LeaseRecord | None:
    """The lease at ``path``; None when there is none. A file that is no lease (damaged,
    or another version's) reads as a record held by nobody, renewed when it was last
    written: it turns stale as one held on another host does."""
    try:
        data = path.read_bytes()
        mtime = path.stat().st_mtime
    except FileNotFoundError:
        return None
    record = LeaseRecord.from_bytes(data)
    if record is not None:
        return record
    nobody = ProcessIdentity("?", "", "", 0, None)
    token = f"unreadable-{int(mtime)}-{len(data)}"
    return LeaseRecord("?", token, nobody, mtime + LEASE_TTL, mtime)


def _write_new(path: Path, record: LeaseRecord) -> bool:
    """Write ``record`` to ``path`` (0600) if no file has that name: False if one has."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return False
    try:
        # No fsync: a host that crashes takes its holders with it, and close() sends the
        # data to a network file system's server (close-to-open).
        os.write(fd, record.to_bytes())
    finally:
        os.close(fd)
    return True


def _temporary(path: Path, record: LeaseRecord) -> Path:
    """``record`` written whole (0600) to a new file beside ``path``."""
    tmp = path.with_name(f".{path.name}.{record.token}.{os.getpid()}.{os.urandom(3).hex()}")
    _write_new(tmp, record)
    return tmp


def create(path: Path, record: LeaseRecord) -> bool:
    """Take the lease at ``path`` with ``record`` if nobody holds it: True when taken."""
    tmp = _temporary(path, record)
    try:
        try:
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                return _write_new(path, record)  # (no hard links here)
            # NFS: the link may have been made though its reply was lost.
            if os.stat(tmp).st_nlink == 2:
                return True
            raise
    finally:
        os.unlink(tmp)


def rewrite(path: Path, record: LeaseRecord) -> None:
    """Replace the lease at ``path`` by ``record`` (its holder only)."""
    os.replace(_temporary(path, record), path)


def remove(path: Path, token: str) -> bool:
    """Remove the lease at ``path`` if it is still the record ``token``."""
    current = read_lease(path)
    if current is None or current.token != token:
        return False
    path.unlink(missing_ok=True)
    return True


def break_stale(path: Path, stale: LeaseRecord, record: LeaseRecord) -> bool:
    """Replace the stale lease ``stale`` by ``record``: True when this process now holds
    it, False when another contender got there first (judge the lease again)."""
    claim = path.with_name(f"{path.name}.break-{stale.token}")
    for _ in range(2):
        try:
            os.close(os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
            break
        except FileExistsError:
            try:
                age = time.time() - claim.stat().st_mtime
            except FileNotFoundError:
                continue
            if age < CLAIM_STALE:
                return False  # another contender is breaking it now
            claim.unlink(missing_ok=True)  # its maker died halfway
    else:
        return False
    try:
        current = read_lease(path)
        if current is not None:
            if current.token != stale.token:
                return False
            path.unlink(missing_ok=True)
        return create(path, record)
    finally:
        claim.unlink(missing_ok=True)


@dataclass(frozen=True)
class Verdict:
    """Whether a lease's run may still drive, and why (a sentence)."""

    live: bool
    why: str


def _holder_gone(record: LeaseRecord, now: float) -> str | None:
    """Why the holder of ``record`` no longer holds it, or None while it may."""
    ident = record.holder
    if ident.on_this_machine():
        if ident.alive_here():
            return None
        return f"its holder, process {ident.pid} on {ident.host}, has ended"
    if now < record.expires + OTHER_HOST_MARGIN:
        return None
    return (
        f"its holder, process {ident.pid} on {ident.host}, last renewed it "
        f"{now - record.renewed:.0f}s ago"
    )


def judge(
    record: LeaseRecord, allocations_live: AllocationsLive | None, now: float | None = None
) -> Verdict:
    """Whether the run of ``record`` may still drive (live) or its lease is stale."""
    now = time.time() if now is None else now
    gone = _holder_gone(record, now)
    if gone is None and record.holder_allocation and record.backend and allocations_live:
        # A driver on a node that cannot be asked: it lives no longer than its allocation.
        try:
            if record.holder_allocation not in allocations_live(
                record.backend, [record.holder_allocation]
            ):
                gone = f"its holder's allocation {record.holder_allocation} has ended"
        except Exception as exc:  # cannot ask: the holder may well run
            log.info("cannot ask about allocation %s: %s", record.holder_allocation, exc)
    if gone is None:
        where = "on this machine" if record.holder.on_this_machine() else "(another host)"
        return Verdict(True, f"its driver, process {record.holder.pid} on "
                             f"{record.holder.host} {where}, holds it")  # fmt: skip
    reasons = [gone]
    if record.submitter is not None and record.submitter.on_this_machine():
        if record.submitter.alive_here():
            return Verdict(True, f"process {record.submitter.pid} on {record.submitter.host}, "
                                 "which submitted it, follows it")  # fmt: skip
    if record.allocations and record.backend:
        if allocations_live is None:
            return Verdict(True, f"its allocation(s) {', '.join(record.allocations)} may "
                                 "still be queued or running")  # fmt: skip
        try:
            live = list(allocations_live(record.backend, record.allocations))
        except Exception as exc:  # cannot ask: it may well run
            return Verdict(True, f"the batch system cannot tell whether its allocation(s) "
                                 f"{', '.join(record.allocations)} still run ({exc})")  # fmt: skip
        if live:
            return Verdict(True, f"its {record.backend} allocation {live[0]} is queued or running")
        reasons.append(f"its allocation(s) {', '.join(record.allocations)} have ended")
    return Verdict(False, "; ".join(reasons))
