"""bench/gpu/transfer.py: skips cleanly without a GPU; its harness works (--cpu)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.integration.slurm.test_transports import _ucx_python

SCRIPT = REPO / "bench" / "gpu" / "transfer.py"


def _has_gpu() -> bool:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from transfer import gpu_library
    finally:
        sys.path.pop(0)
    return gpu_library()[0] is not None


def test_skips_cleanly_without_a_gpu():
    if _has_gpu():
        pytest.skip("this machine has a CUDA GPU: the skip path cannot be shown here")
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("gpu check skipped: no usable CUDA GPU")
    assert "Traceback" not in proc.stderr


def test_harness_moves_a_buffer_between_two_workers(tmp_path):
    python = _ucx_python()
    transports = "ucx,tcp" if python else "tcp"
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [str(python or sys.executable), str(SCRIPT), "--cpu", "--size-mib", "64",
         "--repeat", "2", "--transports", transports, "--json", str(out)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    import json

    results = {r["transport"]: r for r in json.loads(out.read_text())}
    assert set(results) == set(transports.split(","))
    for result in results.values():
        assert result["bytes"] == 64 * 2**20
        assert result["best_gib_per_s"] > 0
        assert len(set(result["workers"])) == 2
