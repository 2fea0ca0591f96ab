"""Pilot mode's plans: the allocation to ask for and what its ranks read (pilot.json),
from a profile, or from the allocation ``hpcflow run`` already runs in. Pure: nothing is
written or submitted here."""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from hpcflow.backends.base import AllocationRequest
from hpcflow.bootstrap.config import PilotConfig
from hpcflow.bootstrap.roles import NON_WORKER_RANKS, spread
from hpcflow.envs.site import SiteEnvironment
from hpcflow.errors import ProfileError
from hpcflow.launchers import bootstrap_argv, head_argv, worker_launch_argv
from hpcflow.settings.profile import Profile
from hpcflow.store.paths import RunPaths

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PilotPlan:
    """The allocation to ask for and the layout every rank will read."""

    request: AllocationRequest
    config: PilotConfig


def plan_pilot(
    profile: Profile,
    paths: RunPaths,
    run_id: str,
    base_dir: Path,
    number: int = 1,
    python: str | None = None,
    *,
    head: bool = True,
    pool: str | None = None,
) -> PilotPlan:
    """Turn a profile into an allocation request and the ranks' configuration. Without
    ``head`` the allocation runs workers only (a pool's own allocation, whose workers join
    the scheduler of the run's head allocation). ``pool``: the pool ``profile`` is shaped
    by, named in its workers and recorded with the allocation."""
    gpus = profile.gpus_per_node
    if profile.workers_per_node == "per-gpu":
        if gpus < 1:
            raise ProfileError(
                "workers_per_node: per-gpu needs gpus_per_node ≥ 1",
                hint="set gpus_per_node in the profile",
            )
        per_node = gpus
    else:
        per_node = int(profile.workers_per_node)
    cpus_per_node = profile.cpus_per_node or per_node
    threads = profile.threads_per_worker or max(1, cpus_per_node // per_node)
    workers = profile.nodes * per_node
    # With overcommit the ranks of a node share its cores: SLURM's --overcommit then
    # allocates one rank's --cpus-per-task per node (and PBS is asked the same), so that
    # must be the cores the node's workers share, not one worker's threads.
    rank_cpus = threads
    if profile.overcommit and profile.cpus_per_node:
        rank_cpus = max(threads, profile.cpus_per_node)
    interpreter = profile.python or sys.executable
    command, ntasks = pilot_command(
        profile.launcher,
        interpreter,
        str(paths.run_dir),
        [per_node] * profile.nodes,
        mpi=profile.mpi,
        head=head,
    )
    setup = profile.module_lines() + list(profile.setup)
    request = AllocationRequest(
        run_id=run_id,
        job_name=f"hpcflow-{run_id}",
        run_dir=paths.run_dir,
        stdout=paths.allocation_stdout(number),
        stderr=paths.allocation_stderr(number),
        command=command,
        nodes=profile.nodes,
        ntasks=ntasks,
        # Every node gets its workers' cores. With --overcommit SLURM refuses a per-node
        # count whose tasks' CPUs exceed a node's; it then allocates per node (above)
        # and the workers' launch places them itself.
        ntasks_per_node=None if profile.overcommit else per_node,
        cpus_per_task=rank_cpus,
        gpus_per_node=gpus,
        gpu_kind=profile.gpu_kind if gpus else None,
        memory_per_node=profile.memory_per_node,
        walltime=profile.walltime,
        partition=profile.partition,
        account=profile.account,
        qos=profile.qos,
        constraint=profile.constraint,
        overcommit=profile.overcommit,
        extra_directives=tuple(profile.extra_directives),
        setup_lines=tuple(setup),
        env={**profile.env, "HPCFLOW_RUN_ID": run_id, "HPCFLOW_ALLOCATION_NUMBER": str(number)},
        workdir=base_dir,
    )
    config = PilotConfig(
        workers_expected=workers,
        threads_per_worker=threads,
        gpus_per_worker=(gpus // per_node) if gpus else 0,
        base_dir=str(base_dir),
        local_directory=profile.local_directory,
        interface=profile.interface,
        transport=profile.transport,
        memory_limit=profile.worker_memory_limit,
        launcher=profile.launcher,
        mpi=profile.mpi,
        local_mpi_launch=list(profile.local_mpi_launch) if profile.local_mpi_launch else None,
        env=dict(profile.env),
        dashboard_address=profile.dashboard_address,
        memory_fractions=worker_memory_fractions(profile),
        worker_resources=dict(profile.worker_resources),
        lifetime=profile.worker_lifetime,
        lifetime_stagger=profile.worker_lifetime_stagger,
        nanny=profile.worker_nanny,
        software=SiteEnvironment.from_profile(profile, commands_here=False).to_dict(),
        pool=pool,
    )
    return PilotPlan(request, config)


def renumbered(plan: PilotPlan, paths: RunPaths, number: int) -> PilotPlan:
    """``plan`` as allocation ``number`` of its run (its logs and its number): the same
    allocation asked for again, e.g. a continuation of a pool's allocation."""
    request = replace(
        plan.request,
        stdout=paths.allocation_stdout(number),
        stderr=paths.allocation_stderr(number),
        env={**plan.request.env, "HPCFLOW_ALLOCATION_NUMBER": str(number)},
    )
    return PilotPlan(request, plan.config)


def pilot_command(
    launcher: str,
    python: str,
    run_dir: str,
    counts: list[int],
    *,
    mpi: str = "pmix",
    head: bool = True,
) -> tuple[list[str], int]:
    """The batch script's command for ``counts[i]`` workers on node i, and the tasks to
    ask the batch system for.

    Where the ranks run: the scheduler and the driver on the batch script's own node (the
    first node, which hpcflow watches), started by ``--role head``; the workers by one
    launch with an explicit count per node (srun ``--ntasks-per-node``, mpirun ``--map-by
    ppr:N:node``), so no node gets more workers than the profile asks for (and than it has
    GPUs), whatever the batch system's distribution. One launch of ``workers + 2`` ranks
    cannot ask for that: SLURM's block distribution put 3 of 6 ranks on each of 2 nodes
    (3 GPU workers next to 2 GPUs). With counts that differ (your own allocation's ranks
    spread unevenly), the launcher spreads them over ``len(counts)`` nodes itself.
    ``launcher: single`` keeps the one-launch layout (ranks 0 and 1 first). Without
    ``head``: the workers' launch alone.
    """
    workers = sum(counts)
    if launcher == "single" and not head:
        raise ProfileError(
            "launcher 'single' cannot start the workers of a pool's own allocation",
            hint="use launcher srun or mpirun in a profile with pools",
        )
    if launcher == "single":
        return bootstrap_argv(launcher, python, run_dir, workers), workers + NON_WORKER_RANKS
    even = len(set(counts)) == 1
    launch = worker_launch_argv(
        launcher,
        python,
        run_dir,
        len(counts),
        counts[0] if even else None,
        workers,
        mpi=mpi,
        extra=_launcher_fault_options(launcher, len(counts)),
    )
    return (head_argv(python, run_dir, launch) if head else launch), workers


def _launcher_fault_options(launcher: str, nodes: int) -> list[str]:
    """srun's ``--no-kill`` on several nodes: when a node fails, srun ends the ranks it
    ran and goes on with the others, instead of killing the whole step (the allocation
    itself survives through sbatch's ``--no-kill``)."""
    return ["--no-kill"] if launcher == "srun" and nodes > 1 else []


def worker_memory_fractions(profile: Profile) -> dict[str, float | bool]:
    """The profile's memory thresholds, keyed as in ``distributed.worker.memory``."""
    fractions = {
        "target": profile.worker_memory_target,
        "spill": profile.worker_memory_spill,
        "pause": profile.worker_memory_pause,
    }
    return {key: value for key, value in fractions.items() if value is not None}


def plan_in_allocation(
    profile: Profile,
    paths: RunPaths,
    run_id: str,
    base_dir: Path,
    layout: dict[str, int],
    number: int = 1,
    env: Mapping[str, str] | None = None,
) -> PilotPlan:
    """The plan for the allocation we already run in: its ranks, as they are.

    Its ``ntasks`` ranks make ``ntasks - 2`` workers (the other two are the scheduler's
    and the driver's share; they run on this node, where ``hpcflow run`` is), spread as
    evenly as possible over its nodes: e.g. ``--nodes=2 --ntasks=6`` → 2 workers per node,
    one per GPU with ``--gres=gpu:2``. When ``hpcflow run`` is not on a node of the
    allocation (``salloc``'s shell on a login node), the scheduler and the driver run on
    its first node, in a step of their own that the workers' step may share.
    """
    env = os.environ if env is None else env
    ntasks = layout["ntasks"]
    gpus = layout["gpus_per_node"]
    workers = ntasks - NON_WORKER_RANKS
    base = plan_pilot(
        profile.model_copy(
            update={
                "nodes": layout["nodes"],
                "gpus_per_node": gpus,
                "workers_per_node": 1,
                "cpus_per_node": layout["cpus_per_task"],
                "threads_per_worker": layout["cpus_per_task"],
            }
        ),
        paths,
        run_id,
        base_dir,
        number,
    )
    counts = spread(workers, layout["nodes"])
    if gpus and counts and counts[0] > gpus:
        log.warning(
            "%d workers on a node with %d GPUs: they share devices (ask for %d tasks, "
            "nodes × GPUs + 2, for one worker per GPU)",
            counts[0],
            gpus,
            layout["nodes"] * gpus + NON_WORKER_RANKS,
        )
    command, _ = pilot_command(
        profile.launcher,
        profile.python or sys.executable,
        str(paths.run_dir),
        counts,
        mpi=profile.mpi,
    )
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if profile.launcher == "srun" and nodelist and not env.get("SLURMD_NODENAME"):
        command = [
            "srun", "--overlap", "--mem=0", "--mpi=none", "--nodes=1", "--ntasks=1",
            f"--nodelist={first_node(nodelist)}", "--kill-on-bad-exit=0", *command,
        ]  # fmt: skip
    request = replace(base.request, command=command, ntasks=ntasks, ntasks_per_node=None)
    config = replace(base.config, workers_expected=workers, gpus_per_worker=1 if gpus else 0)
    return PilotPlan(request, config)


def first_node(nodes: str) -> str:
    """The first host of a SLURM hostlist (``n[2-4,7]`` → ``n2``, ``a1,b2`` → ``a1``);
    SLURM runs the batch script on an allocation's first node."""
    prefix, bracket, rest = nodes.strip().partition("[")
    if not bracket:
        return prefix.split(",", 1)[0]
    if "," in prefix:
        return prefix.split(",", 1)[0]
    first = re.split(r"[-,\]]", rest, maxsplit=1)[0]
    return prefix + first
