"""`hpcflow run --dry-run` prints the plan's cost in core-hours and GPU-hours."""

from __future__ import annotations

from tests.conftest import write_workflow

WF = """
name: costly
tasks:
  - name: cpu
    foreach: {i: {range: [0, 4]}}
    resources: {cpus: 2, walltime: 30m}
    command: echo {i}
  - name: gpu
    resources: {gpus: 1, walltime: 2h}
    command: echo gpu
  - name: unknown
    command: echo later
"""


def test_cost_of_tasks_and_of_the_pilot_allocation(tmp_path, hpcflow):
    wf = write_workflow(tmp_path, WF)
    local = hpcflow("run", str(wf), "--dry-run", cwd=tmp_path)
    assert local.returncode == 0, local.output
    # 4 × 2 cpus × 0.5 h + 1 cpu × 2 h = 6 core-hours; 1 GPU × 2 h.
    assert "cost of the tasks: 6.00 core-hours, 2.00 GPU-hours" in local.stdout
    assert "1 task(s) declare no walltime" in local.stdout
    assert "allocation" not in local.stdout

    pilot = hpcflow(
        "run", str(wf), "--dry-run", "--profile", "slurm-test-gpu", "--walltime", "3h",
        "--nodes", "2", cwd=tmp_path,
    )  # fmt: skip
    assert pilot.returncode == 0, pilot.output
    line = next(x for x in pilot.stdout.splitlines() if x.startswith("pilot allocation"))
    # 2 nodes × 2 cores and 2 GPUs each, for at most 3 h.
    assert line.startswith("pilot allocation: 2 node(s), 4 cores, 4 GPUs: at most 12.00 core-hours")
    assert "12.00 GPU-hours" in line and "3:00:00" in line

    jobs = hpcflow(
        "run", str(wf), "--dry-run", "--profile", "slurm-test", "--mode", "jobs", cwd=tmp_path
    )
    assert jobs.returncode == 0, jobs.output
    assert "jobs mode: 6 task job(s), at most 6.00 core-hours and 2.00 GPU-hours" in jobs.stdout
    assert "(1 without a walltime)" in jobs.stdout
