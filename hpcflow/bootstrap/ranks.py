"""One process of a pilot that is not its head: the Dask scheduler, the driver, or a worker.

``python -m hpcflow.bootstrap`` (:mod:`hpcflow.bootstrap.__main__`) hands every role but
``head`` to :func:`run_rank`. ``--role scheduler`` and ``--role driver`` are processes the
head starts beside the batch script; ``--role worker`` is each rank of the head's launch of
the workers; no role: every rank of one launch takes its role from its rank (0 scheduler,
1 driver, 2.. workers; ``launcher: single``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from hpcflow.bootstrap.config import PilotConfig
from hpcflow.bootstrap.head import allocation_started
from hpcflow.bootstrap.logs import tag_logs
from hpcflow.bootstrap.overhead import record_overhead
from hpcflow.bootstrap.preflight import (
    PreflightError,
    check_run_dir,
    check_transport,
    check_world,
)
from hpcflow.bootstrap.quiet import quiet_dask, slow_heartbeats
from hpcflow.bootstrap.rendezvous import publish, receive
from hpcflow.bootstrap.roles import (
    NON_WORKER_RANKS,
    Role,
    gpu_rotation,
    role_for,
    worker_local_index,
)
from hpcflow.bootstrap.workers import (
    await_workers,
    record_workers,
    release_pool,
    workers_gone_check,
)
from hpcflow.engine.pools import POOL_CAPACITY, POOL_VARIABLE, pool_resource
from hpcflow.errors import HpcflowError
from hpcflow.launchers import environment
from hpcflow.store.paths import RunPaths
from hpcflow.store.states import RunStatus
from hpcflow.transport.http_servers import LOOPBACK_ANY_PORT, dashboard_bind, http_settings
from hpcflow.transport.security import security_for
from hpcflow.worker.gpus import OWN_GPUS
from hpcflow.worker.orphans import become_subreaper

if TYPE_CHECKING:  # imported by the driver rank only
    from hpcflow.engine.calls_factory import TaskLaunch

log = logging.getLogger("hpcflow.bootstrap")

#: Seconds between two looks at whether an external client still drives the run.
WATCH_PERIOD = 0.5
_started = time.time()


def run_rank(given: str | None, run_dir: Path) -> int:
    """Run this process's part of the pilot in ``run_dir`` (already resolved): ``given`` is
    its ``--role`` (scheduler, driver, worker), or None to take it from its launch rank."""
    paths = RunPaths(run_dir)
    if given in ("scheduler", "driver"):
        # A process of the batch script's node, outside any launch: no MPI world to join.
        rank = 0 if given == "scheduler" else 1
        info = environment.RankInfo(rank, 0, 0, socket.gethostname(), environment.job_id())
    elif given == "worker":
        # A launch of workers only: they never talk MPI to each other, so they do not
        # join an MPI world (MPI_Init is a collective start-up: one rank that crashes in
        # it leaves the others spinning, and nothing arrives). The launcher's variables
        # give the rank; no MPI_Finalize at the end either.
        info = environment.detect(use_mpi=False)
    else:
        info = environment.detect()
    # Workers of their own launch are pilot ranks 2.. (the scheduler and driver are 0, 1).
    first_worker = 0 if given == "worker" else NON_WORKER_RANKS
    pilot_rank = info.rank + NON_WORKER_RANKS if given == "worker" else info.rank
    tag_logs(pilot_rank)
    try:
        check_run_dir(run_dir)
        if given is None:
            check_world(info.size)
        # An allocation of one more pool of the run: its workers join the head's scheduler.
        pool = os.environ.get(POOL_VARIABLE)
        config = PilotConfig.read(paths.pilot_pool_config(pool) if pool else paths.pilot_config)
        check_transport(config.transport)
    except HpcflowError as exc:
        sys.stderr.write(f"hpcflow bootstrap (rank {pilot_rank} on {info.host}): {exc}\n")
        return 3
    allocation = environment.job_id() or os.environ.get("HPCFLOW_ALLOCATION", "local")
    address_file = paths.scheduler_address
    role = Role(given) if given is not None else role_for(info.rank)
    where = (
        "beside the batch script"
        if given in ("scheduler", "driver")
        else f"launch rank {info.rank} of {info.size}"
    )
    log.info("rank %d on %s: %s (%s)", pilot_rank, _node_name(info), role.value, where)
    # Collective: every rank of the launch takes part, whatever its role.
    local_index = _worker_local_index(info, first_worker)
    # The scheduler is in this launch's MPI world only when one launch started every role.
    comm = info.comm if given is None else None
    try:
        if role is Role.SCHEDULER:
            code = asyncio.run(_scheduler(config, info, comm, run_dir, address_file, allocation))
        else:
            # A pool's own allocation takes the address the head allocation published.
            address = receive(comm=comm, path=address_file, allocation=None if pool else allocation)
            if role is Role.DRIVER and config.external_client:
                code = _wait_for_scheduler_end(run_dir, address, config)
            elif role is Role.DRIVER:
                code = _driver(run_dir, address, config)
            else:
                code = asyncio.run(_worker(address, config, info, pilot_rank, local_index, run_dir))
    except PreflightError as exc:
        sys.stderr.write(f"hpcflow bootstrap (rank {pilot_rank}): {exc}\n")
        return 3
    if info.comm is not None and code == 0:
        # A rank that leaves without MPI_Finalize while others still run is an abort to
        # mpirun and to srun's PMIx plugin alike (srun then cancels the step, and a run
        # that succeeded ends as a FAILED allocation). Finalize waits for every rank, so
        # they all leave together. Only on a clean exit: after a rank died, Open MPI 4 can
        # hang in it (mpi4py's automatic finalize is off for that reason).
        from mpi4py import MPI

        MPI.Finalize()
    return code


def _host(config: PilotConfig) -> str | None:
    if config.interface:
        return None
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return None


async def _scheduler(
    config: PilotConfig,
    info: environment.RankInfo,
    comm: object,
    run_dir: Path,
    address_file: Path,
    allocation: str,
) -> int:
    import dask
    from distributed import Scheduler

    quiet_dask()
    slow_heartbeats()
    # Dask logs each out-of-band function the scheduler runs under this name; an external
    # client's watch asks twice a second (bootstrap/abandoned.py): not worth a line each.
    logging.getLogger("distributed.worker").setLevel(logging.WARNING)
    host = _host(config)
    dashboard = config.dashboard_address
    # Without the dashboard, Dask's HTTP server still starts: /health only, on loopback.
    dask.config.set(http_settings(dashboard=dashboard is not None))
    async with Scheduler(
        host=host,
        interface=config.interface,
        port=0,
        dashboard=dashboard is not None,
        dashboard_address=_dashboard_bind(dashboard, host, config.interface),
        protocol=config.transport,
        security=security_for(run_dir, config.transport),
    ) as scheduler:
        log.info("scheduler at %s", scheduler.address)
        dashboard_url = _dashboard_url(scheduler, info.host) if dashboard is not None else None
        if dashboard_url:
            log.info("dashboard at %s", dashboard_url)
        publish(
            scheduler.address,
            comm=comm,
            path=address_file,
            allocation=allocation,
            extra={"dashboard": dashboard_url, "host": info.host, "node": _node_name(info)},
        )
        await scheduler.finished()
    return 0


def _dashboard_bind(dashboard: str | None, host: str | None, interface: str | None) -> str:
    """Where the scheduler's HTTP server listens: loopback without the dashboard, else
    ONE address, the profile's ``[host]:port`` (our host or interface by default)."""
    if dashboard is None:
        return LOOPBACK_ANY_PORT
    return dashboard_bind(dashboard, host=host, interface=interface)


