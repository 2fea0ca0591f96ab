"""Paths stay inside the workflow.

Another account shares a sample sheet with the victim (the user running the suite). Its
cells are paths that climb out of the workflow's folder (``../../victim``), absolute
paths elsewhere, or a name that goes through a symbolic link leading out. Used in
``outputs: ["out/{sample}.txt"]`` or ``["{sample}.txt"]``, such a value once made hpcflow
delete the victim's file before the attempt. Now ``hpcflow validate`` and ``hpcflow
run`` refuse the workflow with the file:line of the path, and the victim's files keep
their content and inode: nothing is deleted or moved to quarantine. Paths the author
writes out (no placeholder), and values under a folder the author names literally, stay
allowed. The worker checks again before it removes or moves an output (the last line).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from hpcflow.store.states import TaskState
from hpcflow.worker.execute import run_call
from tests.conftest import run_cli, task_call, write_workflow
from tests.security.conftest import Account

PRECIOUS = "the victim's own file\n"


def _workflow(sheet: Path, output: str) -> str:
    return f"""\
name: escape
tasks:
  - name: write
    foreach: {{from_table: {sheet}}}
    command: echo made > {{outputs}}
    outputs: ["{output}"]
"""


def _victim(path: Path) -> tuple[str, int, int]:
    """A file of the victim's, outside the workflow: (content, inode, mtime_ns)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(PRECIOUS)
    st = path.stat()
    return PRECIOUS, st.st_ino, st.st_mtime_ns


