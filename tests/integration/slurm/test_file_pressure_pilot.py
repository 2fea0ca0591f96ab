"""Per-worker task logs and scratch folders in a pilot allocation of two nodes on the
test cluster's GlusterFS volume: each worker rank appends to a file of its own, and
`hpcflow logs` still shows exactly one task's output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import write_workflow
from tests.integration.slurm.conftest import run_logs

pytestmark = pytest.mark.slurm

WORKFLOW = """
name: pressure
tasks:
  - name: chat
    foreach: {i: {range: [0, 60]}}
    command: echo "line {i} on $SLURMD_NODENAME"; echo "err {i}" >&2
  - name: local
    foreach: {i: {range: [0, 6]}}
    scratch: true
    inputs: [data.txt]
    command: |
      cat {inputs} > temp.txt; echo "{i} $SLURMD_NODENAME $PWD" >> temp.txt
      mkdir -p out; mv temp.txt {outputs}; echo "scratch {i}"
    outputs: ["out/{i}.txt"]
"""


def test_per_worker_logs_and_scratch_on_two_nodes(tmp_path, hpcflow_slurm, slurm_env):
    wf = write_workflow(tmp_path, WORKFLOW)
    (tmp_path / "data.txt").write_text("shared input\n")
    slurm_env["HPCFLOW_TASK_LOGS"] = "per-worker"
    result = hpcflow_slurm(
        "run", str(wf), "--profile", "slurm-test", "--nodes", "2", "-q", cwd=tmp_path
    )
    assert result.returncode == 0, result.output + run_logs(tmp_path)
    status = json.loads(hpcflow_slurm("status", "--json", cwd=tmp_path).stdout)
    run_dir = Path(status["run_dir"])
    files = sorted((run_dir / "logs").iterdir())
    assert files and all(f.name.endswith(".log") for f in files)
    assert not list(run_dir.glob("tasks/*/*.out"))  # no per-task log file
    nodes = set()
    for i in (0, 29, 59):
        out = hpcflow_slurm("logs", run_dir.name, f"chat[i={i}]", "--stream", "stdout",
                            cwd=tmp_path)  # fmt: skip
        assert out.returncode == 0, out.output
        (line,) = out.stdout.splitlines()
        assert line.startswith(f"line {i} on ")
        err = hpcflow_slurm("logs", run_dir.name, f"chat[i={i}]", "--stream", "stderr",
                            cwd=tmp_path)  # fmt: skip
        assert err.stdout == f"err {i}\n"
    everything = hpcflow_slurm("logs", run_dir.name, "chat", "--stream", "stdout", cwd=tmp_path)
    for i in range(60):
        (line,) = [x for x in everything.stdout.splitlines() if x.startswith(f"line {i} on ")]
        nodes.add(line.rsplit(" ", 1)[1])
    assert len(nodes) == 2, nodes  # both nodes' workers ran tasks and wrote their own files
    assert len(files) >= 2
    for i in range(6):
        text = (tmp_path / "out" / f"{i}.txt").read_text().splitlines()
        assert text[0] == "shared input"
        number, node, where = text[1].split()
        assert number == str(i) and not where.startswith(str(tmp_path))
        out = hpcflow_slurm("logs", run_dir.name, f"local[i={i}]", "--stream", "stdout",
                            cwd=tmp_path)  # fmt: skip
        assert out.stdout == f"scratch {i}\n"
    assert not list(tmp_path.glob("temp.txt"))
