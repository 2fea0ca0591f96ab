"""HOW ranks start inside an allocation: srun, mpirun, or a single process.

Three uses: the batch script's command in a pilot allocation (``head_argv``: the
scheduler and the driver on the batch script's node, then ``worker_launch_argv``: exactly
the workers, an explicit number per node); the older one-launch form that starts
``python -m hpcflow.bootstrap RUN_DIR`` on every rank (``bootstrap_argv``, roles by rank);
and the prefix that starts an MPI task (``ranks: N``) as its own step.
"""

from __future__ import annotations

from collections.abc import Sequence

from hpcflow.errors import ProfileError


def bootstrap_argv(
    launcher: str,
    python: str,
    run_dir: str,
    ntasks: int,
    *,
    mpi: str = "pmix",
    extra: Sequence[str] = (),
) -> list[str]:
    """The command that runs the bootstrap on all ``ntasks`` ranks."""
    entry = [python, "-m", "hpcflow.bootstrap", run_dir]
    if launcher == "srun":
        # --kill-on-bad-exit=0: one dying worker must not take the scheduler and driver down.
        return [
            "srun",
            f"--mpi={mpi}",
            f"--ntasks={ntasks}",
            "--kill-on-bad-exit=0",
            *extra,
            *entry,
        ]
    if launcher == "mpirun":
        return ["mpirun", "-n", str(ntasks), *extra, *entry]
    if launcher == "single":
        return entry
    raise ProfileError(f"unknown launcher {launcher!r}", hint="use srun, mpirun or single")


def worker_launch_argv(
    launcher: str,
    python: str,
    run_dir: str,
    nodes: int,
    per_node: int | None,
    workers: int,
    *,
    mpi: str = "pmix",
    extra: Sequence[str] = (),
) -> list[str]:
    """The launch that starts exactly the pilot's workers: ``workers`` ranks, ``per_node``
    on each of ``nodes`` nodes when given (explicit, whatever the batch system's default
    distribution), otherwise spread by the launcher over ``nodes``."""
    entry = [python, "-m", "hpcflow.bootstrap", "--role", "worker", run_dir]
    if launcher == "srun":
        layout = [f"--nodes={nodes}", f"--ntasks={workers}"]
        if per_node:
            layout.append(f"--ntasks-per-node={per_node}")
        # --kill-on-bad-exit=0: one dying worker must not take the others down.
        return ["srun", f"--mpi={mpi}", *layout, "--kill-on-bad-exit=0", *extra, *entry]
    if launcher == "mpirun":
        # Open MPI's ppr: exactly per_node ranks on each node, whatever the slots listed.
        layout = ["--map-by", f"ppr:{per_node}:node"] if per_node else []
        return ["mpirun", "-n", str(workers), *layout, *extra, *entry]
    raise ProfileError(f"launcher {launcher!r} cannot start the workers", hint="use srun or mpirun")


def head_argv(python: str, run_dir: str, workers: Sequence[str]) -> list[str]:
    """The batch script's command: on its own node, the scheduler and the driver; the
    ``workers`` launch from there (see :mod:`hpcflow.bootstrap.head`)."""
    return [python, "-m", "hpcflow.bootstrap", "--role", "head", run_dir, "--", *workers]


def task_prefix(launcher: str, ranks: int, nodes: int | None, *, mpi: str = "pmix") -> list[str]:
    """The prefix that runs one MPI task with ``ranks`` ranks inside the allocation."""
    if launcher == "srun":
        # --overlap and --mem=0: the pilot step holds every CPU and all memory; the task's
        # step shares them (without --mem=0 SLURM answers "Memory required by task is not
        # available").
        prefix = [
            "srun",
            "--overlap",
            "--mem=0",
            f"--mpi={mpi}",
            f"--ntasks={ranks}",
            "--cpus-per-task=1",
        ]
        if nodes:
            prefix.append(f"--nodes={nodes}")
        return prefix
    if launcher == "mpirun":
        prefix = ["mpirun", "-n", str(ranks)]
        if nodes:
            prefix += ["--map-by", f"ppr:{-(-ranks // nodes)}:node"]
        return prefix
    return []
