"""Where a Snakemake run's jobs run: the interface of hpcflow's sources of Dask workers.

The modes' own sources have it (:class:`hpcflow.modes.pilot_client.PilotClientAllocation`,
:class:`hpcflow.modes.elastic_workers.ElasticWorkers`); :class:`LocalWorkers` gives it to
hpcflow's embedded local cluster (:class:`hpcflow.worker.local_cluster.LocalCluster`).
"""

from __future__ import annotations

from typing import Any, Protocol

from hpcflow.worker.local_cluster import LocalCluster


class Workers(Protocol):
    """Where a session's jobs run: started once (→ the Dask client), closed once."""

    @property
    def client(self) -> Any: ...  # the connected Dask client (None: none to send to now)
    def start(self) -> Any: ...
    def close(self) -> None: ...
    def max_cpus(self) -> int: ...  # the most CPU slots one job can hold on one worker
    def gpus(self) -> int: ...  # GPUs one worker offers
    def failure(self) -> str | None: ...  # why workers will never come, or None
    def where_to_look(self) -> str: ...  # logs worth reading when a job was lost


class LocalWorkers(LocalCluster):
    """hpcflow's embedded local Dask cluster, as a session's workers."""

    def start(self) -> Any:
        return self.__enter__().client

    def close(self) -> None:
        self.__exit__(None, None, None)
        self.client = None

    def max_cpus(self) -> int:
        return self.capacity.max_cpus_per_task

    def gpus(self) -> int:
        return self.capacity.gpus

    def failure(self) -> str | None:
        return None

    def where_to_look(self) -> str:
        return ""
