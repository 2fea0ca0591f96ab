"""HOW ranks start inside an allocation: srun, mpirun, or a single process.

Two uses: the argv that starts ``python -m hpcflow.bootstrap RUN_DIR`` on every rank of a
pilot allocation, and the prefix that starts an MPI task (``ranks: N``) as its own step.
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
