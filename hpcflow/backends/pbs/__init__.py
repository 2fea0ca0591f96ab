"""The PBS backend (PBS Pro / OpenPBS and Torque): ``qsub``, ``qstat``, ``qdel``."""

from hpcflow.backends.pbs.backend import PbsBackend

__all__ = ["PbsBackend"]
