"""The files of the return values python tasks hand each other (``from:``).

A producer whose value some task receives writes it to its task folder
(``value.pickle``, pickle protocol 5: NumPy arrays go in as their raw buffers) with an
atomic rename, so a consumer on any node of the shared file system sees all of it or
none of it; the file also lets a later run hand an up-to-date producer's value to a
consumer that must run again.

Unpickling runs code, so a value file is loaded only when this user wrote it: the file
must be this user's and writable by no one else (:mod:`hpcflow.store.private`), and it
must carry the right MAC. A value file is::

    MAGIC (16 bytes) | length of the pickle (8) | HMAC-SHA256(key, pickle) (32) | pickle

keyed by the user's value key: a random secret made ``0600`` in the per-user state
folder (``$HPCFLOW_HOME``, :func:`user_key`) on first use. Workers on compute nodes or
in containers may not see that folder, so every run folder holds a copy (``value.key``,
``0600``, in the ``0700`` run folder: :func:`write_run_key`) and a task's call names it
(``TaskCall.value_key``); :func:`key_from` reads it. What signs and checks what:

* a worker signs the values its tasks make, and checks the values its tasks receive
  from files (of this run, or of an earlier run the memo names), with its run's copy;
* ``hpcflow result`` / ``load_result`` / ``Run.result`` check with the key in the
  per-user state folder, never with a key file found beside a value.

Workers import this module: standard library only.
"""

from __future__ import annotations

import hashlib
import hmac
import mmap
import os
import pickle
from typing import Any, BinaryIO

from hpcflow.errors import HpcflowError
from hpcflow.store.atomic import write_atomic, write_bytes_atomic
from hpcflow.store.paths import VALUE_KEY, hpcflow_home
from hpcflow.store.private import StateNotPrivate, StrPath, private_dir, refusal

#: The first bytes of a value file (the format's version is its last digit).
MAGIC = b"hpcflow-value-1\n"
_LENGTH = 8
_MAC = 32
_MAC_AT = len(MAGIC) + _LENGTH
HEADER = _MAC_AT + _MAC
#: Files at least this large are read through a memory map (no copy on the heap).
_MAP_FROM = 1 << 20

_KEYS: dict[str, bytes] = {}


class ValueUnreadable(Exception):
    """A value file that exists but does not load (cut short by a machine crash)."""


class ValueNotTrusted(ValueUnreadable):
    """A value file that this user did not write, or that was changed since: not loaded."""


class _Signing:
    """A file that passes what is written to it on, and into a MAC."""

    def __init__(self, handle: BinaryIO, key: bytes) -> None:
        self._handle = handle
        self.mac = hmac.new(key, digestmod=hashlib.sha256)

    def write(self, data: Any) -> int:
        self.mac.update(data)
        return self._handle.write(data)


def save_value(path: str, value: Any, key: bytes) -> int:
    """Write ``value`` to ``path`` atomically with its MAC under ``key`` (streamed: a
    large array is not copied into one big bytes object first); its size in bytes.

    Not fsynced: a value file is read on this host while the run goes on (Dask moves
    values between hosts in memory), or by a later run, and one a machine crash cut short
    fails to load with an error that names it (:func:`load_value`)."""

    def write(handle: BinaryIO) -> None:
        handle.write(MAGIC + bytes(_LENGTH + _MAC))
        signing = _Signing(handle, key)
        pickle.dump(value, signing, protocol=5)
        length = handle.tell() - HEADER
        handle.seek(len(MAGIC))
        handle.write(length.to_bytes(_LENGTH, "little") + signing.mac.digest())
        handle.seek(0, os.SEEK_END)

    return write_atomic(path, write, durable=False)


def load_value(path: str, key: bytes, *others: bytes) -> Any:
    """The value a producer saved at ``path``, once the file is shown to be this user's
    and its MAC under ``key`` (or one of ``others``) is right (:class:`ValueNotTrusted`
    otherwise)."""
    with open(path, "rb") as handle:
        st = os.fstat(handle.fileno())
        problem = refusal(path, st)
        if problem is not None:
            raise ValueNotTrusted(f"{problem.message}; the value is not loaded")
        if st.st_size < _MAP_FROM:
            data = handle.read()
            return _unpickle(path, data, (key, *others))
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            with memoryview(mapped) as view:
                return _unpickle(path, view, (key, *others))


