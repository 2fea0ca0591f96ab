"""The benchmark harness's bookkeeping (bench/run.py): bounds, verdicts, kept sections.

No timing here: these check that a timed-out run is reported as a bound, that a bound
only settles a target when it can, and that rewriting RESULTS.md keeps the sections other
scripts own. The harness itself (every tool, real runs) is `bench/run.py --quick`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def harness():
    sys.path.insert(0, str(BENCH))
    try:
        import run  # bench/run.py

        yield run
    finally:
        sys.path.remove(str(BENCH))


def test_a_lower_bound_divided_by_an_exact_value_stays_a_lower_bound(harness) -> None:
    ratio = harness.Bound(300.0, ">") / harness.Bound(6.0)
    assert ratio.kind == ">"
    assert ratio.value == pytest.approx(50.0)
    assert (harness.Bound(6.0) / harness.Bound(300.0, ">")).kind == "<"


def test_a_bound_settles_a_target_only_when_it_can(harness) -> None:
    verdict = harness._verdict
    assert verdict(harness.Bound(25.0, ">"), 20.0, ">=") == "PASS"
    assert verdict(harness.Bound(10.0, ">"), 20.0, ">=") == "NOT DECIDED"
    assert verdict(harness.Bound(10.0), 20.0, ">=") == "FAIL"
    assert verdict(harness.Bound(1.4), 1.5, "<=") == "PASS"
    assert verdict(harness.Bound(1.6, ">"), 1.5, "<=") == "FAIL"
    assert verdict(harness.Bound(None), 1.5, "<=") == "NOT DECIDED"


def test_rewriting_the_report_keeps_other_scripts_sections(harness, tmp_path: Path) -> None:
    report = tmp_path / "RESULTS.md"
    report.write_text(
        "# old report\n\nold tables\n"
        "<!-- section:w1-reps -->\nstale\n<!-- /section:w1-reps -->\n"
        "<!-- section:pilot -->\npilot rows\n<!-- /section:pilot -->\n"
        "<!-- section:gpu -->\ngpu rows\n<!-- /section:gpu -->\n"
        "<!-- section:snakemake-plugin -->\nplugin rows\n<!-- /section:snakemake-plugin -->\n"
    )
    kept = harness._kept_sections(str(report))
    assert "pilot rows" in kept and "gpu rows" in kept and "plugin rows" in kept
    assert "stale" not in kept and "old tables" not in kept


def test_a_w1_peer_gets_a_cap_that_can_decide_its_target(harness) -> None:
    w = harness.Workload("W1", 5000)
    recs = [{"label": w.label, "tool": "hpcflow", "rep": 0, "ok": True, "wall_s": 6.0}]
    cap = harness.peer_cap(w, "snakemake", recs, 0, 240.0)
    assert cap == pytest.approx(harness.CAP_MARGIN * 20.0 * 6.0)
    assert harness.peer_cap(w, "snakemake", [], 0, 240.0) == 240.0
    assert harness.peer_cap(harness.Workload("W6", 10**6), "snakemake", [], 0, 240.0) == 60.0


def test_a_measured_child_reports_its_own_peak_not_the_bench_s(harness, tmp_path) -> None:
    """Linux carries a parent's peak RSS into a forked child's ru_maxrss; the launcher
    keeps the bench's own size (here 300 MB) out of what a measured command reports."""
    import os

    import measure  # bench/measure.py, importable once the harness is

    measure.run_measured(["true"], str(tmp_path), dict(os.environ), 30, str(tmp_path))
    ballast = bytearray(300 * 2**20)
    ballast[::4096] = b"x" * len(ballast[::4096])  # touched: resident
    m = measure.run_measured(
        [sys.executable, "-c", "pass"], str(tmp_path), dict(os.environ), 30, str(tmp_path)
    )
    assert m.rc == 0 and not m.timed_out
    assert m.root_maxrss_mb < 150, m.root_maxrss_mb
    del ballast


def test_the_work_directories_file_system_is_named(harness, tmp_path) -> None:
    """The report says where the tools' files went; the default is RAM only when it is."""
    assert harness.filesystem_of("/proc/self/status") == "proc"
    assert harness.filesystem_of(str(tmp_path)) not in ("", "?")
    root = harness.default_workdir_root()
    assert root is None or harness.filesystem_of(root) == "tmpfs"
