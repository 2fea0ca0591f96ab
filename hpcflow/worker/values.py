"""A consumer's arguments from the values python tasks hand each other (``from:``).

A consumer's call names the producers' value files (:mod:`hpcflow.store.values`) and how
to assemble each argument from them (:data:`ValuesIn`). Workers import this module:
standard library only.
"""

from __future__ import annotations

import os
import pickle
import sys
from typing import Any

from hpcflow.store.values import load_value, worker_key
from hpcflow.worker.calls import TaskCall, ValuesIn, ValueStats


def arguments(values_in: ValuesIn | None, key_file: str = "") -> dict[str, Any]:
    """The keyword arguments ``values_in`` describes, loaded (each file read once, and
    checked with the value key in ``key_file``: :func:`~hpcflow.store.values.worker_key`)."""
    if not values_in:
        return {}
    loaded: dict[str, Any] = {}
    key = worker_key(key_file)

    def value(path: str) -> Any:
        if path not in loaded:
            loaded[path] = load_value(path, key)
        return loaded[path]

    return {
        name: assemble(shape, [(key, value(path)) for key, path in sources])
        for name, (shape, sources) in values_in.items()
    }


def assemble(shape: str, pairs: list[tuple[Any, Any]]) -> Any:
    """One argument from its (key, value) pairs: the value, a list or a dict."""
    if shape == "value":
        return pairs[0][1]
    if shape == "list":
        return [value for _, value in pairs]
    return dict(pairs)


def type_name(value: Any) -> str:
    """``value``'s type as the report shows it: ``numpy.ndarray``, ``dict``."""
    kind = type(value)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def size_of(value: Any) -> int:
    """Bytes ``value`` takes in memory, as Dask counts them (arrays: their buffers)."""
    try:
        from dask.sizeof import sizeof
    except ImportError:  # a worker python without Dask
        nbytes = getattr(value, "nbytes", None)
        return nbytes if isinstance(nbytes, int) else sys.getsizeof(value)
    return int(sizeof(value))


def file_stats(call: TaskCall, value: Any, ran_here: bool) -> ValueStats:
    """What the values of ``call`` weighed when they went through files: each value file
    it read counts once; its own value is measured here, or (a child process made it)
    is the size of the file it wrote, of a type unknown here."""
    paths = {path for _, sources in (call.values_in or {}).values() for _, path in sources}
    received = sum(_file_size(path) for path in paths)
    if ran_here:
        return ValueStats(type=type_name(value), nbytes=size_of(value), received=received)
    made = _file_size(call.value_out) if call.value_out else 0
    return ValueStats(type=None, nbytes=made or None, received=received)


def _file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def encode_call(call: TaskCall) -> bytes:
    """``call`` as bytes for a python task run as a child process (its standard input)."""
    return pickle.dumps(call, protocol=5)


def decode_call(data: bytes) -> TaskCall:
    """What :func:`encode_call` made."""
    call = pickle.loads(data)  # noqa: S301 - our own process's call
    if not isinstance(call, TaskCall):
        raise TypeError(f"not a task call: {type(call).__name__}")
    return call
