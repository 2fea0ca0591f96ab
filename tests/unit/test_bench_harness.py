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


def test_hyperqueue_is_a_peer_of_w1_to_w3_checked_like_the_others(harness, tmp_path) -> None:
    """HyperQueue (issue 22) runs in the same invocation as the other peers: W1 and W2 as
    shell tasks, W3 as Python functions, its child started with the peers venv's python;
    its W1 outputs pass or fail the same check as every tool's."""
    import argparse

    for key in ("W1", "W2", "W3"):
        assert "hyperqueue" in harness.tools_for(harness.Workload(key, 10), harness.TOOLS, False)
    setup = harness.Setup(
        argparse.Namespace(hpcflow=str(tmp_path / "hpcflow"), peers_venv=str(tmp_path / "p"))
    )
    w = harness.Workload("W1", 3)
    argv, env = setup.prepare("hyperqueue", w, str(tmp_path), 10.0)
    assert argv[0] == str(tmp_path / "p" / "bin" / "python")
    assert argv[1:] == [str(BENCH / "child_hq.py"), "W1", "3"]
    assert env is setup.env_peers
    for t in w.tasks():
        (tmp_path / t.output).write_text(t.content)
    ran = harness.Measurement(argv=argv, rc=0)
    assert harness.verify("hyperqueue", w, w.tasks(), str(tmp_path), ran, {}) == (3, "")
    (tmp_path / "out_1.txt").write_text("wrong\n")
    done, error = harness.verify("hyperqueue", w, w.tasks(), str(tmp_path), ran, {})
    assert done == 2 and error == "only 2/3 outputs correct"


def test_the_hq_child_sums_w3_results_from_each_tasks_stdout(harness, tmp_path) -> None:
    """HQ keeps no return value of a function task: inc prints it and the child adds up
    the stdout files HQ wrote, so a missing or wrong result fails the W3 check."""
    import child_hq  # bench/child_hq.py (imports hyperqueue only when run)
    from workloads import w3_expected_sum

    for x in range(5):
        (tmp_path / f"{x}.out").write_text(f"{child_hq.inc(x)}\n")
    assert child_hq.w3_sum(str(tmp_path), 5) == (w3_expected_sum(5), 5)
    (tmp_path / "3.out").unlink()
    assert child_hq.w3_sum(str(tmp_path), 5)[1] == 4
    assert child_hq.w3_sum(str(tmp_path), 5)[0] != w3_expected_sum(5)


def test_the_hq_child_gives_w2_edges_as_task_dependencies(harness) -> None:
    import child_hq

    class FakeJob:
        def __init__(self) -> None:
            self.made: list[tuple[list[str], list[int]]] = []

        def program(self, args, *, stdout, stderr, deps):
            assert stdout is None and stderr is None
            self.made.append((args, [self.made.index(d) for d in deps]))
            return self.made[-1]

    tasks = harness.Workload("W2", 2, width=3).tasks()
    job = FakeJob()
    child_hq.build_shell_job(job, tasks)
    assert [args for args, _ in job.made] == [["bash", "-c", t.cmd] for t in tasks]
    assert [tuple(deps) for _, deps in job.made] == [t.deps for t in tasks]


def test_the_hq_allocation_starts_a_process_per_node_and_one_client(harness, tmp_path) -> None:
    """W7 with HyperQueue: the batch script (a hostile folder name, quoted once) starts one
    HQ process per node through srun and the client beside it; it parses as bash."""
    import subprocess

    import pilot_hq  # bench/pilot_hq.py

    workdir = tmp_path / "a'; echo x"
    script = pilot_hq.render_script(workdir, 50, nodes=3, cpus=2, partition="debug")
    assert "#SBATCH --nodes=3" in script and "#SBATCH --cpus-per-task=2" in script
    assert not [ln for ln in script.splitlines() if ln.startswith("#SBATCH") and "a'" in ln]
    srun = [ln for ln in script.splitlines() if ln.startswith("srun ")]
    assert len(srun) == 1 and "--ntasks-per-node=1" in srun[0] and " node " in srun[0]
    assert " submit " in script and "hq-server" in script
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    (workdir / "out").mkdir(parents=True)
    for i in range(50):
        (workdir / "out" / f"{i}.txt").write_text(f"{i}\n" if i != 7 else "")
    assert pilot_hq.count_outputs(workdir, 50) == 49
    assert pilot_hq.task_command(7) == "echo 7 > out/7.txt"