def _dashboard_url(scheduler: object, node: str) -> str | None:
    """``http://HOST:PORT/status`` of the running dashboard, or None when it did not start.

    The dashboard needs bokeh; without it distributed logs a warning and serves none.
    """
    server = getattr(scheduler, "http_server", None)
    port = getattr(server, "port", None) if server is not None else None
    services = getattr(scheduler, "services", {}) or {}
    if "dashboard" not in services and not _has_bokeh():
        log.warning("dashboard requested but bokeh is not installed: pip install bokeh")
        return None
    if not port:
        return None
    bound = getattr(server, "address", None)
    wildcard = bound in (None, "", "0.0.0.0", "::")  # noqa: S104 (a comparison, no bind)
    host = None if wildcard else bound
    host = host or _host_of(getattr(scheduler, "address", "")) or node
    return f"http://{host}:{port}/status"


def _has_bokeh() -> bool:
    try:
        import bokeh  # noqa: F401
    except ImportError:
        return False
    return True


def _host_of(address: str) -> str | None:
    rest = address.split("://", 1)[-1]
    host, _, _ = rest.rpartition(":")
    return host or None


def _worker_local_index(info: environment.RankInfo, first_worker: int) -> int:
    """This rank's position among the worker ranks of its own node (ranks below
    ``first_worker`` are the scheduler and the driver)."""
    node = _node_name(info)
    if info.comm is not None:
        # Every rank's node, in rank order: the position holds whatever the distribution.
        nodes = [str(n) for n in info.comm.allgather(node)]
        return max(0, worker_local_index(info.rank, nodes, first_worker))
    if first_worker == 0:
        # A launch of workers only: the launcher's node-local rank is that position.
        return info.local_rank
    offset = NON_WORKER_RANKS if os.environ.get("SLURM_NODEID", "0") == "0" else 0
    return max(0, info.local_rank - offset)


