"""Return values that python tasks hand to each other (``from:``), as files.

A producer whose value some task receives writes it to its task folder
(``value.pickle``, pickle protocol 5: NumPy arrays go in as their raw buffers) with an
atomic rename, so a consumer on any node of the shared file system sees all of it or
none of it; the file also lets a later run hand an up-to-date producer's value to a
consumer that must run again. A consumer's call names the files and how to assemble
each argument (:data:`ValuesIn`). Workers import this module: standard library only.
"""

from __future__ import annotations

import base64
import os
import pickle
import tempfile
from typing import Any

#: Argument name → (shape, [(key, value file)]); shape is "value", "list" or "dict".
ValuesIn = dict[str, tuple[str, list[tuple[Any, str]]]]


def save_value(path: str, value: Any) -> int:
    """Write ``value`` to ``path`` atomically (streamed: a large array is not copied into
    one big bytes object first); its size in bytes."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".value-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            pickle.dump(value, handle, protocol=5)
            size = handle.tell()
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return size


def load_value(path: str) -> Any:
    """The value a producer saved at ``path``."""
    with open(path, "rb") as handle:
        return pickle.load(handle)  # noqa: S301 - written by this run's own tasks


def arguments(values_in: ValuesIn | None) -> dict[str, Any]:
    """The keyword arguments ``values_in`` describes, loaded (each file read once)."""
    if not values_in:
        return {}
    loaded: dict[str, Any] = {}

    def value(path: str) -> Any:
        if path not in loaded:
            loaded[path] = load_value(path)
        return loaded[path]

    out: dict[str, Any] = {}
    for name, (shape, sources) in values_in.items():
        if shape == "value":
            out[name] = value(sources[0][1])
        elif shape == "list":
            out[name] = [value(path) for _, path in sources]
        else:
            out[name] = {key: value(path) for key, path in sources}
    return out


def encode_values(values_in: ValuesIn | None) -> str:
    """``values_in`` as one command-line argument (for a task run as a child process)."""
    return base64.b64encode(pickle.dumps(values_in or {}, protocol=5)).decode("ascii")


def decode_values(text: str) -> ValuesIn:
    """What :func:`encode_values` made."""
    return pickle.loads(base64.b64decode(text))  # noqa: S301 - our own argument
