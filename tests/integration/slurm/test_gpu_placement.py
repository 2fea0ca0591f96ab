"""GPU workers of a multi-node pilot land where the profile says, whatever SLURM's layout.

Real pilot runs of the ``slurm-test-gpu`` profile on the local test cluster (2 fake GPUs
per node, ``CUDA_VISIBLE_DEVICES`` set by SLURM's gres). From the run's ``workers.json``,
per node: as many workers as the profile asks for, their first devices distinct and
covering the node's GPUs; the scheduler on the allocation's first node (where the batch
script runs). A workflow of GPU tasks records, per task, its node, its devices and when it
ran, and takes a claim (``mkdir``) on its first device while it runs: no two tasks that
ran at the same time may have shared a node's device.

Nodes are named as SLURM names them (``SLURMD_NODENAME``, the ``@node`` of a worker's
name), so this holds whether the logical nodes share one host or each is its own host.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict

import pytest

from tests.conftest import write_workflow

pytestmark = pytest.mark.slurm

GPUS_PER_NODE = 2  # the test cluster's fake GPUs per node

#: One task: its node and devices, a claim on its first device for as long as it runs.
RECORD = r"""
node="${SLURMD_NODENAME:-$(hostname -s)}"
first="${CUDA_VISIBLE_DEVICES%%,*}"
start=$(date +%s.%N)
if mkdir "claims/$node-$first" 2>/dev/null; then
    sleep "$2"
    rmdir "claims/$node-$first"
    held=1
else
    sleep "$2"
    held=0
fi
echo "$node $CUDA_VISIBLE_DEVICES $start $(date +%s.%N) $held" > "$1"
"""

WF = """
name: gpu-placement
tasks:
  - name: g
    foreach: {{i: {{range: [0, {tasks}]}}}}
    resources: {{gpus: {gpus}}}
    command: bash record.sh {{outputs}} {seconds}
    outputs: ["out/{{i}}.txt"]
"""


def _natural(name: str) -> tuple:
    """``n10`` after ``n9``: SLURM's hostlist order."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def _run(tmp_path, hpcflow_slurm, nodes: int, *, gpus: int = 1, seconds: float = 1.5):
    tasks = 2 * nodes * GPUS_PER_NODE // gpus
    (tmp_path / "record.sh").write_text(RECORD)
    (tmp_path / "claims").mkdir()
    wf = write_workflow(tmp_path, WF.format(tasks=tasks, gpus=gpus, seconds=seconds))
    result = hpcflow_slurm(
        "run", str(wf), "--profile", "slurm-test-gpu", "--nodes", str(nodes), "-q", timeout=240
    )
    logs = "\n".join(p.read_text()[-4000:] for p in tmp_path.glob(".hpcflow/runs/*/allocations/*"))
    assert result.returncode == 0, result.output + logs
    (run_dir,) = (tmp_path / ".hpcflow" / "runs").iterdir()
    workers = json.loads((run_dir / "workers.json").read_text())["workers"]
    scheduler = json.loads((run_dir / "scheduler.json").read_text())
    records = []
    for path in sorted((tmp_path / "out").iterdir()):
        node, devices, start, end, held = path.read_text().split()
        records.append((node, devices.split(","), float(start), float(end), held == "1"))
    assert len(records) == tasks
    return workers, scheduler, records


def _by_node(workers: list[dict]) -> dict[str, list[dict]]:
    nodes: dict[str, list[dict]] = defaultdict(list)
    for worker in workers:
        nodes[worker["name"].rsplit("@", 1)[1]].append(worker)
    return dict(nodes)


def _check_workers(workers, scheduler, nodes: int, per_node: int, gpus_per_worker: int):
    placed = _by_node(workers)
    assert len(placed) == nodes, sorted(w["name"] for w in workers)
    for node, here in placed.items():
        names = sorted(w["name"] for w in here)
        assert len(here) == per_node, (node, names)
        devices = [w["cuda_visible_devices"].split(",") for w in here]
        node_gpus = {d for seen in devices for d in seen}
        assert len(node_gpus) == GPUS_PER_NODE, (node, devices)
        # Each worker's own devices come first; no two workers of a node share one.
        owned = [tuple(seen[:gpus_per_worker]) for seen in devices]
        flat = [d for own in owned for d in own]
        assert len(flat) == len(set(flat)), (node, names, devices)
        assert set(flat) == node_gpus, (node, names, devices)
        assert all(w["resources"].get("GPU") == gpus_per_worker for w in here), here
    # The scheduler runs on the allocation's first node, the one with the batch script.
    assert scheduler["node"] == min(placed, key=_natural), (scheduler, sorted(placed))


def _check_tasks(records, nodes: int, concurrent_per_node: int):
    """``concurrent_per_node``: the GPU tasks a node runs at once (its GPU workers)."""
    # No two tasks that overlapped in time had the same first device on the same node.
    assert all(held for *_, held in records), [r for r in records if not r[-1]]
    by_device = defaultdict(list)
    for node, devices, start, end, _ in records:
        by_device[(node, devices[0])].append((start, end))
    for key, spans in by_device.items():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert start >= end, (key, spans)
    # Every GPU of every node was used, and tasks did run side by side on a node.
    assert len({node for node, *_ in records}) == nodes
    assert len(by_device) == nodes * concurrent_per_node, sorted(by_device)
    most = 0
    for node in {r[0] for r in records}:
        here = [(s, e) for n, _, s, e, _ in records if n == node]
        for start, _ in here:
            most = max(most, sum(1 for s, e in here if s <= start < e))
    assert most == concurrent_per_node, records


@pytest.mark.parametrize("nodes", [2, 3])
def test_one_gpu_worker_per_gpu_on_every_node(tmp_path, hpcflow_slurm, nodes):
    workers, scheduler, records = _run(tmp_path, hpcflow_slurm, nodes)
    _check_workers(workers, scheduler, nodes, per_node=GPUS_PER_NODE, gpus_per_worker=1)
    _check_tasks(records, nodes, concurrent_per_node=GPUS_PER_NODE)


def test_one_worker_with_both_gpus_per_node(tmp_path, hpcflow_slurm, slurm_env):
    """``workers_per_node: 1`` on 2-GPU nodes: one worker per node, owning both GPUs; its
    tasks (``gpus: 2``) run one at a time there."""
    slurm_env["HPCFLOW_WORKERS_PER_NODE"] = "1"
    workers, scheduler, records = _run(tmp_path, hpcflow_slurm, 2, gpus=2, seconds=1.0)
    _check_workers(workers, scheduler, 2, per_node=1, gpus_per_worker=GPUS_PER_NODE)
    _check_tasks(records, 2, concurrent_per_node=1)
    assert all(sorted(devices) == ["0", "1"] for _, devices, *_ in records), records
