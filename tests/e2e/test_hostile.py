"""Hostile names, parameters and paths never inject commands nor escape the run directory."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.conftest import HOSTILE_VALUES


def test_hostile_values_are_data_not_code(tmp_path, hpcflow):
    work = tmp_path / "work dir; touch CANARY"
    work.mkdir()
    tasks = []
    for n, value in enumerate(HOSTILE_VALUES):
        tasks.append(
            {
                "name": f"t{n} {value}",
                "params": {"v": value},
                "command": "printf '%s' {v} > {outputs}; printf '%s' {v}",
                "outputs": [f"out/{n}.txt"],
            }
        )
        tasks.append(
            {
                "name": f"argv{n} {value}",
                "params": {"v": value},
                "argv": [
                    "python3",
                    "-c",
                    "import sys; open(sys.argv[2], 'w').write(sys.argv[1])",
                    "{v}",
                    "{outputs}",
                ],
                "outputs": [f"out/argv-{n}.txt"],
            }
        )
    tasks.append(
        {
            "name": "sweep",
            "foreach": {"v": HOSTILE_VALUES},
            "command": "printf '%s\\n' {v} >> sweep.log; printf '%s' {v} >&2",
        }
    )
    wf = work / "workflow.yaml"
    wf.write_text(yaml.safe_dump({"name": "hostile; touch CANARY", "tasks": tasks}))
    result = hpcflow("run", str(wf), "--threads", "1", cwd=tmp_path)
    assert result.returncode == 0, result.output
    for n, value in enumerate(HOSTILE_VALUES):
        assert (work / "out" / f"{n}.txt").read_text() == value
        assert (work / "out" / f"argv-{n}.txt").read_text() == value
    assert len((work / "sweep.log").read_text().split("\n")) >= len(HOSTILE_VALUES)
    canaries = [p for p in tmp_path.rglob("CANARY")] + list(Path("/").glob("CANARY"))
    assert canaries == []
    # Every task log lives inside the run directory, whatever the task's name.
    status = json.loads(hpcflow("status", "--json", cwd=tmp_path).stdout)
    run_dir = Path(status["run_dir"])
    # Every task that printed has its log folder, directly in tasks/, whatever its name.
    task_dirs = list((run_dir / "tasks").iterdir())
    assert len(task_dirs) == len(HOSTILE_VALUES) + len(HOSTILE_VALUES)
    assert all(d.parent == run_dir / "tasks" for d in task_dirs)
    logs = sorted(p.read_text() for d in task_dirs for p in d.iterdir())
    assert logs.count("a b") == 2 and logs.count("$(touch CANARY)") == 2
    assert not (tmp_path / "escape").exists()
    assert not Path("/abs/path").exists()
