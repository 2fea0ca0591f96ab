"""Samples an elastic cluster's size into ``RUN_DIR/elastic.jsonl``.

One JSON line per sample: ``{"time": unix seconds, "workers": Dask workers connected,
"requested": worker jobs asked for (queued or running)}``, and with several pools the same
two counts per pool, ``"pools": {"gpu": {"workers": 1, "requested": 1}, ...}``. The file
is for people, tests and ``hpcflow status``; it is appended to by this thread only (the
state database keeps its single writer, the driver). The thread also remembers every
worker job id it saw, so that leftovers can be cancelled after the cluster has closed.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class SubmitFailures:
    """Worker-job submissions that failed in a row (a success resets the count).

    dask-jobqueue only logs a failed ``sbatch``/``qsub``, and keeps the job in its plan
    without ever submitting it again, so a run whose jobs cannot be submitted (a wrong
    partition) would wait forever. The watch ends the run when the first submissions all
    fail (nothing was ever submitted: the profile is wrong), or after ``limit`` failures
    in a row.
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.in_a_row = 0
        self.ever_succeeded = False
        self.last: str | None = None
        self._lock = threading.Lock()

    def succeeded(self) -> None:
        with self._lock:
            self.in_a_row = 0
            self.ever_succeeded = True

    def failed(self, exc: BaseException) -> None:
        with self._lock:
            self.in_a_row += 1
            self.last = brief(exc)
        log.warning("worker job submission failed (%d in a row): %s", self.in_a_row, self.last)

    @property
    def fatal(self) -> bool:
        with self._lock:
            if self.in_a_row and not self.ever_succeeded:
                return True
            return self.in_a_row >= self.limit


class WorkerWatch:
    """A daemon thread that samples ``cluster`` every ``interval`` seconds until stopped.

    When ``failures`` become fatal it calls ``on_fatal`` once (elastic mode interrupts
    the driver with it).
    """

    def __init__(
        self,
        cluster: Any,
        path: Path,
        interval: float = 1.0,
        failures: SubmitFailures | None = None,
        on_fatal: Callable[[], None] | None = None,
        pools: Sequence[str] = (),
    ) -> None:
        self.cluster = cluster
        #: Pools whose jobs and workers (named ``POOL.N``) are counted apart.
        self.pools = list(pools)
        self.path = path
        self.interval = interval
        self.failures = failures
        self.on_fatal = on_fatal
        self.gave_up = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="hpcflow-elastic-watch")
        self._thread.daemon = True
        self._ids: set[str] = set()
        self._lock = threading.Lock()

    def start(self) -> None:
        self._thread.start()

    def disarm(self) -> None:
        """Never call ``on_fatal`` from now on (the run is ending anyway)."""
        self.on_fatal = None

    def stop(self) -> None:
        """Stop sampling, after one last sample (normally: nothing left)."""
        self._stop.set()
        self._thread.join(timeout=10)

    def job_ids(self) -> set[str]:
        """Every worker job id seen so far (and the ones the cluster knows now)."""
        self._collect_ids()
        with self._lock:
            return set(self._ids)

    def sample(self) -> dict[str, Any]:
        """The cluster's size now (and each pool's)."""
        info = getattr(self.cluster, "scheduler_info", None) or {}
        workers = [str(w.get("name")) for w in _snapshot(info.get("workers", {})).values()]
        jobs = [str(name) for name in _snapshot(self.cluster.worker_spec)]
        sample: dict[str, Any] = {
            "time": round(time.time(), 3),
            "workers": len(workers),
            "requested": len(jobs),
        }
        if self.pools:
            sample["pools"] = {
                pool: {
                    "workers": sum(name.startswith(f"{pool}.") for name in workers),
                    "requested": sum(name.startswith(f"{pool}.") for name in jobs),
                }
                for pool in self.pools
            }
        return sample

    def _collect_ids(self) -> None:
        for job in _snapshot(self.cluster.workers).values():
            job_id = getattr(job, "job_id", None)
            if job_id:
                with self._lock:
                    self._ids.add(str(job_id))

    def _loop(self) -> None:
        with self.path.open("a", encoding="utf-8") as out:
            while True:
                stopping = self._stop.is_set()
                try:
                    self._collect_ids()
                    out.write(json.dumps(self.sample()) + "\n")
                    out.flush()
                except Exception as exc:  # sampling must never end the run
                    log.debug("elastic sample failed: %s", exc)
                if stopping:
                    return
                if self.failures is not None and self.failures.fatal and not self.gave_up:
                    self.gave_up = True
                    if self.on_fatal is not None:
                        self.on_fatal()
                self._stop.wait(self.interval)


def _snapshot(mapping: Any) -> dict[Any, Any]:
    """A copy of a dict another thread (the cluster's event loop) may be changing."""
    for _ in range(5):
        try:
            return dict(mapping)
        except RuntimeError:  # changed size during iteration: try again
            continue
    return {}


def read_samples(path: Path) -> list[dict[str, Any]]:
    """The samples written so far (an unfinished last line is skipped)."""
    samples: list[dict[str, Any]] = []
    if not path.exists():
        return samples
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            samples.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return samples


def brief(exc: BaseException) -> str:
    """dask-jobqueue's "Command exited with non-zero exit code ... stderr: ..." on one
    line: what the batch command said."""
    text = str(exc)
    said = text.split("stderr:", 1)[-1] if "stderr:" in text else text
    lines = [line.strip() for line in said.splitlines() if line.strip()]
    return "; ".join(lines) or type(exc).__name__
