"""The ``foreach:`` block: parsed into a :class:`Sweep` of axis groups.

Forms accepted::

    foreach:                       # product of every key (the common case)
      seed: {range: [0, 100]}
      sample: [a, b]

    foreach:
      product: {seed: [1, 2]}      # combined as a product ...
      zip: {x: [1, 2], y: [a, b]}  # ... with these, which advance together

    foreach:
      from_files: "data/{sample}.fastq"   # values read from files (hpcflow.spec.sources),
      from_table: samples.tsv             # each source's parameters advancing together
      seed: [1, 2]
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from hpcflow.errors import SpecProblem
from hpcflow.spec.sources import SOURCE_KEYS, SourceReader
from hpcflow.spec.yamlpos import Path, Positions

ScalarValue = str | int | float | bool

#: Most instances one task's sweep may expand to.
MAX_INSTANCES = 1_000_000
#: Most task instances a whole workflow may expand to (every task, every sweep).
MAX_TOTAL_INSTANCES = 2_000_000


@dataclass(frozen=True)
class Axis:
    """One swept parameter: its name and values (a range stays lazy)."""

    name: str
    values: range | tuple[ScalarValue, ...]


@dataclass(frozen=True)
class Sweep:
    """Groups of axes: axes in a group advance together (zip); groups combine as a product."""

    groups: tuple[tuple[Axis, ...], ...]
    #: Tasks whose files a source reads (``after:``): the sweep's instances depend on them.
    after: tuple[str, ...] = ()
    #: A source reads files of a task that has not made them yet: the instances are not
    #: known (the task is planned when they are made).
    waiting: bool = False

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(axis.name for group in self.groups for axis in group)

    def __len__(self) -> int:
        total = 1
        for group in self.groups:
            total *= len(group[0].values)
        return total

    def combinations(self) -> Iterator[tuple[ScalarValue, ...]]:
        """Every combination, values in the order of :attr:`names`."""
        per_group = [
            list(zip(*(axis.values for axis in group), strict=True)) for group in self.groups
        ]
        if len(per_group) == 1:  # one group (one axis, or zipped axes): its tuples as they are
            yield from per_group[0]
            return
        for combo in itertools.product(*per_group):
            yield tuple(v for part in combo for v in part)


def parse_sweep(
    raw: Any,
    path: Path,
    positions: Positions,
    sources: SourceReader | None = None,
    task: str = "",
) -> tuple[Sweep | None, list[SpecProblem]]:
    """Turn the raw ``foreach`` mapping at ``path`` into a :class:`Sweep`, or problems;
    ``sources`` reads the ``from_files``/``from_table`` keys of task ``task``."""
    problems: list[SpecProblem] = []
    if not isinstance(raw, dict) or not raw:
        problems.append(positions.problem(path, "foreach must map parameter names to lists"))
        return None, problems
    groups: list[tuple[Axis, ...]] = []
    after: list[str] = []
    waiting = False
    for key in SOURCE_KEYS:
        if key not in raw:
            continue
        if sources is None:
            problems.append(positions.problem((*path, key), f"{key} is not read here", key=True))
            continue
        if isinstance(raw[key], dict) and isinstance(raw[key].get("after"), str):
            after.append(raw[key]["after"])
        read = sources.rows(task, key, raw[key], (*path, key), problems)
        if read is not None:
            names, rows = read
            waiting = waiting or rows is None
            groups.append(
                tuple(
                    Axis(name, tuple(row[i] for row in rows or ())) for i, name in enumerate(names)
                )
            )
    raw = {key: value for key, value in raw.items() if key not in SOURCE_KEYS}
    if set(raw) & {"product", "zip"}:
        extra = set(raw) - {"product", "zip"}
        for key in sorted(extra):
            problems.append(
                positions.problem(
                    (*path, key),
                    f"unexpected key {key!r} beside product/zip",
                    hint="put every swept parameter under 'product:' or 'zip:'",
                    key=True,
                )
            )
        for axis in _axes(raw.get("product") or {}, (*path, "product"), positions, problems):
            groups.append((axis,))
        zipped = _axes(raw.get("zip") or {}, (*path, "zip"), positions, problems)
        if zipped:
            lengths = {a.name: len(a.values) for a in zipped}
            if len(set(lengths.values())) > 1:
                problems.append(
                    positions.problem(
                        (*path, "zip"),
                        "zip needs lists of equal length, got "
                        + ", ".join(f"{k}: {v}" for k, v in lengths.items()),
                    )
                )
            else:
                groups.append(tuple(zipped))
    elif raw:
        for axis in _axes(raw, path, positions, problems):
            groups.append((axis,))
    seen: set[str] = set()
    for group in groups:
        for axis in group:
            if axis.name in seen:
                problems.append(
                    positions.problem(
                        path,
                        f"parameter {axis.name!r} is swept twice (by two of product, zip, "
                        "from_files, from_table)",
                    )
                )
            seen.add(axis.name)
    if problems:
        return None, problems
    if not groups:
        problems.append(positions.problem(path, "foreach names no parameters"))
        return None, problems
    if waiting:
        return Sweep(tuple(groups), tuple(after), waiting=True), problems
    total = 1
    for group in groups:
        total *= len(group[0].values)
    if total > MAX_INSTANCES:
        problems.append(
            positions.problem(
                path,
                f"this sweep has {total:,} combinations; at most {MAX_INSTANCES:,} are allowed",
                hint="split the task, or sweep fewer values",
            )
        )
        return None, problems
    return Sweep(tuple(groups), tuple(after)), problems


def _axes(raw: Any, path: Path, positions: Positions, problems: list[SpecProblem]) -> list[Axis]:
    if not isinstance(raw, dict):
        problems.append(positions.problem(path, "expected a mapping of parameter names to lists"))
        return []
    axes = []
    for name, value in raw.items():
        where = (*path, name)
        if not isinstance(name, str) or not name.isidentifier():
            problems.append(
                positions.problem(
                    where,
                    f"parameter name {name!r} must be an identifier (letters, digits, _)",
                    key=True,
                )
            )
            continue
        values = _values(value, where, positions, problems)
        if values is not None:
            axes.append(Axis(name, values))
    return axes


def _values(
    value: Any, where: Path, positions: Positions, problems: list[SpecProblem]
) -> range | tuple[ScalarValue, ...] | None:
    if isinstance(value, dict) and set(value) == {"range"}:
        spec = value["range"]
        ok = (
            isinstance(spec, list)
            and 1 <= len(spec) <= 3
            and all(isinstance(v, int) and not isinstance(v, bool) for v in spec)
        )
        if not ok:
            problems.append(
                positions.problem(
                    (*where, "range"),
                    "range takes 1 to 3 integers: [stop], [start, stop] or [start, stop, step]",
                )
            )
            return None
        if len(spec) == 3 and spec[2] == 0:
            problems.append(positions.problem((*where, "range"), "range step cannot be 0"))
            return None
        values: range | tuple[ScalarValue, ...] = range(*spec)
        try:
            len(values)
        except OverflowError:
            problems.append(
                positions.problem(
                    (*where, "range"),
                    f"range has more than {MAX_INSTANCES:,} values",
                    hint="split the task, or sweep fewer values",
                )
            )
            return None
    elif isinstance(value, list):
        bad = [i for i, v in enumerate(value) if not isinstance(v, str | int | float | bool)]
        for i in bad:
            problems.append(
                positions.problem((*where, i), "sweep values must be text, numbers or true/false")
            )
        if bad:
            return None
        values = tuple(value)
    else:
        problems.append(
            positions.problem(
                where,
                "expected a list of values or {range: [start, stop]}",
                hint="e.g. 'seed: [1, 2, 3]' or 'seed: {range: [0, 100]}'",
            )
        )
        return None
    if len(values) == 0:
        problems.append(positions.problem(where, "a swept parameter needs at least one value"))
        return None
    return values
