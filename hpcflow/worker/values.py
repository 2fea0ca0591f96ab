"""A consumer's arguments from the values python tasks hand each other (``from:``).

A consumer's call names the producers' value files (:mod:`hpcflow.store.values`) and how
to assemble each argument from them (:data:`ValuesIn`). Workers import this module:
standard library only.
"""

from __future__ import annotations

import pickle
from typing import Any

from hpcflow.store.values import load_value
from hpcflow.worker.calls import TaskCall, ValuesIn


def arguments(values_in: ValuesIn | None) -> dict[str, Any]:
    """The keyword arguments ``values_in`` describes, loaded (each file read once)."""
    if not values_in:
        return {}
    loaded: dict[str, Any] = {}

    def value(path: str) -> Any:
        if path not in loaded:
            loaded[path] = load_value(path)
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


def encode_call(call: TaskCall) -> bytes:
    """``call`` as bytes for a python task run as a child process (its standard input)."""
    return pickle.dumps(call, protocol=5)


def decode_call(data: bytes) -> TaskCall:
    """What :func:`encode_call` made."""
    call = pickle.loads(data)  # noqa: S301 - our own process's call
    if not isinstance(call, TaskCall):
        raise TypeError(f"not a task call: {type(call).__name__}")
    return call
