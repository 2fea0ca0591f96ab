"""Tasks refused before anything runs: those that can never fit on the cluster."""

from __future__ import annotations

from hpcflow.dag.graph import TaskGraph
from hpcflow.errors import ResourceError


def check_capacity(
    graph: TaskGraph,
    run: list[bool],
    max_cpus: int,
    gpus: int,
    where: str = "the local cluster",
    mpi_wrapped: bool = False,
) -> None:
    """Refuse, before anything runs, tasks that can never fit on this cluster."""
    for inst in graph.instances:
        if not run[inst.index]:
            continue
        res = graph.template(inst).resources
        # An MPI task launched as its own step (srun/mpirun) holds only its cpus on a worker.
        need = res.cpus if mpi_wrapped else max(res.cpus, res.ranks)
        if need > max_cpus:
            raise ResourceError(
                f"task {inst.id!r} asks for {need} cpus but {where} has at most "
                f"{max_cpus} per worker",
                hint="lower its resources.cpus/ranks, raise --threads, or use a batch profile",
            )
        if res.gpus > gpus:
            raise ResourceError(
                f"task {inst.id!r} asks for {res.gpus} GPUs but {where} has {gpus} per worker",
                hint="run it with a GPU profile, e.g. --profile slurm-gpu",
            )