def _local_directory(config: PilotConfig) -> str | None:
    """Worker scratch: the profile's folder, else node-local scratch the site provides."""
    if config.local_directory:
        return os.path.expandvars(config.local_directory)
    for variable in ("SLURM_TMPDIR", "TMPDIR", "PBS_TMPDIR"):
        value = os.environ.get(variable)
        if value and os.path.isdir(value):
            return value
    return None


async def _worker(
    address: str,
    config: PilotConfig,
    info: environment.RankInfo,
    pilot_rank: int,
    local_index: int,
    run_dir: Path,
) -> int:
    import dask
    from distributed import Nanny, Worker

    quiet_dask()
    resources: dict[str, float] = {
        **config.worker_resources,
        "cpus": float(config.threads_per_worker),
    }
    if config.pool:
        # Tasks of a pool ask for it: they run on its workers only.
        resources[pool_resource(config.pool)] = POOL_CAPACITY
    if config.gpus_per_worker:
        visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d]
        rotated = gpu_rotation(visible, local_index, config.gpus_per_worker)
        if rotated:
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(rotated)
            # Its own are the first ones; tasks share out those (hpcflow.worker.gpus).
            os.environ[OWN_GPUS] = str(config.gpus_per_worker)
        if visible and (local_index + 1) * config.gpus_per_worker > len(visible):
            log.warning(
                "worker %d of node %s wants %d GPU(s) but the node shows %d (%s): it shares "
                "devices with another worker; ask for as many workers per node as its GPUs "
                "allow",
                local_index,
                _node_name(info),
                config.gpus_per_worker,
                len(visible),
                ",".join(visible),
            )
        resources["GPU"] = float(config.gpus_per_worker)
    os.chdir(config.base_dir)
    local_directory = _local_directory(config)
    memory: dict[str, object] = {
        f"distributed.worker.memory.{k}": v for k, v in config.memory_fractions.items()
    }
    memory.update(http_settings())  # a worker's HTTP server: /health only, on loopback
    if config.nanny:
        # The rank's own process supervises the worker (started fresh, not forked after
        # MPI_Init): a worker killed by the OOM killer is restarted, and what its tasks
        # left running is adopted and killed instead of writing on.
        if become_subreaper():
            _sweep_orphans_forever()
        memory["distributed.worker.multiprocessing-method"] = "spawn"
    server = Nanny if config.nanny else Worker
    with dask.config.set(memory):
        async with server(
            address,
            nthreads=config.threads_per_worker,
            resources=resources,
            name=f"{config.pool + '/' if config.pool else ''}rank-{pilot_rank}@{_node_name(info)}",
            local_directory=local_directory,
            death_timeout=120,
            host=_host(config),
            interface=config.interface,
            protocol=config.transport,
            security=security_for(run_dir, config.transport),
            memory_limit=config.memory_limit or "auto",
            lifetime=config.lifetime,
            lifetime_stagger=config.lifetime_stagger or None,
            dashboard=False,
            dashboard_address=LOOPBACK_ANY_PORT,
        ) as worker:
            log.info(
                "worker %s (local index %d, resources %s%s) on %s",
                worker.worker_address if config.nanny else worker.address,
                local_index,
                resources,
                ", under a nanny" if config.nanny else "",
                info.host,
            )
            await worker.finished()
    return 0


def _node_name(info: environment.RankInfo) -> str:
    """The node as the batch system names it (logical nodes may share one host)."""
    return os.environ.get("SLURMD_NODENAME") or info.host


def _sweep_orphans_forever() -> None:
    """Every half second, kill task processes a dead worker left to this (subreaper) rank."""
    from tornado.ioloop import PeriodicCallback

    from hpcflow.worker.orphans import SWEEP_MS, kill_orphans

    def sweep() -> None:
        kill_orphans()

    PeriodicCallback(sweep, SWEEP_MS).start()


def _wait_for_scheduler_end(
    run_dir: Path, address: str, config: PilotConfig, poll: float = 0.1
) -> int:
    """Rank 1 when a client outside the allocation drives the run: hold a client connection
    until the scheduler shuts down, then end at once (with the other ranks, so that the
    launcher sees a clean step). A client that dies (``kill -9``) never shuts the scheduler
    down: once it has been gone a few seconds its tasks are ended and the scheduler shut
    down here (:class:`~hpcflow.bootstrap.abandoned.ClientWatch`)."""
    from distributed import Client

    from hpcflow.bootstrap.abandoned import ClientWatch, end_for_lost_client

    log.info("an external client drives this run; waiting for the scheduler at %s", address)
    client = Client(
        address,
        timeout=120,
        set_as_default=False,
        security=security_for(run_dir, config.transport),
    )
    # Losing the connection is this rank's signal to end, not an error worth a log line.
    logging.getLogger("distributed.client").setLevel(logging.CRITICAL)
    watch = ClientWatch(client)
    asked = time.monotonic()
    try:
        while client.status == "running":
            time.sleep(poll)
            if time.monotonic() - asked >= WATCH_PERIOD:
                asked = time.monotonic()
                if watch.abandoned():
                    end_for_lost_client(client)
                    break
    finally:
        try:
            client.close(timeout=1)
        except Exception as exc:  # the scheduler is gone: nothing left to close cleanly
            log.debug("close: %s", exc)
    log.info("the scheduler has shut down")
    return 0


