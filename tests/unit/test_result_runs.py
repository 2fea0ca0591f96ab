"""A task up to date in a run has its value in the run before it that made it: found by
the runs' starts, also when two runs started in the same second (their ids then sort in
random order)."""

from __future__ import annotations

import json
from pathlib import Path

from hpcflow.store import statedb as st
from hpcflow.store.paths import RunPaths
from hpcflow.store.results import load_result


def _run(runs: Path, run_id: str, started: float, state: str, value: object = None) -> Path:
    paths = RunPaths(runs / run_id)
    paths.tasks_dir.mkdir(parents=True)
    paths.run_info.write_text(json.dumps({"run_id": run_id, "started": started}))
    with st.StateDB(paths.state_db) as db:
        db.add_tasks([(0, "t", "t", "t", [], state)])
    if value is not None:
        paths.result("t", 0).parent.mkdir(parents=True, exist_ok=True)
        paths.result("t", 0).write_text(json.dumps(value))
    return paths.run_dir


def test_the_value_of_an_up_to_date_task_comes_from_the_run_that_made_it(tmp_path: Path) -> None:
    # Same second; the later run's id sorts first.
    _run(tmp_path, "20260101-120000-ffffff", 1.5, st.SUCCEEDED, {"made": "first"})
    later = _run(tmp_path, "20260101-120000-000000", 1.7, st.CACHED)
    _run(tmp_path, "20260101-120001-aaaaaa", 2.0, st.SUCCEEDED, {"made": "after"})
    assert load_result(later, "t") == {"made": "first"}
