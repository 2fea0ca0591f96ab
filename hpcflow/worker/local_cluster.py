"""Start and stop the embedded Dask cluster that local runs use.

Other accounts on the same machine can connect to its loopback ports, so it talks TLS
with mutual authentication, as pilots do: a fresh certificate authority and ONE
certificate per cluster (:mod:`hpcflow.transport.certificates`), in a private folder
(0700, keys 0600) that is removed when the cluster stops. Its HTTP servers serve
``/health`` only, on loopback (:mod:`hpcflow.transport.http_servers`).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcflow.transport.certificates import create_credentials
from hpcflow.transport.http_servers import LOOPBACK_ANY_PORT, http_settings
from hpcflow.transport.security import security_for

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LocalCapacity:
    """The slots of the local cluster: ``workers`` processes × ``threads`` each."""

    workers: int
    threads: int
    gpus: int = 0

    @classmethod
    def detect(cls, workers: int | None, threads: int | None) -> LocalCapacity:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        cores = cores or 1
        if workers is None and threads is None:
            return cls(1, cores)
        if workers is None:
            return cls(1, threads or cores)
        return cls(workers, threads or max(1, cores // workers))

    @property
    def slots(self) -> int:
        return self.workers * self.threads

    @property
    def max_cpus_per_task(self) -> int:
        return self.threads


class LocalCluster:
    """A context manager around ``distributed.LocalCluster`` + ``Client``."""

    def __init__(self, capacity: LocalCapacity, workdir: str) -> None:
        self.capacity = capacity
        self.workdir = workdir
        self._cluster: Any = None
        self._tls_dir: Path | None = None
        self.client: Any = None

    def __enter__(self) -> LocalCluster:
        import dask
        from distributed import Client
        from distributed import LocalCluster as DaskLocalCluster

        dask.config.set(
            {
                "distributed.worker.daemon": False,
                "distributed.admin.tick.limit": "30s",
                "distributed.scheduler.allowed-failures": 2,
                # fork starts a worker in ~0.1 s where spawn re-imports everything (~0.5 s).
                "distributed.worker.multiprocessing-method": "fork",
                # The statistical profiler (a 10 ms sampling thread per worker) only feeds
                # the dashboard, which the embedded cluster does not start: about 9 % of
                # a worker's CPU on tiny tasks (py-spy, bench W1).
                "distributed.worker.profile.enabled": False,
                # No dashboard: the HTTP servers Dask starts anyway answer /health only.
                **http_settings(dashboard=False),
            }
        )
        try:
            self._start(DaskLocalCluster, Client)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self, cluster_class: Any, client_class: Any) -> None:
        # A fresh CA and certificate in a folder only we can enter (mkdtemp: 0700).
        self._tls_dir = Path(tempfile.mkdtemp(prefix="hpcflow-tls-"))
        create_credentials(self._tls_dir, "local")
        security = security_for(self._tls_dir, "tls")
        self._cluster = cluster_class(
            n_workers=self.capacity.workers,
            threads_per_worker=self.capacity.threads,
            processes=True,
            host="127.0.0.1",
            scheduler_port=0,
            protocol="tls://",
            security=security,
            dashboard_address=None,
            # Any free loopback port: the default :8787 may be someone else's cluster's.
            # (Workers' HTTP servers take their host, 127.0.0.1; a worker_dashboard_address
            # would turn their dashboards on: bokeh's import, seconds per start.)
            scheduler_kwargs={"dashboard": False, "dashboard_address": LOOPBACK_ANY_PORT},
            resources={"cpus": self.capacity.threads},
            silence_logs=logging.ERROR,
        )
        self.client = client_class(self._cluster, set_as_default=False)
        # A worker that dies (kill -9, OOM) must not leave its tasks running on.
        from hpcflow.worker.orphans import OrphanReaper

        self.client.register_plugin(OrphanReaper())
        # Python tasks run in-process when their directory is the worker's: make it so.
        self.client.run(os.chdir, self.workdir)

    def __exit__(self, *exc: object) -> None:
        try:
            if self.client is not None:
                self.client.close(timeout=10)
        finally:
            try:
                if self._cluster is not None:
                    self._cluster.close(timeout=10)
            finally:
                if self._tls_dir is not None:
                    shutil.rmtree(self._tls_dir, ignore_errors=True)
