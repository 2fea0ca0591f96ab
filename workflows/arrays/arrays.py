"""Arrays handed from task to task with ``from:``: no files of your own.

Each ``simulate`` makes a 64 MiB array; ``smooth`` receives the one of its own seed;
``summary`` gathers all of them. With ``gpus: 1`` and CuPy installed the arrays are CuPy
arrays on the GPU (and travel GPU to GPU with the UCX transport); otherwise NumPy.
"""

from __future__ import annotations

import os


def _xp():
    """CuPy when this task was given a GPU and CuPy is there, else NumPy."""
    if os.environ.get("CUDA_VISIBLE_DEVICES"):
        try:
            import cupy

            return cupy
        except ImportError:
            pass
    import numpy

    return numpy


def simulate(seed: int, size: int):
    xp = _xp()
    return xp.random.default_rng(seed).standard_normal((size, 1024))


def smooth(seed: int, trace):
    xp = _xp()
    kernel = xp.ones(5) / 5
    return xp.stack([xp.convolve(row, kernel, mode="same") for row in trace[:64]])


def summary(smoothed, raw_by_seed) -> dict:
    return {
        "seeds": sorted(int(s) for s in raw_by_seed),
        "raw_means": [round(float(raw_by_seed[s].mean()), 6) for s in sorted(raw_by_seed)],
        "smoothed_std": [round(float(s.std()), 6) for s in smoothed],
    }
