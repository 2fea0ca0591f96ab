"""The batch scripts a run would submit, without submitting anything (``hpcflow
render``): the pilot allocation's, every job of jobs mode, or elastic mode's worker job."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from hpcflow.api.graph import workflow_graph
from hpcflow.backends.registry import get_backend
from hpcflow.modes.registry import render_scripts
from hpcflow.store.paths import RunPaths, StateRoot

if TYPE_CHECKING:
    from hpcflow.settings import Profile

#: The run id the scripts show: a run's id is known only once it is submitted.
PLACEHOLDER_RUN_ID = "RUN_ID"


def batch_scripts(workflow: Path, profile: Profile) -> Iterator[tuple[str | None, str]]:
    """The scripts a fresh run of the workflow file ``workflow`` with ``profile`` would
    submit, each with a heading (None for a single script), in the mode the profile
    takes (each made as it is asked for); the run directory is the default one, under
    :data:`PLACEHOLDER_RUN_ID`."""
    graph = workflow_graph(workflow, check_files=False)
    run_id = PLACEHOLDER_RUN_ID
    paths = RunPaths(StateRoot.beside(workflow).runs / run_id)
    backend = get_backend(profile.backend, profile=profile)
    yield from render_scripts(graph, profile, backend, paths, run_id)
