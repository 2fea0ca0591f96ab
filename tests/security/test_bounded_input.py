"""Bounded input: a workflow's files cannot make planning take minutes or the login
node's memory.

* a chain of files each including the next twice (2**13 tasks from 14 small files) is
  read and parsed once per file, and validates in seconds (it took minutes when each
  use parsed the file again and copied its positions);
* at most 50,000 task definitions after includes and 2,000,000 task instances after
  sweeps, refused before any is made;
* workflow, included and sample-sheet files larger than their cap are refused before
  they are read (sparse files here: their size costs no disk);
* a sample sheet is read by Python's CSV parser over its whole text, so a quoted cell
  with a line break reaches the task byte for byte.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcflow.spec import includes
from hpcflow.spec.includes import MAX_TASKS
from hpcflow.spec.limits import CAP_VARIABLE, MAX_TABLE_BYTES, MAX_WORKFLOW_BYTES
from hpcflow.spec.loader import load_workflow
from hpcflow.spec.sweep import MAX_TOTAL_INSTANCES
from tests.conftest import run_cli, write_workflow


def _chain(folder: Path, depth: int, width: int = 2) -> Path:
    """``f0.yaml`` … ``f{depth}.yaml``: each has one task and includes the next ``width``
    times; f0 ends up with (width**(depth+1) - 1) / (width - 1) tasks."""
    folder.mkdir(parents=True, exist_ok=True)
    for k in range(depth + 1):
        uses = "abcdefgh"[:width]
        include = (
            ""
            if k == depth
            else "include:\n" + "".join(f"  {u}: {{file: f{k + 1}.yaml}}\n" for u in uses)
        )
        (folder / f"f{k}.yaml").write_text(
            f"name: f{k}\n{include}tasks:\n  - name: t\n    command: echo {k}\n"
        )
    return folder / "f0.yaml"


def test_a_file_included_many_times_is_parsed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    depth = 13
    top = _chain(tmp_path / "chain", depth)
    parsed: list[str] = []
    real = includes.load_yaml

    def counting(text: str, file: str):  # type: ignore[no-untyped-def]
        parsed.append(file)
        return real(text, file)

    monkeypatch.setattr(includes, "load_yaml", counting)
    loaded = load_workflow(top)
    assert len(loaded.workflow.tasks) == 2 ** (depth + 1) - 1
    assert sorted(parsed) == sorted(str(tmp_path / "chain" / f"f{k}.yaml") for k in range(1, 14))
    # Errors still point into the file the task came from, at its line.
    deepest = next(i for i, t in enumerate(loaded.workflow.tasks) if t.name.count(".") == depth)
    problem = loaded.positions.problem(("tasks", deepest, "command"), "x")
    assert (Path(problem.file).name, problem.line) == (f"f{depth}.yaml", 4)
    # And for real, through the CLI (within the test's ordinary timeout).
    result = run_cli(["validate", str(top)], env, timeout=120)
    assert result.returncode == 0, result.output
    assert f"{2 ** (depth + 1) - 1} task definition(s)" in result.output


def test_too_many_task_definitions_after_includes(tmp_path: Path, env: dict[str, str]) -> None:
    top = _chain(tmp_path / "wide", 8, width=4)  # 4**8 = 65,536 tasks at the bottom alone
    result = run_cli(["validate", str(top)], env, timeout=120)
    assert result.returncode == 2, result.output
    assert f"the workflow has more than {MAX_TASKS:,} task definitions" in result.output
    assert ".yaml:" in result.output and "include." in result.output  # file:line of it
    assert "Traceback" not in result.output


def test_too_many_task_instances_after_sweeps(tmp_path: Path, env: dict[str, str]) -> None:
    tasks = "".join(
        f"  - name: t{k}\n    foreach: {{i: {{range: [0, 1000000]}}}}\n    command: echo {{i}}\n"
        for k in range(3)
    )
    workflow = write_workflow(tmp_path, f"name: many\ntasks:\n{tasks}")
    result = run_cli(["validate", str(workflow)], env, timeout=120)
    assert result.returncode == 2, result.output
    assert (
        f"{workflow}:3:3: tasks: the workflow has 3,000,000 task instances once its sweeps "
        f"are expanded; at most {MAX_TOTAL_INSTANCES:,} are allowed"
    ) in result.output
    assert "Traceback" not in result.output


def _sparse(path: Path, head: str, size: int) -> None:
    """A file of ``size`` bytes that starts with ``head`` and takes no disk for the rest."""
    with open(path, "w") as fh:
        fh.write(head)
        fh.truncate(size)


def test_a_workflow_file_over_the_cap_is_refused_unread(
    tmp_path: Path, env: dict[str, str]
) -> None:
    workflow = tmp_path / "workflow.yaml"
    _sparse(
        workflow, "name: big\ntasks:\n  - {name: t, command: 'true'}\n#", MAX_WORKFLOW_BYTES + 1
    )
    result = run_cli(["validate", str(workflow)], env, timeout=120)
    assert result.returncode == 2, result.output
    assert f"{workflow}: a workflow file is larger than 16 MiB" in result.output
    assert f"{CAP_VARIABLE}=N" in result.output  # how to go on
    assert "Traceback" not in result.output
    # The cap is a setting: a lower one refuses a smaller file, a higher one lets it in.
    small = tmp_path / "small.yaml"
    _sparse(small, "name: s\ntasks:\n  - {name: t, command: 'true'}\n#", 2 * 2**20)
    lowered = run_cli(["validate", str(small)], {**env, CAP_VARIABLE: "1"}, timeout=120)
    assert lowered.returncode == 2 and "larger than 1 MiB" in lowered.output, lowered.output


def test_an_included_file_over_the_cap_is_refused_at_the_include(
    tmp_path: Path, env: dict[str, str]
) -> None:
    _sparse(tmp_path / "big.yaml", "name: big\ntasks: []\n#", MAX_WORKFLOW_BYTES + 1)
    workflow = write_workflow(
        tmp_path,
        "name: top\ninclude:\n  big: {file: big.yaml}\ntasks:\n  - {name: t, command: 'true'}\n",
    )
    result = run_cli(["validate", str(workflow)], env, timeout=120)
    assert result.returncode == 2, result.output
    assert "include 'big': an included workflow file is larger than 16 MiB" in result.output
    assert f"{workflow}:3:" in result.output
    assert "Traceback" not in result.output


def test_a_sample_sheet_over_the_cap_is_refused_at_the_line_that_reads_it(
    tmp_path: Path, env: dict[str, str]
) -> None:
    _sparse(tmp_path / "samples.csv", "sample\na\n", MAX_TABLE_BYTES + 1)
    workflow = write_workflow(
        tmp_path,
        "name: sheet\ntasks:\n  - name: t\n    foreach: {from_table: samples.csv}\n"
        "    command: echo {sample}\n",
    )
    result = run_cli(["validate", str(workflow)], env, timeout=120)
    assert result.returncode == 2, result.output
    assert f"{workflow}:4:" in result.output
    assert "a sample sheet is larger than 64 MiB" in result.output
    assert "Traceback" not in result.output


STEPS = """
def write(sample, text):
    with open(f"out/{sample}.txt", "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
"""


def test_a_quoted_multi_line_cell_reaches_the_task_byte_for_byte(
    tmp_path: Path, env: dict[str, str]
) -> None:
    cells = {
        "a": "line one\nline two",
        "b": 'a comma, "quotes" and\r\na CRLF inside',
        "c": "  spaces kept  ",
    }
    sheet = "sample,text\r\n" + "".join(
        f'{k},"{v.replace(chr(34), chr(34) * 2)}"\r\n' for k, v in cells.items()
    )
    (tmp_path / "samples.csv").write_bytes(sheet.encode())
    (tmp_path / "steps.py").write_text(STEPS)
    (tmp_path / "out").mkdir()
    workflow = write_workflow(
        tmp_path,
        "name: cells\ntasks:\n  - name: t\n    foreach: {from_table: samples.csv}\n"
        "    python: steps:write\n    outputs: ['out/{sample}.txt']\n",
    )
    result = run_cli(["run", str(workflow)], env, cwd=tmp_path, timeout=180)
    assert result.returncode == 0, result.output
    for sample, text in cells.items():
        assert (tmp_path / "out" / f"{sample}.txt").read_bytes() == text.encode(), sample
