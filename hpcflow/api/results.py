"""A python task's return value, saved to a file of the user's choosing (``hpcflow result
-o``) or named by its type for a reader (``hpcflow result``)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from hpcflow.errors import RunError
from hpcflow.store.results import value_keys
from hpcflow.store.values import ValueUnreadable, value_pickle
from hpcflow.worker.values import type_name

if TYPE_CHECKING:
    from hpcflow.api.run import Run

__all__ = ["save_result", "type_name"]


def save_result(run: Run, task: str, output: Path) -> str:
    """Save the return value of python task ``task`` in ``run`` to ``output``: the JSON
    file as it is, or the bare pickle, its MAC checked (the header is hpcflow's, for
    ``pickle.load`` elsewhere). Returns what was saved: ``JSON`` or ``a pickle``. Raises
    :class:`RunError` for a value file that does not load."""
    source = run.result_file(task)
    if source.suffix == ".json":
        shutil.copyfile(source, output)
        return "JSON"
    try:
        data = value_pickle(str(source), *value_keys(source))
    except ValueUnreadable as exc:
        raise RunError(str(exc), hint=f"hpcflow run WORKFLOW --rerun '{task}'") from None
    output.write_bytes(data)
    return "a pickle"
