"""bench/gpu/transfer.py, bench/gpu/task_values.py and bench/gpu/engine_values.py: skip
cleanly without a GPU; their harnesses work (--cpu: NumPy arrays in host memory, over tcp
and, with the UCX environment the tests build, ucx)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.integration.slurm.test_transports import _ucx_python

SCRIPT = REPO / "bench" / "gpu" / "transfer.py"
VALUES = REPO / "bench" / "gpu" / "task_values.py"
ENGINE = REPO / "bench" / "gpu" / "engine_values.py"


def _has_gpu() -> bool:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from transfer import gpu_library
    finally:
        sys.path.pop(0)
    return gpu_library()[0] is not None


@pytest.mark.parametrize("script", [SCRIPT, VALUES, ENGINE], ids=["transfer", "values", "engine"])
def test_skips_cleanly_without_a_gpu(script):
    if _has_gpu():
        pytest.skip("hardware: this machine has a CUDA GPU, so the no-GPU path cannot be shown")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "check skipped: no usable CUDA GPU" in proc.stdout.splitlines()[0]
    assert "Traceback" not in proc.stderr


def _cpu_check(script: Path, mib: int, tries: int, *extra: str) -> dict[str, dict]:
    """Run ``script --cpu`` over tcp (and ucx where the UCX environment is): its results
    by transport, every transport present."""
    python = _ucx_python()
    transports = "ucx,tcp" if python else "tcp"
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "results.json"
        proc = subprocess.run(
            [str(python or sys.executable), str(script), "--cpu", "--size-mib", str(mib),
             "--repeat", str(tries), "--transports", transports, "--json", str(out), *extra],
            capture_output=True, text=True, timeout=240,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
        results = {r["transport"]: r for r in json.loads(out.read_text())}
    assert set(results) == set(transports.split(","))
    return results


def test_harness_moves_a_buffer_between_two_workers():
    for result in _cpu_check(SCRIPT, 64, 2).values():
        assert result["bytes"] == 64 * 2**20
        assert result["best_gib_per_s"] > 0
        assert len(set(result["workers"])) == 2


def test_values_harness_hands_a_value_from_task_to_task_between_two_workers(tmp_path):
    report = tmp_path / "RESULTS.md"
    for result in _cpu_check(VALUES, 32, 1, "--results", str(report)).values():
        assert result["bytes"] == 32 * 2**20 and result["received_on"] == "cpu"
        assert result["best_gib_per_s"] > 0 and result["raw_best_gib_per_s"] > 0
        assert len(set(result["workers"])) == 2
    assert "<!-- section:gpu-values -->" in report.read_text()


def test_engine_harness_runs_a_workflow_whose_value_travels_between_two_workers(tmp_path):
    """Through hpcflow's driver: the consumer ran on the other worker (its pool's), every
    byte of the value was counted as moved, and the taking worker logged the transfer."""
    report = tmp_path / "RESULTS.md"
    for result in _cpu_check(ENGINE, 32, 2, "--results", str(report)).values():
        assert result["bytes"] == 32 * 2**20 and result["received_on"] == "cpu"
        assert result["moved"] >= result["bytes"]
        assert len(result["run_seconds"]) == 2 and result["transfer_gib_per_s"] > 0
        assert len(set(result["workers"])) == 2
    text = report.read_text()
    assert "<!-- section:gpu-engine -->" in text and "| tcp | numpy |" in text