def _task_launch(config: PilotConfig) -> TaskLaunch:
    """How the driver's calls start MPI tasks on this pilot's workers."""
    from hpcflow.engine.calls_factory import TaskLaunch

    if config.task_pools:
        # (With several pools a worker's slots differ by pool: every MPI task a step.)
        return TaskLaunch(mpi_launcher=config.launcher, mpi=config.mpi)
    return TaskLaunch(
        mpi_launcher=config.launcher,
        mpi=config.mpi,
        local_mpi_launch=config.local_mpi_launch,
        local_mpi_ranks=config.threads_per_worker,
    )


def _driver(run_dir: Path, address: str, config: PilotConfig) -> int:
    from distributed import Client

    from hpcflow.engine.drive import drive
    from hpcflow.engine.driver import PoolPlan
    from hpcflow.engine.lifecycle import lease_lost, log_to
    from hpcflow.engine.prepare import PreparedRun, open_run
    from hpcflow.envs.site import SiteEnvironment
    from hpcflow.store.statedb import StateDB

    paths = RunPaths(run_dir)
    handler = log_to(paths.driver_log)
    client = None
    db = None
    prepared: PreparedRun | None = None
    drained = False
    try:
        # Holds the workflow's lease for this run (or fails: another run holds it).
        prepared, db, run_id = open_run(
            run_dir,
            SiteEnvironment.from_dict(config.software),
            allocation=environment.job_id(),
            launch=_task_launch(config),
        )
        prepared.lock.on_lost = lease_lost(paths)
        client = Client(
            address,
            timeout=120,
            set_as_default=False,
            security=security_for(run_dir, config.transport),
        )
        started = time.monotonic()
        await_workers(client, config.workers_expected, config.worker_wait_timeout, paths)
        slots = sum(client.nthreads().values())
        log.info(
            "run %s: %d workers, %d slots ready after %.1fs",
            run_id,
            len(client.nthreads()),
            slots,
            time.monotonic() - started,
        )
        deadline = None
        walltime = json.loads(paths.run_info.read_text(encoding="utf-8")).get("walltime")
        if walltime:
            # From the allocation's start as the head marked it (else this process's).
            deadline = allocation_started(os.environ, _started) + float(walltime)
        record_workers(client, paths.workers_record)
        pools = None
        if config.task_pools:
            pools = PoolPlan(
                {int(index): pool for index, pool in config.task_pools.items()},
                dict(config.pool_slots),
                frozenset(config.releasable),
                on_done=lambda pool: release_pool(client, pool),
            )
        summary = drive(
            prepared,
            db,
            run_id,
            client,
            slots,
            deadline=deadline,
            drain_margin=min(30.0, 0.1 * float(walltime or 0)),
            pools=pools,
            # (With pools, other allocations' workers may still come.)
            workers_gone=None if pools else workers_gone_check(client, paths),
        )
        prepared.memo.close()
        drained = summary.drained
        log.info("run %s finished: %s", run_id, summary.totals)
        overhead = record_overhead(client, db)
        log.info("CPU seconds: %s", overhead)
        return 0
    except Exception as exc:  # the run must still end, and say why
        log.error("driver failed: %s\n%s", exc, traceback.format_exc())
        try:
            if db is None:  # e.g. another run holds the workflow's lease: say so in the run
                db = StateDB(paths.state_db)
            db.set_meta(status=RunStatus.FAILED, error=str(exc)[:2000], ended=time.time())
        except Exception as again:  # (the state itself is unreadable: the log says why)
            log.error("cannot record the failure in %s: %s", paths.state_db, again)
        return 1
    finally:
        if db is not None:
            db.close()
        if prepared is not None:
            if drained:  # a continuation allocation of this run follows: it takes the lease
                prepared.lock.hand_over()
            else:
                prepared.lock.release()
        if client is not None:
            try:
                client.shutdown()  # stops the scheduler and every worker: the allocation ends
            except Exception as exc:
                log.warning("shutdown: %s", exc)
            try:
                client.close()  # UCX: an unclosed client can hang or crash the shutdown
            except Exception as exc:
                log.debug("close: %s", exc)
        logging.getLogger("hpcflow").removeHandler(handler)
