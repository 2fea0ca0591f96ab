"""Job arrays in every batch system's spelling: the index range asked for, and the ids
the elements get.

* SLURM: ``--array=0-199%8``; an element is ``123_4`` to users (``SLURM_ARRAY_JOB_ID``
  ``_`` ``SLURM_ARRAY_TASK_ID``), and has a job id of its own (``SLURM_JOB_ID``) that
  ``squeue --jobs`` answers for. The array's own id names the pending rest, and in the
  end the last element.
* PBS Pro: ``-J 0-199%8``; ``qsub`` prints ``123[].server``, an element is
  ``123[4].server`` (``PBS_JOBID``, with ``PBS_ARRAY_INDEX=4``).
* Torque: ``-t 0-199%8``; elements are ``123[4].server`` (``PBS_ARRAYID=4``).
* SLURM's PBS wrappers accept ``#PBS -J``/``-t`` and run the array as a SLURM array:
  the job sees only the SLURM_* variables.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_SLURM_ELEMENT = re.compile(r"(\d+)_(\d+)")
_PBS_ELEMENT = re.compile(r"(\d+)\[(\d+)\](\..+)?")

#: Environment variables that hold an element's index, in the order they are trusted.
INDEX_VARIABLES = ("SLURM_ARRAY_TASK_ID", "PBS_ARRAY_INDEX", "PBS_ARRAYID")


def array_range(size: int, parallelism: int | None = None) -> str:
    """The index range of an array of ``size`` elements: ``0-199`` or ``0-199%8``.

    The same text works for ``--array``, ``-J`` and ``-t``.
    """
    if size < 2:
        raise ValueError(f"an array has at least 2 elements, not {size}")
    text = f"0-{size - 1}"
    if parallelism is not None and parallelism < size:
        text += f"%{parallelism}"
    return text


def split_element_id(native_id: str) -> tuple[str, int] | None:
    """(array id, element index) of an element id, or None for a plain job id.

    ``123_4`` → ``("123", 4)`` (SLURM); ``123[4].server`` → ``("123[].server", 4)``
    (PBS Pro, Torque), the array id as qsub printed it.
    """
    text = native_id.strip()
    match = _SLURM_ELEMENT.fullmatch(text)
    if match:
        return match.group(1), int(match.group(2))
    match = _PBS_ELEMENT.fullmatch(text)
    if match:
        return f"{match.group(1)}[]{match.group(3) or ''}", int(match.group(2))
    return None


def element_index(environ: Mapping[str, str]) -> int:
    """Which element of an array this process is (0 for a job that is not an array)."""
    for name in INDEX_VARIABLES:
        value = environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return 0


def element_native_id(environ: Mapping[str, str]) -> str | None:
    """The id the batch system answers status queries for, for this job or element.

    PBS's ``PBS_JOBID`` (``123[4].server`` for an element) first; else SLURM's own job
    id of the element (also what SLURM's PBS wrappers' ``qstat`` knows it by).
    """
    for name in ("PBS_JOBID", "SLURM_JOB_ID"):
        value = environ.get(name, "").strip()
        if value:
            return value
    return None


def element_label(environ: Mapping[str, str]) -> str | None:
    """The element's id as users see it: ``123_4`` (SLURM), ``123[4].server`` (PBS)."""
    if environ.get("PBS_JOBID"):
        return environ["PBS_JOBID"]
    array, index = environ.get("SLURM_ARRAY_JOB_ID"), environ.get("SLURM_ARRAY_TASK_ID")
    if array and index:
        return f"{array}_{index}"
    return environ.get("SLURM_JOB_ID") or None
