"""The W8 task bodies: every tool of bench/values.py runs these same functions.

chain: ``start`` makes a 256 MiB float64 array, eight ``step`` tasks each add one to the
array they receive, and ``finish`` receives the last and returns its sum: nine hand-overs
of 256 MiB. gather: 200 ``part`` tasks each return 1 MiB, one ``reduce`` receives all 200.
The ``*_file`` forms are the same work handed over as .npy files (np.save / np.load).
"""

from __future__ import annotations

import numpy as np

CHAIN_TASKS = 10
CHAIN_ELEMENTS = 256 * 2**20 // 8
GATHER_N = 200
PART_ELEMENTS = 2**20 // 8


def start() -> np.ndarray:
    return np.ones(CHAIN_ELEMENTS)


def step(x: np.ndarray) -> np.ndarray:
    return x + 1.0


def finish(x: np.ndarray) -> float:
    return float(x.sum())


def part(i: int) -> np.ndarray:
    return np.full(PART_ELEMENTS, float(i))


def reduce(parts: list[np.ndarray]) -> float:
    return float(sum(p.sum() for p in parts))


def expected(workload: str) -> float:
    """The value the last task returns."""
    if workload == "chain":
        return float(CHAIN_ELEMENTS * (CHAIN_TASKS - 1))
    return float(PART_ELEMENTS * sum(range(GATHER_N)))


def start_file(out: str) -> None:
    np.save(out, start())


def step_file(inp: str, out: str) -> None:
    np.save(out, step(np.load(inp)))


def finish_file(inp: str) -> float:
    return finish(np.load(inp))


def part_file(i: int, out: str) -> None:
    np.save(out, part(i))


def reduce_file(paths: list[str]) -> float:
    return reduce([np.load(p) for p in paths])
