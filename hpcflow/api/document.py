"""Python values as a workflow file holds them.

The API writes what it is given as the YAML a user would have written: ``range(0, 10,
2)`` in a sweep as ``{range: [0, 10, 2]}``, tuples as lists, paths as text, a
``timedelta`` as seconds, NumPy scalars as plain numbers, a task object as its name.
Anything else that YAML cannot hold is refused, naming where it was given.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Protocol, runtime_checkable

#: The keys of ``foreach`` that hold sweeps of their own (parameter → values).
_NESTED_SWEEPS = ("product", "zip")


@runtime_checkable
class Named(Protocol):
    """Something that stands for a task in a document (a Task): its name."""

    @property
    def name(self) -> str: ...


class Unwritable(ValueError):
    """A value a workflow file cannot hold; ``where`` is its place below the key it was
    given for (``.x[2]``), for the error message."""

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(message)
        self.where = where


def plain(value: Any, where: str = "") -> Any:
    """``value`` as YAML data (see the module's docstring); raises :class:`Unwritable`."""
    if value is None or type(value) in (bool, int, float, str):
        return value
    # Subclasses (a str enum, NumPy's float64) as their plain values: YAML writes those.
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, Named) and not isinstance(value, Mapping):
        return value.name
    if isinstance(value, range):
        return list(value)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise Unwritable(f"a key must be text, not {type(key).__name__} {key!r}", where)
            out[key] = plain(item, f"{where}.{key}")
        return out
    if isinstance(value, list | tuple):
        return [plain(item, f"{where}[{i}]") for i, item in enumerate(value)]
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", None) == 0:
        return plain(item(), where)  # a NumPy scalar
    raise Unwritable(
        f"a {type(value).__name__} cannot be written in a workflow file (text, numbers, "
        "true/false, lists and mappings of those can)",
        where,
    )


def sweep(foreach: Mapping[str, Any]) -> dict[str, Any]:
    """``foreach`` as a workflow file holds it: a ``range`` of values as ``{range:
    [start, stop, step]}``, in ``product`` and ``zip`` too; ``from_files`` and
    ``from_table`` as given."""
    out: dict[str, Any] = {}
    for key, values in foreach.items():
        if key in _NESTED_SWEEPS and isinstance(values, Mapping):
            out[key] = {name: _values(v, f".{key}.{name}") for name, v in values.items()}
        else:
            out[key] = _values(values, f".{key}")
    return out


def _values(values: Any, where: str) -> Any:
    if isinstance(values, range):
        bounds = [values.start, values.stop] + ([values.step] if values.step != 1 else [])
        return {"range": bounds}
    return plain(values, where)
