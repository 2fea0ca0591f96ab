"""Where in the user's Python a part of a workflow was made, and errors moved there.

A workflow built in Python is validated as the YAML text the API writes, by the same
loader as a workflow file, so its problems are the same problems. Their positions,
though, would name lines of a file the user never wrote: :func:`relocate` moves each
problem of that text to the call that made the offending part (``Workflow(...)``,
``wf.task(...)``, ``wf.include(...)``), recorded by :func:`caller` when it was made.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import FrameType

from hpcflow.errors import SpecError, SpecProblem

#: hpcflow's own files: frames in them are never the user's call.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_TASK = re.compile(r"^tasks\[(\d+)\]")
_INCLUDE = re.compile(r"^include\.([^.\[]+)")


@dataclass(frozen=True)
class CallSite:
    """A line of the user's code: the file and the line number."""

    file: str
    line: int

    def problem(self, where: str, message: str, hint: str | None = None) -> SpecProblem:
        """A problem found in what this call passed, reported at the call."""
        return SpecProblem(
            file=self.file, line=self.line, column=None, where=where, message=message, hint=hint
        )


def caller() -> CallSite:
    """The innermost frame of the current stack outside hpcflow's own files: the user's
    call into the API (``<python>`` when hpcflow called itself)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        file = frame.f_code.co_filename
        if not file.startswith(_PACKAGE):
            return CallSite(file, frame.f_lineno)
        frame = frame.f_back
    return CallSite("<python>", 0)


@dataclass(frozen=True)
class CallSites:
    """The calls that made each part of a workflow built in Python (None: a part read
    from a file, whose positions stand)."""

    workflow: CallSite | None
    tasks: Sequence[CallSite | None]
    includes: Mapping[str, CallSite | None]

    def site_of(self, where: str) -> CallSite | None:
        """The call that made the part at ``where`` (``tasks[2].needs[0]``,
        ``include.qc.params.x``, ``defaults.timeout``...)."""
        task = _TASK.match(where)
        if task is not None:
            index = int(task.group(1))
            # Beyond the workflow's own tasks: an include's, which points into its file.
            return self.tasks[index] if index < len(self.tasks) else None
        include = _INCLUDE.match(where)
        if include is not None:
            return self.includes.get(include.group(1))
        return self.workflow


def relocate(error: SpecError, text_file: str, sites: CallSites) -> SpecError:
    """``error`` with each problem that points into the API's workflow text (named
    ``text_file``) moved to the Python call that made the part it is about; problems in
    other files (included ones, sample sheets) keep their place."""
    problems: list[SpecProblem] = []
    moved = False
    for problem in error.problems:
        site = sites.site_of(problem.where) if problem.file == text_file else None
        if site is None:
            problems.append(problem)
            continue
        problems.append(replace(problem, file=site.file, line=site.line, column=None))
        moved = True
    return SpecError(problems) if moved else error
