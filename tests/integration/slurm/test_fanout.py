"""Fan-out decided at run time against the real local SLURM, in each batch mode: the
chunks a task writes on a node are read when it ends, and their instances run in the
same run (pilot and elastic: the run's driver plans them; jobs: the submit host submits
their array); the run's allocations number them alike (instances.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import write_workflow
from tests.integration.slurm.conftest import queue_drains, run_logs
from tests.integration.slurm.test_elastic import SMALL

pytestmark = pytest.mark.slurm

WF = """
name: fanout
tasks:
  - name: split
    inputs: [input.txt]
    command: mkdir -p chunks && split -l 2 -d input.txt chunks/part_
    outputs: [chunks]
  - name: count
    foreach:
      from_files: {glob: "chunks/part_{n}", path: chunk, after: split}
    command: mkdir -p counts && echo "$(wc -l < {chunk}) $(hostname)" > {outputs}
    outputs: ["counts/{n}.txt"]
  - name: total
    needs: [count]
    command: cat counts/*.txt | awk '{s += $1} END {print s}' > {outputs}
    outputs: [total.txt]
"""

MODES = {
    "pilot": [],
    "jobs": ["--mode", "jobs"],
    "elastic": ["--mode", "elastic", "--transport", "tcp"],
}


@pytest.mark.parametrize("mode", list(MODES))
def test_a_fan_out_runs_in_each_batch_mode(tmp_path, slurm_env, hpcflow_slurm, slurm_cluster, mode):
    if mode == "elastic":
        slurm_env.update(SMALL)  # small worker jobs for the 2-core machine
    (tmp_path / "input.txt").write_text("".join(f"line {i}\n" for i in range(7)))
    wf = write_workflow(tmp_path, WF)
    result = hpcflow_slurm(
        "run", str(wf), "--profile", "slurm-test", "-q", *MODES[mode], timeout=240
    )
    assert result.returncode == 0, result.output + run_logs(tmp_path)
    assert (tmp_path / "total.txt").read_text() == "7\n"
    status = json.loads(hpcflow_slurm("status", "--json", cwd=tmp_path).stdout)
    assert status["counts"] == {
        "split": {"succeeded": 1},
        "count": {"succeeded": 4},
        "total": {"succeeded": 1},
    }
    assert status["waiting"] == []
    run_dir = Path(status["run_dir"])
    order = json.loads((run_dir / "instances.json").read_text())
    assert order == ["split", *(f"count[n=0{k},chunk=chunks/part_0{k}]" for k in range(4)), "total"]
    # The counts ran on the cluster's nodes, not here.
    hosts = {path.read_text().split()[1] for path in (tmp_path / "counts").glob("*.txt")}
    assert hosts and hosts <= set(slurm_cluster.node_names), hosts
    # Resume: split is up to date, so the fan-out is planned when the run starts.
    again = hpcflow_slurm(
        "run", str(wf), "--profile", "slurm-test", "-q", *MODES[mode], timeout=240
    )
    assert again.returncode == 0, again.output + run_logs(tmp_path)
    assert "0 ran, 6 up to date" in again.stdout
    assert queue_drains(slurm_cluster) == []


def test_the_reads_example_in_one_allocation_of_three_nodes(example, hpcflow_slurm, slurm_cluster):
    """workflows/reads (sample sheet, run-time fan-out, a sub-workflow included twice)
    on the test cluster, as in CI locally (tests/e2e/test_examples.py)."""
    from tests.e2e.test_examples import READS_SUMMARY

    wf = example("reads")
    result = hpcflow_slurm(
        "run", str(wf), "--profile", "slurm-test", "--nodes", "3", "-q", timeout=240
    )
    assert result.returncode == 0, result.output + run_logs(wf.parent)
    assert (wf.parent / "summary.tsv").read_text() == READS_SUMMARY
    status = json.loads(hpcflow_slurm("status", "--json", cwd=wf.parent).stdout)
    assert status["status"] == "succeeded"
    assert status["counts"]["gc"] == {"succeeded": 7}
    assert queue_drains(slurm_cluster) == []
