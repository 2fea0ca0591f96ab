"""Who am I? Rank, world size and node-local rank, from MPI or the launcher's variables."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

#: (rank, size, local rank) variables, in order of preference, per launcher.
_RANK_VARIABLES = (
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
    ("PALS_RANKID", "PALS_SIZE", "PALS_LOCAL_RANKID"),
)


@dataclass(frozen=True)
class RankInfo:
    """This process's place in the allocation."""

    rank: int
    size: int
    local_rank: int
    host: str
    job_id: str | None
    comm: Any = None  # an mpi4py communicator when MPI is available


def job_id() -> str | None:
    return os.environ.get("SLURM_JOB_ID") or os.environ.get("PBS_JOBID")


def from_environment(env: dict[str, str] | None = None) -> RankInfo | None:
    """Rank info from launcher variables (no MPI needed), or None if none are set."""
    env = dict(os.environ) if env is None else env
    for rank_var, size_var, local_var in _RANK_VARIABLES:
        if rank_var in env and size_var in env:
            try:
                rank, size = int(env[rank_var]), int(env[size_var])
                local = int(env.get(local_var, "0"))
            except ValueError:
                continue
            return RankInfo(rank, size, local, socket.gethostname(), job_id())
    return None


def detect(use_mpi: bool = True) -> RankInfo:
    """Prefer mpi4py's world (when importable and larger than 1), else launcher variables."""
    if use_mpi:
        try:
            before = set(os.environ)
            import mpi4py

            mpi4py.rc.finalize = False  # Open MPI 4 can hang in MPI_Finalize after a rank dies
            from mpi4py import MPI

            _forget_runtime_variables(before)
            comm = MPI.COMM_WORLD
            if comm.Get_size() > 1:
                local = comm.Split_type(MPI.COMM_TYPE_SHARED).Get_rank()
                env_info = from_environment()
                if env_info is not None and env_info.size == comm.Get_size():
                    # Logical nodes on one host share memory; the launcher knows the node rank.
                    local = env_info.local_rank
                return RankInfo(
                    rank=comm.Get_rank(),
                    size=comm.Get_size(),
                    local_rank=local,
                    host=socket.gethostname(),
                    job_id=job_id(),
                    comm=comm,
                )
        except ImportError:
            log.debug("mpi4py is not installed; ranks come from the launcher's variables")
        except Exception as exc:  # an MPI library that cannot initialise: use the variables
            log.warning("MPI did not initialise (%s); using the launcher's variables", exc)
    info = from_environment()
    if info is None:
        return RankInfo(0, 1, 0, socket.gethostname(), job_id())
    return info


def _forget_runtime_variables(before: set[str]) -> None:
    """Drop what the MPI library put in this process's environment while it initialised
    (Open MPI: ``OMPI_MCA_ess=pmi``, ``ORTE_SCHIZO_DETECTION``...). Only this process needs
    them; a task started from it inherits its environment, and an ``mpirun`` that sees
    them takes itself for a rank of this launch and exits at once."""
    # The library calls setenv(), which os.environ (a copy made at start) does not see.
    now = _process_environment() or set(os.environ)
    added = [name for name in now - before if name.startswith(("OMPI_", "ORTE_"))]
    for name in added:
        os.environ.pop(name, None)
        os.unsetenv(name)
    if added:
        log.debug("dropped the MPI runtime's variables %s", ", ".join(sorted(added)))


def _process_environment() -> set[str] | None:
    """The names in this process's C environment (``environ``), None where unreadable."""
    try:
        import ctypes

        environ = ctypes.POINTER(ctypes.c_char_p).in_dll(ctypes.CDLL(None), "environ")
        names = set()
        i = 0
        while environ[i]:
            names.add(environ[i].split(b"=", 1)[0].decode(errors="replace"))
            i += 1
        return names
    except (OSError, ValueError, AttributeError):
        return None


def allocation_layout(env: Mapping[str, str]) -> dict[str, int] | None:
    """Nodes, ranks, CPUs per rank and GPUs per node of the current SLURM allocation."""
    if "SLURM_JOB_ID" not in env:
        return None
    ntasks = int(env.get("SLURM_NTASKS") or env.get("SLURM_NPROCS") or "1")
    nodes = int(env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES") or "1")
    cpus = int(env.get("SLURM_CPUS_PER_TASK") or "1")
    gpus_text = env.get("SLURM_GPUS_ON_NODE") or ""
    gpus = int(gpus_text) if gpus_text.isdigit() else 0
    return {"ntasks": ntasks, "nodes": nodes, "cpus_per_task": cpus, "gpus_per_node": gpus}
