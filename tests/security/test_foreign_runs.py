"""Commands that read a run (status, logs, report, cancel, result) refuse a run folder
that another account owns: what it says is not read, whatever its contents.

The other account makes a real run of its own in the shared folder (it runs hpcflow as
itself), so the folder and its state are sound: only the owner differs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.security.conftest import Account

WORKFLOW = """
name: theirs
tasks:
  - name: hello
    command: echo hello from another account > out.txt
    outputs: [out.txt]
"""


@pytest.fixture
def foreign_run(other_account: Account, shared_dir: Path) -> Path:
    """A finished run folder that the other account made, in the shared folder."""
    folder = shared_dir / "theirs"
    made = other_account.run(["mkdir", str(folder)])
    assert made.returncode == 0, made.stderr
    (folder / "workflow.yaml").write_text(WORKFLOW)
    os.chown(folder / "workflow.yaml", other_account.uid, other_account.gid)
    env = other_account.env(HPCFLOW_HOME=str(other_account.home / "hpcflow"))
    ran = other_account.run(
        [sys.executable, "-m", "hpcflow.cli.main", "run", "workflow.yaml", "-q"],
        cwd=folder, env=env, timeout=180,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (run_dir,) = (folder / ".hpcflow" / "runs").iterdir()
    assert run_dir.stat().st_uid == other_account.uid
    return run_dir


@pytest.mark.parametrize("command", ["status", "logs", "report", "cancel"])
def test_a_run_another_account_made_is_refused(
    foreign_run: Path, env: dict[str, str], tmp_path: Path, command: str
) -> None:
    args = [command, str(foreign_run)]
    if command == "report":
        args += ["-o", str(tmp_path / "report.html")]
    result = run_cli(args, env, cwd=tmp_path, timeout=120)
    assert result.returncode != 0, result.output
    assert "belongs to another account" in result.stderr, result.output
    assert "Traceback" not in result.stderr, result.stderr
    assert "hello" not in result.stdout
    assert not (tmp_path / "report.html").exists()
