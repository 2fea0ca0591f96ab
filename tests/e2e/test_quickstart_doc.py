"""Every command docs/quickstart.md shows runs, in order, and succeeds."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

DOC = REPO / "docs" / "quickstart.md"


def commands() -> list[str]:
    text = DOC.read_text()
    found = []
    for block in re.findall(r"```console\n(.*?)```", text, flags=re.S):
        found += [line[2:] for line in block.splitlines() if line.startswith("$ ")]
    return found


def test_every_quickstart_command_runs(tmp_path, env):
    shown = commands()
    assert len(shown) >= 10 and all(c.startswith("hpcflow ") for c in shown), shown
    shutil.copytree(
        REPO / "workflows",
        tmp_path / "workflows",
        ignore=shutil.ignore_patterns(".hpcflow", "results", "__pycache__"),
    )
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "hpcflow").exists(), "the hpcflow console script is installed"
    shell_env = {**env, "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}"}
    for command in shown:
        proc = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, env=shell_env, capture_output=True,
            text=True, timeout=180,
        )  # fmt: skip
        assert proc.returncode == 0, f"$ {command}\n{proc.stdout}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr, f"$ {command}\n{proc.stderr}"
    assert (tmp_path / "sweep-report.html").stat().st_size > 1000
    assert (tmp_path / "my-project" / "site.yaml").exists()
