"""The SLURM backend: ``sbatch`` to submit, ``squeue`` (and ``sacct``) to poll, ``scancel``."""

from hpcflow.backends.slurm.backend import SlurmBackend

__all__ = ["SlurmBackend"]
