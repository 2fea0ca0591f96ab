"""The last line: hpcflow removes or moves a task's outputs only where the plan allows.

Planning refuses a path that a value leads out of the workflow
(:mod:`hpcflow.dag.confine`); each attempt also carries the folders (and the paths the
author wrote out in full) where its outputs may lie (:attr:`TaskCall.confine`), and the
worker checks every output against them again before it removes a stale one or moves a
failed attempt's to quarantine. Standard library only: this runs on the workers.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

log = logging.getLogger(__name__)


def may_remove(path: str, confine: Sequence[str]) -> bool:
    """Whether hpcflow may remove or move output ``path``: it lies in one of the folders
    ``confine`` names, or is one of them (an empty ``confine`` allows everything: calls
    made before the field existed). A refusal is logged."""
    if not confine:
        return True
    normal = os.path.normpath(path)
    for folder in confine:
        if normal == folder or normal.startswith(folder.rstrip("/") + "/"):
            return True
    log.warning("not removing or moving %s: it lies outside %s", path, ", ".join(confine))
    return False
