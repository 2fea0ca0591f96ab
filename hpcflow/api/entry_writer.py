"""Python values written into a workflow document's entries, each problem at the call.

:class:`~hpcflow.api.workflow.Workflow` builds its document from the values its calls
are given (``Workflow(...)``, ``wf.task(...)``, ``wf.include(...)``): each is written as
the file writes it (:mod:`hpcflow.api.document`), a python task's function as its
``module:qualname`` (:mod:`hpcflow.api.callables`). What cannot be written is not raised
at once but noted as a problem at the user's call, so that one call reports all of its
mistakes together.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcflow.api.callables import NotImportable, reference
from hpcflow.api.callsites import CallSite
from hpcflow.api.document import Unwritable, plain, sweep
from hpcflow.errors import SpecError, SpecProblem


@dataclass
class EntryWriter:
    """Writes the values one call gave (at ``site``) and collects their problems."""

    site: CallSite
    problems: list[SpecProblem] = field(default_factory=list)

    def problem(self, where: str, message: str, hint: str | None = None) -> None:
        """Note a problem about the part at ``where``, at the call."""
        self.problems.append(self.site.problem(where, message, hint))

    def plain(self, value: Any, where: str) -> Any:
        """``value`` as the file writes it (None, with a problem, if it cannot be)."""
        try:
            return plain(value, "")
        except Unwritable as exc:
            self.problem(f"{where}{exc.where}", str(exc))
            return None

    def task_key(self, entry: dict[str, Any], key: str, value: Any, at: str) -> None:
        """Set ``key`` of the task entry ``entry`` (at ``at``) to ``value`` as the file
        writes it: a sweep for ``foreach``, a plain value otherwise."""
        try:
            entry[key] = sweep(value) if key == "foreach" else plain(value, f".{key}")
        except Unwritable as exc:
            self.problem(f"{at}{exc.where}", str(exc))

    def function(
        self, function: Callable[..., Any], workdir: Path | None, where: str
    ) -> str | None:
        """``module:qualname`` of a python task's function (run in ``workdir``), or None
        with a problem saying why a worker could not import it."""
        try:
            return reference(function, workdir)
        except NotImportable as exc:
            self.problem(where, str(exc), exc.hint)
            return None

    def raise_problems(self) -> None:
        """Raise the problems noted, if any, as one :class:`SpecError`."""
        if self.problems:
            raise SpecError(self.problems)


def task_workdir(
    folder: Path, head: Mapping[str, Any], own: str | os.PathLike[str] | None
) -> Path | None:
    """The folder a task runs in, as the plan makes it (the workflow's ``workdir``, the
    defaults', the task's own, below ``folder``; ``head``: the document's keys but its
    tasks and includes); None when it depends on the task's parameters."""
    defaults = head.get("defaults") or {}
    parts = [
        os.fspath(p)
        for p in (head.get("workdir"), defaults.get("workdir"), own)
        if p is not None and os.fspath(p)
    ]
    if any("{" in part for part in parts):
        return None
    return (folder.joinpath(*parts)).resolve()


def value_sources(sources: Mapping[str, Any]) -> dict[str, Any]:
    """``from_``'s ``(task, as)`` pairs as the file's ``{task, as}`` mappings."""
    out: dict[str, Any] = {}
    for argument, source in sources.items():
        if isinstance(source, tuple) and len(source) == 2:
            out[argument] = {"task": source[0], "as": source[1]}
        else:
            out[argument] = source
    return out