def _as_it_was(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return path.read_text(), st.st_ino, st.st_mtime_ns


def _shared_sheet(other: Account, folder: Path, cells: list[str]) -> Path:
    """The other account writes a sample sheet into the shared folder."""
    sheet = folder / f"sheet-{secrets.token_hex(4)}.csv"
    body = "sample\n" + "".join(f"{cell}\n" for cell in cells)
    done = other.python(f"open({str(sheet)!r}, 'w').write({body!r})")
    assert done.returncode == 0, done.stderr
    assert sheet.stat().st_uid == other.uid
    return sheet


def _quarantined(*roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob("quarantine") if any(p.iterdir())]


@pytest.mark.parametrize(
    ("output", "cell", "victim_at"),
    [
        ("out/{sample}.txt", "../../victim", "project/victim.txt"),
        ("{sample}.txt", "../../victim", "victim.txt"),
        ("{sample}.txt", "ABS/victim", "elsewhere/victim.txt"),
        ("out/{sample}.txt", "a/../../../victim", "project/victim.txt"),
    ],
)
def test_validate_and_run_refuse_a_value_that_leads_out(
    shared_dir: Path,
    other_account: Account,
    env: dict[str, str],
    output: str,
    cell: str,
    victim_at: str,
) -> None:
    folder = shared_dir / "project" / "wf"
    victim = shared_dir / victim_at
    before = _victim(victim)
    cell = cell.replace("ABS", str(shared_dir / "elsewhere"))
    sheet = _shared_sheet(other_account, shared_dir, ["ok", cell])
    workflow = write_workflow(folder, _workflow(sheet, output))
    (folder / "out").mkdir()
    for argv in (
        ["validate", str(workflow)],
        ["run", str(workflow), "--dry-run"],
        ["run", str(workflow)],
    ):
        result = run_cli(argv, env, cwd=folder, timeout=180)
        assert result.returncode == 2, (argv, result.output)
        assert f"{workflow}:6:15: tasks[0].outputs[0]: a value leads output" in result.output
        assert f"[sample={cell}]" in result.output
        assert "write the folder into the path literally" in result.output  # the hint
        assert "Traceback" not in result.output
        assert _as_it_was(victim) == before, argv
    assert not _quarantined(shared_dir, Path(env["HPCFLOW_HOME"]))
    assert not list((folder / "out").iterdir())  # nothing ran: not even the good cell


def test_a_value_through_a_symbolic_link_that_leads_out_is_refused(
    shared_dir: Path, other_account: Account, env: dict[str, str]
) -> None:
    folder = shared_dir / "wf"
    victim = shared_dir / "elsewhere" / "victim.txt"
    before = _victim(victim)
    folder.mkdir()
    (folder / "link").symlink_to(victim.parent)  # left in the work folder
    sheet = _shared_sheet(other_account, shared_dir, ["link/victim"])
    workflow = write_workflow(folder, _workflow(sheet, "{sample}.txt"))
    result = run_cli(["run", str(workflow)], env, cwd=folder, timeout=180)
    assert result.returncode == 2, result.output
    assert f"{workflow}:6:15: tasks[0].outputs[0]:" in result.output
    assert f"through the symbolic link {folder / 'link'}" in result.output
    assert "Traceback" not in result.output
    assert _as_it_was(victim) == before
    assert not _quarantined(shared_dir, Path(env["HPCFLOW_HOME"]))


def test_paths_the_author_writes_stay_allowed_outside(
    shared_dir: Path, other_account: Account, env: dict[str, str]
) -> None:
    folder = shared_dir / "wf"
    results = shared_dir / "results"  # outside the workflow, named by the author
    linked = shared_dir / "linked"
    linked.mkdir()
    folder.mkdir()
    (folder / "out").symlink_to(linked)  # the author's own link, in the literal part
    stale = results / "fixed.txt"
    _victim(stale)  # a stale literal output: hpcflow still replaces it
    sheet = _shared_sheet(other_account, shared_dir, ["a", "b"])
    workflow = write_workflow(
        folder,
        f"""\
name: literal
tasks:
  - name: fixed
    command: echo made > {{outputs}}
    outputs: ["{stale}"]
  - name: under
    foreach: {{from_table: {sheet}}}
    command: echo {{sample}} > {{outputs}}
    outputs: ["{results}/{{sample}}.txt"]
  - name: linked
    foreach: {{from_table: {sheet}}}
    command: echo {{sample}} > {{outputs}}
    outputs: ["out/{{sample}}.txt"]
""",
    )
    result = run_cli(["run", str(workflow)], env, cwd=folder, timeout=180)
    assert result.returncode == 0, result.output
    assert stale.read_text() == "made\n"
    assert (results / "a.txt").read_text() == "a\n"
    assert (results / "b.txt").read_text() == "b\n"
    assert (linked / "a.txt").read_text() == "a\n"
    # Under the author's folder a value still cannot climb out of it.
    sheet = _shared_sheet(other_account, shared_dir, ["../victim"])
    victim = shared_dir / "victim.txt"
    before = _victim(victim)
    escaping = write_workflow(
        folder,
        f"""\
name: climb
tasks:
  - name: under
    foreach: {{from_table: {sheet}}}
    command: echo x > {{outputs}}
    outputs: ["{results}/{{sample}}.txt"]
""",
        "climb.yaml",
    )
    refused = run_cli(["run", str(escaping)], env, cwd=folder, timeout=180)
    assert refused.returncode == 2, refused.output
    assert f"{escaping}:6:15: tasks[0].outputs[0]:" in refused.output
    assert _as_it_was(victim) == before


def test_the_worker_never_removes_or_quarantines_an_output_outside(shared_dir: Path) -> None:
    """The last line, should planning ever let one through: an attempt whose output lies
    outside the folders its call allows fails before it starts, and leaves the file."""
    folder = shared_dir / "wf"
    folder.mkdir()
    victim = shared_dir / "victim.txt"
    before = _victim(victim)
    inside = folder / "fine.txt"
    inside.write_text("stale\n")
    call = task_call(
        folder,
        0,
        f"touch {shared_dir / 'ran'}; exit 3",
        outputs=(str(inside), str(victim)),
        confine=(str(folder),),
    )
    outcome = run_call(call)
    assert outcome.state == TaskState.FAILED
    assert "outputs outside the workflow, not touched" in (outcome.message or "")
    assert not (shared_dir / "ran").exists()  # it never started
    assert _as_it_was(victim) == before
    quarantine = Path(call.quarantine_dir)
    assert not quarantine.exists() or "victim.txt" not in os.listdir(quarantine)
