"""The worker makes a task's output folders on its own node just before the task runs,
whatever it made before: a folder removed after the driver planned the task (a clean-up,
or a folder another node's file system client does not show yet) is there when the task
writes into it. Each shape of task: a shell task alone, shell tasks sharing a shell, and
a python task."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hpcflow.worker import shell_batch
from hpcflow.worker.calls import TaskCall
from hpcflow.worker.chunk import run_chunk
from tests.conftest import task_call


def _calls(tmp_path: Path, shape: str) -> list[TaskCall]:
    out = tmp_path / "out"
    if shape == "python":
        source = tmp_path / "source.txt"
        source.write_text("value\n")
        return [
            task_call(tmp_path, 0, "", kind="python", python="shutil:copyfile",
                      kwargs={"src": str(source), "dst": str(out / "0.txt")},
                      outputs=(str(out / "0.txt"),))
        ]  # fmt: skip
    # A timeout gives a shell task a process of its own; without one, tasks share a shell.
    timeout = 60.0 if shape == "shell alone" else None
    return [
        task_call(tmp_path, i, f"echo {i} > out/{i}.txt", outputs=(str(out / f"{i}.txt"),),
                  timeout=timeout)
        for i in range(2)
    ]  # fmt: skip


@pytest.mark.parametrize("shape", ["shell alone", "shell batch", "python"])
def test_a_task_whose_output_folder_was_removed_after_planning_still_writes_it(tmp_path, shape):
    calls = _calls(tmp_path, shape)
    assert bool(shell_batch.batchable(calls)) == (shape == "shell batch")
    assert [o.state for o in run_chunk(calls)] == ["succeeded"] * len(calls)

    calls = _calls(tmp_path, shape)  # planned again; then the folder goes
    shutil.rmtree(tmp_path / "out")
    outcomes = run_chunk(calls)
    assert [o.state for o in outcomes] == ["succeeded"] * len(calls), [o.message for o in outcomes]
    for call in calls:
        assert Path(call.outputs[0]).is_file()


def test_a_task_of_a_shared_shell_whose_folder_an_earlier_task_removed_still_writes_it(
    tmp_path,
):
    """Tasks sharing a shell: the folder is made again right before each task."""
    out = tmp_path / "out"
    calls = [
        task_call(tmp_path, 0, "echo 0 > out/0.txt; rm -r out", outputs=()),
        task_call(tmp_path, 1, "echo 1 > out/1.txt", outputs=(str(out / "1.txt"),)),
    ]
    out.mkdir()
    assert shell_batch.batchable(calls) == calls
    outcomes = run_chunk(calls)
    assert [o.state for o in outcomes] == ["succeeded"] * 2, [o.message for o in outcomes]
    assert (out / "1.txt").read_text() == "1\n"
