"""The GPUs of one worker process, shared out to its tasks: each task that asks for GPUs
gets its own devices (``gpus: 2``: two whole ones) or a share of one (``gpus: 0.25``:
four such tasks on one device), named in the task's ``CUDA_VISIBLE_DEVICES``.

Dask's ``GPU`` resource already keeps a worker from taking more GPU work than it has
devices; this says which device each task uses, so two tasks on a two-GPU worker do
not both compute on the first one. A worker's own devices are the first
``HPCFLOW_WORKER_GPUS`` of its ``CUDA_VISIBLE_DEVICES`` (a pilot's worker sees the
node's other GPUs after its own, for peer access); without that variable, all of them.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)

#: How many of CUDA_VISIBLE_DEVICES are this worker's own (set where workers start).
OWN_GPUS = "HPCFLOW_WORKER_GPUS"
#: Shares are counted in these units, so that 0.1 + 0.2 fits as 0.3 does.
_UNITS = 1_000_000


class Devices:
    """Which of a worker's GPUs are in use, and by how much (in shares of one)."""

    def __init__(self, devices: list[str]) -> None:
        self.devices = devices
        self._used = dict.fromkeys(devices, 0)
        self._lock = threading.Lock()

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> Devices:
        env = os.environ if environ is None else environ
        visible = [d for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
        own = env.get(OWN_GPUS, "")
        if own.isdigit() and int(own) > 0:
            visible = visible[: int(own)]
        return cls(visible)

    def take(self, gpus: float) -> list[str]:
        """Devices for a task that needs ``gpus``: the least used that fit (whole GPUs:
        free ones). When none fit (more GPU work than Dask let through) the least used,
        with a warning, rather than none."""
        if not self.devices or gpus <= 0:
            return []
        need = round(gpus * _UNITS)
        with self._lock:
            order = sorted(self.devices, key=lambda d: (self._used[d], self.devices.index(d)))
            if gpus < 1:
                fits = [d for d in order if self._used[d] + need <= _UNITS]
                chosen = fits[:1] or order[:1]
            else:
                whole = int(gpus)
                fits = [d for d in order if self._used[d] == 0]
                chosen = (fits + [d for d in order if d not in fits])[:whole]
                need = _UNITS
            if len(fits) < (1 if gpus < 1 else int(gpus)):
                log.warning("no free GPU share for %g GPU(s): sharing %s", gpus, chosen)
            for device in chosen:
                self._used[device] += need
        return chosen

    def give_back(self, devices: list[str], gpus: float) -> None:
        share = _UNITS if gpus >= 1 else round(gpus * _UNITS)
        with self._lock:
            for device in devices:
                self._used[device] = max(0, self._used[device] - share)

    @contextmanager
    def held(self, gpus: float) -> Iterator[list[str]]:
        """Devices for the duration of one task."""
        chosen = self.take(gpus)
        try:
            yield chosen
        finally:
            if chosen:
                self.give_back(chosen, gpus)


_DEVICES: Devices | None = None
_INIT = threading.Lock()


def worker_devices() -> Devices:
    """This process's devices (read from its environment once)."""
    global _DEVICES
    with _INIT:
        if _DEVICES is None:
            _DEVICES = Devices.from_environment()
        return _DEVICES
