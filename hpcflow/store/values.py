"""The files of the return values python tasks hand each other (``from:``).

A producer whose value some task receives writes it to its task folder
(``value.pickle``, pickle protocol 5: NumPy arrays go in as their raw buffers) with an
atomic rename, so a consumer on any node of the shared file system sees all of it or
none of it; the file also lets a later run hand an up-to-date producer's value to a
consumer that must run again. Workers import this module: standard library only.
"""

from __future__ import annotations

import pickle
from typing import Any

from hpcflow.store.atomic import write_atomic


def save_value(path: str, value: Any) -> int:
    """Write ``value`` to ``path`` atomically (streamed: a large array is not copied into
    one big bytes object first); its size in bytes.

    Not fsynced: a value file is read on this host while the run goes on (Dask moves
    values between hosts in memory), or by a later run, and one a machine crash cut short
    fails to load with an error that names it (:func:`load_value`)."""
    return write_atomic(path, lambda handle: pickle.dump(value, handle, protocol=5), durable=False)


class ValueUnreadable(Exception):
    """A value file that exists but does not load (cut short by a machine crash)."""


def load_value(path: str) -> Any:
    """The value a producer saved at ``path``."""
    with open(path, "rb") as handle:
        try:
            return pickle.load(handle)  # noqa: S301 - written by this run's own tasks
        except (EOFError, pickle.UnpicklingError) as exc:
            raise ValueUnreadable(
                f"the value file {path} is cut short or damaged ({exc}); run its producer "
                "again with --rerun"
            ) from exc
