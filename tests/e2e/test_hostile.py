"""Hostile names, parameters and paths never inject commands nor escape the run directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
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


#: The issue's reproductions (issue 36): sample-sheet cells that ran a command when used
#: inside quotes, while shlex.quote was all hpcflow did.
SHEET_CELLS = [
    "$(touch CANARY)",
    "`touch CANARY`",
    "'; touch CANARY; '",
    '"; touch CANARY; "',
    "a\ntouch CANARY\nb",
    "x\\",
]


def _sheet(folder: Path) -> Path:
    """A CSV sample sheet with one row per hostile cell (quoted cells keep line breaks)."""
    import csv
    import io

    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["n", "sample"])
    for n, cell in enumerate(SHEET_CELLS):
        writer.writerow([n, cell])
    sheet = folder / "samples.csv"
    sheet.write_text(text.getvalue())
    return sheet


def test_sample_sheet_cells_in_quotes_are_data(tmp_path, hpcflow):
    """`echo "x {sample}"`, `echo '{sample}'`, `$'…'` and `"$(…)"`: each cell arrives as
    its exact bytes, through both ways hpcflow runs a shell task (a shared shell; a
    ``bash -c`` of its own, which a timeout asks for), and no cell runs anything."""
    _sheet(tmp_path)
    command = (
        "printf %s \"x {sample}\" > dq/{n}; printf %s '{sample}' > sq/{n}; "
        'printf %s $\'{sample}\' > ansi/{n}; printf %s "$(printf %s. "{sample}")" > sub/{n}'
    )
    task = {"foreach": {"from_table": "samples.csv"}, "command": command}
    tasks = [
        {"name": "shared", **task},
        {"name": "own", "timeout": "1m", **task, "command": command.replace(" > ", " > own")},
    ]
    for folder in ("dq", "sq", "ansi", "sub", "owndq", "ownsq", "ownansi", "ownsub"):
        (tmp_path / folder).mkdir()
    wf = tmp_path / "workflow.yaml"
    wf.write_text(yaml.safe_dump({"name": "sheet", "tasks": tasks}))
    result = hpcflow("run", str(wf), cwd=tmp_path)
    assert result.returncode == 0, result.output
    for prefix in ("", "own"):
        for n, cell in enumerate(SHEET_CELLS):
            assert (tmp_path / f"{prefix}dq" / str(n)).read_text() == f"x {cell}"
            assert (tmp_path / f"{prefix}sq" / str(n)).read_text() == cell
            assert (tmp_path / f"{prefix}ansi" / str(n)).read_text() == cell
            assert (tmp_path / f"{prefix}sub" / str(n)).read_text() == f"{cell}."
    assert list(tmp_path.rglob("CANARY")) == []


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("echo `echo {sample}`", "backticks"),
        ("echo $(( {n} + 1 ))", "arithmetic"),
        ("cat <<EOF\n{sample}\nEOF", "here-document"),
        ("echo ${X:-{sample}}", "${…}"),
        ("echo \\{sample}", "backslash"),
    ],
)
def test_unsafe_placeholders_are_refused_with_file_line(tmp_path, hpcflow, command, reason):
    _sheet(tmp_path)
    wf = tmp_path / "workflow.yaml"
    wf.write_text(
        "name: refused\ntasks:\n  - name: marker\n    command: touch MARKER\n"
        "  - name: t\n    foreach: {from_table: samples.csv}\n"
        f"    command: {json.dumps(command)}\n"
    )
    line = 7
    for args in (("validate", str(wf)), ("run", str(wf))):
        result = hpcflow(*args, cwd=tmp_path)
        assert result.returncode == 2, result.output
        assert "Traceback" not in result.output, result.output
        assert f"workflow.yaml:{line}:" in result.output, result.output
        assert "cannot be quoted safely" in result.output and reason in result.output
        assert "hint:" in result.output, result.output
    assert not (tmp_path / "MARKER").exists()
    assert list(tmp_path.rglob("CANARY")) == []


def test_a_value_with_a_nul_byte_is_refused_with_file_line(tmp_path, hpcflow):
    wf = tmp_path / "workflow.yaml"
    wf.write_text(
        "name: nul\ntasks:\n  - name: marker\n    command: touch MARKER\n"
        '  - name: t\n    params: {v: "a\\0b"}\n    command: printf %s {v} > out\n'
    )
    for args in (("validate", str(wf)), ("run", str(wf))):
        result = hpcflow(*args, cwd=tmp_path)
        assert result.returncode == 2, result.output
        assert "workflow.yaml:6:" in result.output and "NUL byte" in result.output
        assert "Traceback" not in result.output, result.output
    assert not (tmp_path / "MARKER").exists()
