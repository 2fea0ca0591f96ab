"""In CI a skip fails the run unless it names hardware (tests/strict_skips.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent

SKIPS = """
import pytest

def test_missing_tool():
    pytest.skip("needs frobnicator")

def test_no_gpu():
    pytest.skip("hardware: needs a CUDA GPU")

@pytest.mark.skipif(True, reason="no such package")
def test_marked():
    pass
"""

MODULE_SKIP = """
import pytest

pytest.importorskip("hpcflow_no_such_package")

def test_never_collected():
    pass
"""


def _pytest(folder: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """pytest on ``folder`` with only the strict-skips plugin (not this suite's conftest)."""
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", "HPCFLOW_NO_SKIPS")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:xdist", "-p", "no:cacheprovider",
         "-p", "tests.strict_skips", "--rootdir", str(folder), "-c", os.devnull, str(folder)],
        cwd=folder, capture_output=True, text=True, timeout=120,
        env={**clean, "PYTHONPATH": str(REPO), **env},
    )  # fmt: skip


def _write(tmp_path: Path) -> Path:
    (tmp_path / "test_skips.py").write_text(SKIPS)
    (tmp_path / "test_module_skip.py").write_text(MODULE_SKIP)
    return tmp_path


def test_outside_ci_a_skip_stays_a_skip(tmp_path: Path) -> None:
    proc = _pytest(_write(tmp_path))
    assert proc.returncode == 0, proc.stdout
    assert "4 skipped" in proc.stdout


def test_in_ci_a_skip_fails_the_run_with_its_reason(tmp_path: Path) -> None:
    for env in ({"CI": "true"}, {"HPCFLOW_NO_SKIPS": "1"}):
        (tmp_path / "test_skips.py").write_text(SKIPS)
        out = _pytest(tmp_path, **env)
        assert out.returncode == 1, out.stdout
        assert "FAILED test_skips.py::test_missing_tool" in out.stdout
        assert "needs frobnicator" in out.stdout
        assert "test_marked" in out.stdout and "no such package" in out.stdout
        # Hardware no CI machine can have stays a skip.
        assert "SKIPPED" in out.stdout and "hardware: needs a CUDA GPU" in out.stdout


def test_in_ci_a_skipped_module_fails_the_run(tmp_path: Path) -> None:
    (tmp_path / "test_module_skip.py").write_text(MODULE_SKIP)
    out = _pytest(tmp_path, CI="true")
    assert out.returncode != 0, out.stdout
    assert "ERROR test_module_skip.py" in out.stdout
    assert "hpcflow_no_such_package" in out.stdout
