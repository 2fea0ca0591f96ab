"""Fault 10: load. A 20,000-task pilot run and 5 more runs, all started at once against
one test cluster (4 nodes × 2 CPUs: four allocations run, two wait in the queue).

Every run completes with every output present, each in ONE allocation (one sbatch), and
the controller is not flooded: each run asks squeue at most once per poll interval (its
poller batches every allocation it follows into one call), however many tasks it has,
and the controller's own RPC counters (sdiag) agree with what the clients counted.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, write_workflow

#: exclusive: it loads both cores for minutes; the other tests would starve beside it.
pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.exclusive]

BIG = 20_000
SMALL = 200
RUNS = 5


def sweep(name: str, n: int, python: bool = False) -> str:
    """N tiny tasks that each write out/I.txt: shell commands, or (the big run, so that
    2 cores finish 20,000 of them in CI time) a Python function called in the worker."""
    run = "python: tiny:write" if python else "command: echo {i} > {outputs}"
    return f"""
name: {name}
tasks:
  - name: t
    foreach: {{i: {{range: [0, {n}]}}}}
    {run}
    outputs: ["out/{{i}}.txt"]
"""


TINY = """
from pathlib import Path


def write(i):
    Path(f"out/{i}.txt").write_text(f"{i}\\n")
"""


def rpc_counts(cluster) -> dict[str, int]:
    """slurmctld's RPC counters by message type (``sdiag``)."""
    out = cluster.run(["sdiag"], timeout=30).stdout
    counts = {}
    for match in re.finditer(r"^\s*(REQUEST_\w+)\s*\(\s*\d+\)\s*count:(\d+)", out, re.M):
        counts[match.group(1)] = int(match.group(2))
    return counts


def test_twenty_thousand_tasks_and_five_runs_at_once(tmp_path, env, private_cluster):
    cluster = private_cluster(nodes=4, cpus=2, gpus=0)
    cluster.run(["sdiag", "--reset"], timeout=30)
    runs = {"big": BIG, **{f"r{k}": SMALL for k in range(1, RUNS + 1)}}
    procs = {}
    started = time.monotonic()
    for name, n in runs.items():
        workdir = tmp_path / name
        wf = write_workflow(workdir, sweep(name, n, python=name == "big"))
        (workdir / "out").mkdir()
        (workdir / "tiny.py").write_text(TINY)
        run_env = {
            **env,
            **cluster.extra_env,
            "HPCFLOW_HOME": str(workdir / "home"),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
        }
        procs[name] = subprocess.Popen(
            [sys.executable, "-m", "tests.fault.load_run", str(wf), str(workdir / "report.json")],
            cwd=workdir, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
    outputs = {}
    # A guard against a hang, not a speed target (bench/ measures speed): on a loaded
    # 2-core machine the big run took five minutes.
    deadline = time.monotonic() + 900
    try:
        for name, proc in procs.items():
            outputs[name] = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))[0]
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    elapsed = time.monotonic() - started
    rpcs = rpc_counts(cluster)

    reports = {}
    for name, n in runs.items():
        assert procs[name].returncode == 0, (name, outputs[name][-3000:])
        report = json.loads((tmp_path / name / "report.json").read_text())
        reports[name] = report
        assert report["totals"] == {"succeeded": n}, (name, report)
        # Nothing lost: every output is there, with its own content.
        out = tmp_path / name / "out"
        assert len(list(out.iterdir())) == n, name
        assert (out / f"{n - 1}.txt").read_text() == f"{n - 1}\n"
        calls = report["calls"]
        assert calls.get("sbatch") == 1, (name, calls)  # one allocation, no resubmission
        # At most one status query per poll interval (plus the first), never per task.
        bound = report["wall_seconds"] / report["poll_interval"] + 2
        assert calls.get("squeue", 0) <= bound, (name, calls, report["wall_seconds"])
        assert calls.get("sacct", 0) <= 1, (name, calls)  # asked once: accounting is off
        assert calls.get("scancel", 0) == 0, (name, calls)
    squeue_total = sum(r["calls"].get("squeue", 0) for r in reports.values())
    # The big run asked no more often than a small one would in the same time.
    assert reports["big"]["calls"]["squeue"] <= (
        reports["big"]["wall_seconds"] / reports["big"]["poll_interval"] + 2
    )
    # The controller saw what the clients counted: one submission per run and job-info
    # requests in proportion to the polls (plus the few sinfo/squeue of the cluster
    # helpers and srun's own lookups inside the allocations).
    assert rpcs.get("REQUEST_SUBMIT_BATCH_JOB", 0) == len(runs), rpcs
    job_info = rpcs.get("REQUEST_JOB_INFO", 0) + rpcs.get("REQUEST_JOB_INFO_SINGLE", 0)
    assert job_info <= squeue_total + 20, (rpcs, squeue_total)
    summary = {
        "wall_seconds": round(elapsed, 1),
        "squeue_total": squeue_total,
        "rpcs": {k: v for k, v in rpcs.items() if "JOB" in k},
        "runs": {k: (r["wall_seconds"], r["calls"]) for k, r in reports.items()},
    }
    print(json.dumps(summary))
    (Path(tmp_path) / "summary.json").write_text(json.dumps(summary, indent=2))
