"""A task up to date in a run has its value in the run that made it: the one the
workflow's memo names (never found by searching the folders beside the run)."""

from __future__ import annotations

import json
from pathlib import Path

from hpcflow.store import statedb as st
from hpcflow.store.memo import Memo, MemoEntry
from hpcflow.store.paths import RunPaths, StateRoot, workflow_key
from hpcflow.store.private import private_dir
from hpcflow.store.results import load_result


def _run(workflow: Path, run_id: str, started: float, state: str, value: object = None) -> Path:
    paths = RunPaths(StateRoot.beside(workflow).runs / run_id)
    private_dir(paths.tasks_dir)
    paths.run_info.write_text(
        json.dumps({"run_id": run_id, "started": started, "workflow": str(workflow)})
    )
    with st.StateDB(paths.state_db) as db:
        db.add_tasks([(0, "t", "t", "t", [], state)])
    if value is not None:
        paths.result("t", 0).parent.mkdir(parents=True, exist_ok=True)
        paths.result("t", 0).write_text(json.dumps(value))
    return paths.run_dir


def test_the_value_of_an_up_to_date_task_comes_from_the_run_the_memo_names(tmp_path: Path) -> None:
    workflow = tmp_path / "workflow.yaml"
    workflow.write_text("name: w\n")
    _run(workflow, "20260101-120000-aaaaaa", 1.0, st.SUCCEEDED, {"made": "by the memo's run"})
    # Started later, also succeeded: the latest run before, but not the one the memo names.
    _run(workflow, "20260101-120000-ffffff", 1.5, st.SUCCEEDED, {"made": "elsewhere"})
    later = _run(workflow, "20260101-120001-000000", 2.0, st.CACHED)
    memo = Memo(StateRoot.beside(workflow).memo_db, workflow_key(workflow))
    memo.record([MemoEntry("t", "fp", {}, {}, "20260101-120000-aaaaaa")])
    memo.close()
    assert load_result(later, "t") == {"made": "by the memo's run"}
