"""State is private: hpcflow's folders are 0700 and its files 0600 whatever the umask,
another account can read none of a run's state, values, logs or memo, and hpcflow
refuses state that another account owns or may change (a clear error, no traceback).

The victim's workflow and run folders lie in a sticky, world-writable folder like shared
scratch, so only the modes hpcflow sets keep the other account out.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hpcflow.store.atomic import write_text_atomic
from hpcflow.store.private import StateNotPrivate, private_dir, private_file
from hpcflow.store.sqlite import connect_writer
from tests.conftest import CliResult, run_cli, write_workflow
from tests.security.conftest import Account

STEPS = """
def make():
    return {"secret": 42}

def use(x):
    print("patient-7 of", x)
    return x["secret"] + 1
"""

WORKFLOW = """
name: private
tasks:
  - name: make
    python: steps:make
  - name: use
    python: steps:use
    from: {x: make}
  - name: out
    command: "echo made > out.txt; echo on-stderr >&2"
    outputs: [out.txt]
"""


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "HPCFLOW_HOME": str(home), "COLUMNS": "200", "NO_COLOR": "1"}


def _run(args: list[str], env: dict[str, str], cwd: Path, umask: int) -> CliResult:
    proc = subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, umask=umask,
    )  # fmt: skip
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def _workflow(shared_dir: Path) -> Path:
    folder = shared_dir / "wf"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    (folder / "steps.py").write_text(textwrap.dedent(STEPS))
    return write_workflow(folder, WORKFLOW)


def _modes(top: Path) -> dict[str, int]:
    """Every folder and file under ``top`` (itself too), by path, with its mode bits."""
    found = {str(top): stat.S_IMODE(top.stat().st_mode)}
    for path in top.rglob("*"):
        found[str(path)] = stat.S_IMODE(path.lstat().st_mode)
    return found


@pytest.mark.parametrize("umask", [0o000, 0o002], ids=["umask-000", "umask-002"])
def test_state_values_and_logs_are_private_whatever_the_umask(
    other_account: Account, shared_dir: Path, umask: int
) -> None:
    workflow = _workflow(shared_dir)
    home = shared_dir / "home"  # HPCFLOW_HOME: the run index and the value key
    run_dir = shared_dir / "run"
    env = _env(home)
    done = _run(
        ["run", str(workflow), "-q", "--run-dir", str(run_dir)], env, workflow.parent, umask
    )
    assert done.returncode == 0, done.output
    state = workflow.parent / ".hpcflow"
    modes = {**_modes(state), **_modes(run_dir), **_modes(home)}
    assert {str(p) for p in (run_dir / "tasks").rglob("value.pickle")}  # a value was written
    assert any(p.endswith(".err") for p in modes)  # and a log
    assert any("journal" in p for p in modes) and str(state / "memo.sqlite") in modes
    loose = {path: f"{mode:04o}" for path, mode in modes.items() if mode & 0o077}
    assert loose == {}
    # The task's own output is the user's business: it keeps the umask.
    assert stat.S_IMODE((workflow.parent / "out.txt").stat().st_mode) == 0o666 & ~umask
    # The other account reads none of it.
    for target in [
        state / "memo.sqlite",
        run_dir / "state.sqlite",
        run_dir / "driver.log",
        next((run_dir / "tasks").rglob("value.pickle")),
        next((run_dir / "tasks").rglob("*.err")),
        home / "value.key",
        home / "runs.jsonl",
    ]:
        peek = other_account.run(["cat", str(target)])
        assert peek.returncode != 0 and "Permission denied" in peek.stderr, target
    for folder in (state, run_dir, home):
        listing = other_account.run(["ls", str(folder)])
        assert listing.returncode != 0 and "Permission denied" in listing.stderr, folder


def test_a_run_folder_another_account_made_is_refused(
    other_account: Account, shared_dir: Path, tmp_path: Path
) -> None:
    """The other account makes the folder the victim names as --run-dir first (empty,
    open to all): the victim's run stops with the path and what to do."""
    workflow = _workflow(shared_dir)
    trap = shared_dir / "run"
    made = other_account.run(["mkdir", "-m", "777", str(trap)])
    assert made.returncode == 0, made.stderr
    result = run_cli(["run", str(workflow), "-q", "--run-dir", str(trap)], _env(tmp_path / "h"))
    assert result.returncode == 2, result.output
    assert f"{trap} belongs to another account" in result.stderr
    assert "hint:" in result.stderr and "Traceback" not in result.output
    assert list(trap.iterdir()) == []  # nothing of the victim's went into it


