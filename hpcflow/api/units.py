"""How hpcflow writes durations and sizes for people (``1h30m``, ``4 GB``), for the
command line and other front ends: the functions of :mod:`hpcflow.spec.units`, which also
reads them from workflow files."""

from hpcflow.spec.units import format_duration, format_elapsed, format_memory

__all__ = ["format_duration", "format_elapsed", "format_memory"]
