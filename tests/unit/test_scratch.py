"""``scratch: true``: an attempt runs in a fresh node-local folder, its inputs linked in,
its declared outputs copied back whole after a success and never after a failure."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hpcflow.worker.execute import run_call
from hpcflow.worker.scratch import inside, scratch_root
from tests.conftest import task_call


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    folder = tmp_path / "node-local"
    folder.mkdir()
    return folder


def _call(tmp_path: Path, scratch: Path, command: str, outputs=(), inputs=(), **changes):
    work = tmp_path / "wf"
    work.mkdir(exist_ok=True)
    return task_call(
        work,
        1,
        command,
        scratch=str(scratch),
        outputs=tuple(str(work / o) for o in outputs),
        inputs=tuple(str(work / i) for i in inputs),
        **changes,
    )


def test_outputs_come_back_inputs_are_linked_and_the_folder_goes(tmp_path, scratch):
    work = tmp_path / "wf"
    (work / "data").mkdir(parents=True)
    (work / "data" / "in.txt").write_text("input\n")
    call = _call(
        tmp_path,
        scratch,
        'pwd > where.txt; cat data/in.txt > res/out.txt; echo "$HPCFLOW_WORKDIR" >> res/out.txt;'
        " cp where.txt res/where.txt; touch temporary.txt",
        outputs=("res/out.txt", "res/where.txt"),
        inputs=("data/in.txt",),
    )
    outcome = run_call(call)
    assert outcome.state == "succeeded", outcome.message
    assert (work / "res" / "out.txt").read_text() == f"input\n{work}\n"
    ran_in = (work / "res" / "where.txt").read_text().strip()
    assert ran_in.startswith(str(scratch)) and not os.path.exists(ran_in)
    assert not (work / "temporary.txt").exists() and not (work / "where.txt").exists()
    assert list(scratch.iterdir()) == []
    assert str(work / "res" / "out.txt") in outcome.outputs_sig
    assert sorted(p.name for p in (work / "res").iterdir()) == ["out.txt", "where.txt"]
    assert not [p for p in (work / "res").iterdir() if p.name.endswith(".part")]


def test_a_failed_task_leaves_no_output_and_its_outputs_are_quarantined(tmp_path, scratch):
    work = tmp_path / "wf"
    call = _call(tmp_path, scratch, "echo half > a.txt; exit 3", outputs=("a.txt", "b.txt"))
    outcome = run_call(call)
    assert outcome.state == "failed" and outcome.exit_code == 3
    assert not (work / "a.txt").exists()
    assert (Path(call.quarantine_dir) / "a.txt").read_text() == "half\n"
    assert list(scratch.iterdir()) == []


def test_one_missing_output_brings_none_back(tmp_path, scratch):
    work = tmp_path / "wf"
    call = _call(tmp_path, scratch, "echo a > a.txt", outputs=("a.txt", "b.txt"))
    outcome = run_call(call)
    assert outcome.state == "failed" and outcome.exit_code == 0
    assert outcome.message == f"exited 0 but did not create: {work / 'b.txt'}"
    assert not (work / "a.txt").exists()
    assert list(scratch.iterdir()) == []


def test_a_failed_copy_back_leaves_nothing_half_copied(tmp_path, scratch):
    work = tmp_path / "wf"
    # b.txt is a link to nothing: it exists, but copying it back fails after a.txt's copy.
    call = _call(
        tmp_path, scratch, "echo a > a.txt; ln -s /nonexistent/x b.txt", outputs=("a.txt", "b.txt")
    )
    outcome = run_call(call)
    assert outcome.state == "failed"
    assert "scratch: could not copy the outputs back" in (outcome.message or "")
    assert sorted(p.name for p in work.iterdir()) == ["q"]  # the quarantine only
    assert (Path(call.quarantine_dir) / "a.txt").read_text() == "a\n"
    assert list(scratch.iterdir()) == []


def test_an_output_outside_the_task_folder_is_refused(tmp_path, scratch):
    work = tmp_path / "wf"
    work.mkdir()
    call = task_call(
        work, 1, "true", scratch=str(scratch), outputs=(str(tmp_path / "elsewhere.txt"),)
    )
    outcome = run_call(call)
    assert outcome.state == "failed"
    assert "outside the task's folder" in (outcome.message or "")


def test_a_python_task_imports_from_its_own_folder(tmp_path, scratch):
    work = tmp_path / "wf"
    work.mkdir()
    (work / "scratchmod.py").write_text(
        "import os\ndef make():\n    open('made.txt', 'w').write(os.getcwd())\n    return 1\n"
    )
    call = task_call(
        work, 1, "", kind="python", python="scratchmod:make",
        kwargs={}, scratch=str(scratch), outputs=(str(work / "made.txt"),),
    )  # fmt: skip
    call.command = None
    outcome = run_call(call, inline=True)
    assert outcome.state == "succeeded", outcome.message
    assert (work / "made.txt").read_text().startswith(str(scratch))


def test_where_scratch_folders_go(monkeypatch, tmp_path):
    monkeypatch.setenv("MYSCRATCH", str(tmp_path))
    assert scratch_root("$MYSCRATCH/x") == f"{tmp_path}/x"
    monkeypatch.setenv("SLURM_TMPDIR", "/local/job")
    assert scratch_root("") == "/local/job"
    assert inside("/a/b/c", "/a") == "b/c"
    assert inside("/a", "/a") is None and inside("/ab/c", "/a") is None