def test_state_another_account_owns_or_may_change_is_refused(
    other_account: Account, shared_dir: Path, tmp_path: Path
) -> None:
    """A workflow right in the shared folder: the other account makes its .hpcflow first.
    Then the victim's own state made writable by others. Both are refused."""
    (shared_dir / "steps.py").write_text(textwrap.dedent(STEPS))
    workflow = write_workflow(shared_dir, WORKFLOW)
    env = _env(tmp_path / "h")
    planted = other_account.run(["mkdir", "-m", "777", str(shared_dir / ".hpcflow")])
    assert planted.returncode == 0, planted.stderr
    refused = run_cli(["run", str(workflow), "-q"], env, shared_dir)
    assert refused.returncode == 2, refused.output
    assert f"{shared_dir / '.hpcflow'} belongs to another account" in refused.stderr
    assert "Traceback" not in refused.output
    assert other_account.run(["rmdir", str(shared_dir / ".hpcflow")]).returncode == 0

    first = run_cli(["run", str(workflow), "-q"], env, shared_dir)
    assert first.returncode == 0, first.output
    memo = shared_dir / ".hpcflow" / "memo.sqlite"
    memo.chmod(0o666)
    again = run_cli(["run", str(workflow), "-q"], env, shared_dir)
    assert again.returncode == 2, again.output
    assert f"{memo} is writable by other accounts (mode 0666)" in again.stderr
    assert "chmod go-w" in again.stderr and "Traceback" not in again.output


# Units: the one place that makes private folders and files, under hostile umasks.


@pytest.fixture(params=[0o000, 0o002], ids=["umask-000", "umask-002"])
def umask(request: pytest.FixtureRequest):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def test_private_folders_and_files_ignore_the_umask(tmp_path: Path, umask: int) -> None:
    private_dir(tmp_path / "a" / "b" / "c", top=tmp_path / "a")
    write_text_atomic(tmp_path / "a" / "new" / "file.json", "{}")
    private_file(tmp_path / "a" / "driver.log")
    connect_writer(tmp_path / "a" / "state.sqlite").close()
    made = _modes(tmp_path / "a")
    assert {p: f"{m:04o}" for p, m in made.items() if m & 0o077} == {}
    assert len(made) == 7
    # What the user asks to share (a workflow file) keeps its mode.
    write_text_atomic(tmp_path / "shared.yaml", "x", mode=0o644)
    assert stat.S_IMODE((tmp_path / "shared.yaml").stat().st_mode) == 0o644


def test_state_an_older_hpcflow_left_readable_is_made_private(tmp_path: Path) -> None:
    old = tmp_path / ".hpcflow"
    old.mkdir(mode=0o755)
    old.chmod(0o755)
    (old / "memo.sqlite").write_bytes(b"")
    (old / "memo.sqlite").chmod(0o644)
    private_dir(old)
    private_file(old / "memo.sqlite")
    assert stat.S_IMODE(old.stat().st_mode) == 0o700
    assert stat.S_IMODE((old / "memo.sqlite").stat().st_mode) == 0o600
    old.chmod(0o775)
    with pytest.raises(StateNotPrivate, match="writable by other accounts"):
        private_dir(old)


def test_a_value_key_others_can_read_is_refused(tmp_path: Path) -> None:
    from hpcflow.store.values import key_from

    key = tmp_path / "value.key"
    key.write_text("ab" * 32)
    key.chmod(0o644)
    with pytest.raises(StateNotPrivate, match="readable by other accounts"):
        key_from(str(key))
    key.chmod(0o600)
    assert key_from(str(key)) == bytes.fromhex("ab" * 32)