def kept(path: str) -> bool:
    """Whether a value file is at ``path`` in this format (its first bytes only: a file an
    older hpcflow wrote, without a MAC, counts as gone, so its producer runs again)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def value_pickle(path: str, *keys: bytes) -> bytes:
    """The pickle in the value file at ``path`` (without the header), once the file is
    shown to be this user's and its MAC under one of ``keys`` right: what ``hpcflow result -o``
    saves, for ``pickle.load`` elsewhere."""
    with open(path, "rb") as handle:
        problem = refusal(path, os.fstat(handle.fileno()))
        if problem is not None:
            raise ValueNotTrusted(f"{problem.message}; the value is not read")
        data = handle.read()
    _unpickle(path, data, keys, load=False)
    return data[HEADER:]


def _unpickle(
    path: str, data: bytes | memoryview, keys: tuple[bytes, ...], *, load: bool = True
) -> Any:
    if len(data) < HEADER:
        if MAGIC.startswith(bytes(data[: len(MAGIC)])):
            raise _cut_short(path, "it ends inside its header")
        raise _not_signed(path)
    if data[: len(MAGIC)] != MAGIC:
        raise _not_signed(path)
    length = int.from_bytes(data[len(MAGIC) : _MAC_AT], "little")
    if len(data) - HEADER < length:
        raise _cut_short(path, f"{len(data) - HEADER} of {length} bytes")
    with memoryview(data)[HEADER:] as body:
        mac = bytes(data[_MAC_AT:HEADER])
        if len(data) - HEADER != length or not any(
            hmac.compare_digest(hmac.digest(key, body, "sha256"), mac) for key in keys
        ):
            raise ValueNotTrusted(
                f"the value file {path} does not carry your MAC: it was changed after "
                "it was written, or not written by your hpcflow (another value key); it "
                "is not loaded. Run its producer again with --rerun"
            )
        if not load:
            return None
        try:
            return pickle.loads(body)  # noqa: S301 - this user's file, its MAC checked
        except (EOFError, pickle.UnpicklingError) as exc:
            raise _cut_short(path, str(exc)) from exc


def _cut_short(path: str, why: str) -> ValueUnreadable:
    return ValueUnreadable(
        f"the value file {path} is cut short or damaged ({why}); run its producer again "
        "with --rerun"
    )


def _not_signed(path: str) -> ValueNotTrusted:
    return ValueNotTrusted(
        f"{path} is not a value file of this hpcflow (no MAC: another program, or an "
        "older hpcflow, wrote it); it is not loaded. Run its producer again with --rerun"
    )


def user_key() -> bytes:
    """This user's value key, from the per-user state folder (made there, ``0600``, by
    the first call ever)."""
    home = hpcflow_home()
    path = os.path.join(home, VALUE_KEY)
    cached = _KEYS.get(path)
    if cached is not None:
        return cached
    private_dir(home)
    if not os.path.exists(path):
        # Made whole under another name, then linked in (never replacing a key another
        # process linked first): a reader never sees a part of a key.
        tmp = _new_key_file(home)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    return key_from(path)


def _new_key_file(home: StrPath) -> str:
    tmp = os.path.join(home, f".{VALUE_KEY}.{os.getpid()}.{os.urandom(4).hex()}")
    write_bytes_atomic(tmp, os.urandom(32).hex().encode() + b"\n", make_parents=False)
    return tmp


def key_from(path: str) -> bytes:
    """The value key in the file ``path`` (read once per process): a file of this
    user's, writable and readable by no one else."""
    cached = _KEYS.get(path)
    if cached is not None:
        return cached
    with open(path, "rb") as handle:
        st = os.fstat(handle.fileno())
        problem = refusal(path, st)
        if problem is not None:
            raise problem
        if st.st_mode & 0o077:
            raise StateNotPrivate(
                f"the value key {path} is readable by other accounts "
                f"(mode {st.st_mode & 0o777:04o})",
                hint=f"remove it (a new one is made; values signed with it must be made "
                f"again) or chmod 600 '{path}'",
            )
        try:
            key = bytes.fromhex(handle.read().decode("ascii").strip())
        except ValueError:
            key = b""
        if len(key) < 16:
            raise HpcflowError(
                f"the value key {path} is damaged",
                hint="remove it: a new one is made (the values signed with the old one "
                "are made again when needed)",
            )
    _KEYS[path] = key
    return key


def write_run_key(path: StrPath) -> None:
    """Put a copy of the user's value key at ``path`` (a run folder's ``value.key``,
    ``0600``), for the run's workers."""
    write_bytes_atomic(path, user_key().hex().encode() + b"\n", make_parents=False)


def worker_key(path: str) -> bytes:
    """The key a worker signs and checks values with: the run folder's copy at ``path``
    (``TaskCall.value_key``), or the user's own when the call names none (a run made by
    an older hpcflow, a unit test)."""
    return key_from(path) if path else user_key()
