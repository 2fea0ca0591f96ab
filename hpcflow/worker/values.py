"""A consumer's arguments from the values python tasks hand each other (``from:``).

A consumer's call names the producers' value files (:mod:`hpcflow.store.values`) and how
to assemble each argument from them (:data:`ValuesIn`). Workers import this module:
standard library only.
"""

from __future__ import annotations

import base64
import pickle
from typing import Any

from hpcflow.store.values import load_value

#: Argument name → (shape, [(key, value file)]); shape is "value", "list" or "dict".
ValuesIn = dict[str, tuple[str, list[tuple[Any, str]]]]


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
