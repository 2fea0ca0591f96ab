"""Pilot mode on the local test SLURM: N tiny tasks in one allocation.

Reports the number of sbatch and status calls, tasks/s and the time from sbatch to the first
task starting, and writes them into bench/RESULTS.md (its own section, kept when bench/run.py
rewrites the file). HyperQueue runs the same tasks in the same allocation shape on the same
cluster (bench/pilot_hq.py: one HQ server, one worker per node, started in the allocation).

    .venv/bin/python bench/pilot.py              # 10,000 tasks (W7), hpcflow and HyperQueue
    .venv/bin/python bench/pilot.py --n 1000,10000 --tools hpcflow
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

import pilot_hq  # noqa: E402  (bench/)
from sections import markers, write_section  # noqa: E402  (bench/)

from hpcflow.backends._commands import CommandRunner  # noqa: E402
from hpcflow.backends.slurm.backend import SlurmBackend  # noqa: E402
from hpcflow.engine.prepare import RunOptions, prepare  # noqa: E402
from hpcflow.modes.pilot import run_pilot  # noqa: E402
from hpcflow.modes.pilot_stats import pilot_timings  # noqa: E402
from hpcflow.settings import resolve_profile  # noqa: E402
from tests.slurm_cluster import start_cluster  # noqa: E402


def bench_profile(nodes: int | None = None):
    """The slurm-test profile, with ``nodes`` per allocation when given."""
    overrides = {"nodes": nodes} if nodes else None
    return resolve_profile("slurm-test", environ={}, overrides=overrides).profile


def measure(n: int, cluster, workdir: Path, nodes: int | None = None) -> dict[str, object]:
    wf = workdir / f"w{n}" / "workflow.yaml"
    wf.parent.mkdir(parents=True)
    wf.write_text(
        f"name: pilot{n}\ntasks:\n  - name: t\n    foreach: {{i: {{range: [0, {n}]}}}}\n"
        '    command: echo {i} > {outputs}\n    outputs: ["out/{i}.txt"]\n'
    )
    runner = CommandRunner(env=cluster.extra_env)
    profile = bench_profile(nodes)
    options = RunOptions()
    t0 = time.monotonic()
    summary = run_pilot(prepare(wf, options), options, profile, SlurmBackend(runner))
    wall = time.monotonic() - t0
    out = wf.parent / "out"
    done = len(list(out.iterdir())) if out.is_dir() else 0
    timings = pilot_timings(summary.paths.state_db)
    return {
        "tool": "hpcflow",
        "tasks": n,
        "nodes": profile.nodes,
        "ok": summary.ok and done == n,
        "wall_s": round(wall, 2),
        "tasks_per_s": round(n / wall, 1),
        "sbatch_calls": runner.calls["sbatch"],
        "squeue_calls": runner.calls["squeue"],
        "sacct_calls": runner.calls["sacct"],
        "poll_interval_s": profile.poll_interval,
        "submit_to_first_task_s": round(timings.submit_to_first_task or -1, 2),
        "submit_to_last_task_s": round((timings.last_task_ended or 0) - timings.submitted, 2)
        if timings.last_task_ended
        else -1,
        **central_cpu(timings, n),
    }


def central_cpu(timings, n: int) -> dict[str, object]:
    """The driver's and the scheduler's CPU seconds, and their sum per task in µs."""
    if timings.driver_cpu_s is None or timings.scheduler_cpu_s is None:
        return {}
    total = timings.driver_cpu_s + timings.scheduler_cpu_s
    return {
        "driver_cpu_s": timings.driver_cpu_s,
        "scheduler_cpu_s": timings.scheduler_cpu_s,
        "scheduler_cpu_us_per_task": round(1e6 * timings.scheduler_cpu_s / n, 1),
        "driver_cpu_us_per_task": round(1e6 * timings.driver_cpu_s / n, 1),
        "central_cpu_us_per_task": round(1e6 * total / n, 1),
    }


def measure_floor(n: int, cluster, workdir: Path, nodes: int | None = None) -> dict[str, object]:
    """The same ``n`` tasks by a pool of 2 threads each running ``bash -c`` on this host,
    writing to the same shared volume: the host's limit, without any batch system."""
    from concurrent.futures import ThreadPoolExecutor

    folder = workdir / f"floor{n}"
    (folder / "out").mkdir(parents=True)

    def one(i: int) -> int:
        return subprocess.run(["bash", "-c", pilot_hq.task_command(i)], cwd=folder).returncode

    t0 = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        codes = list(pool.map(one, range(n), chunksize=64))
    wall = time.monotonic() - t0
    done = pilot_hq.count_outputs(folder, n)
    return {
        "tool": "floor",
        "tasks": n,
        "nodes": 0,
        "ok": done == n and not any(codes),
        "wall_s": round(wall, 2),
        "tasks_per_s": round(n / wall, 1),
        "submit_to_last_task_s": round(wall, 2),
    }


def measure_hq(n: int, cluster, workdir: Path, nodes: int | None = None) -> dict[str, object]:
    """The same ``n`` tasks with HyperQueue in an allocation of the same shape."""
    if not pilot_hq.PEERS_PYTHON.exists():
        return {"tool": "hyperqueue", "tasks": n, "ok": False, "error": "run bash bench/setup.sh"}
    profile = bench_profile(nodes)
    row = pilot_hq.measure(
        n,
        CommandRunner(env=cluster.extra_env),
        workdir / f"hq{n}",
        nodes=profile.nodes or 1,
        cpus=profile.cpus_per_node or 1,
        partition=profile.partition or "debug",
        poll_s=profile.poll_interval,
    )
    return {"nodes": profile.nodes, **row}


def section(rows: list[dict[str, object]], name: str = "pilot") -> str:
    """Section ``name`` of RESULTS.md: ``pilot`` (W7), or ``pilot-scale`` (a node curve)."""
    start, end = markers(name)
    title = "Pilot mode on the local test SLURM (bench/pilot.py)"
    if name == "pilot-scale":
        title = "Pilot mode as nodes are added: 1 to 32 logical nodes (bench/pilot.py)"
    floors = {r["tasks"]: r for r in rows if r.get("tool") == "floor" and r.get("ok")}
    lines = [
        start,
        f"## {title}",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, profile slurm-test (2 CPUs "
        "per logical node, all nodes on this one 2-core host, poll interval 0.5 s backing "
        "off to 2 s); W7 of the benchmark suite: `bench/run.py` runs it last. Reproduce "
        "alone: `.venv/bin/python bench/pilot.py --n N[,N...] --nodes K[,K...]` (default "
        "10000 tasks, 1 node). The task: `echo i > out/i.txt` on the cluster's GlusterFS "
        "volume.",
        "",
        "- `sbatch → last task`: from submitting the allocation to the end of the last "
        "task (hpcflow: its attempt records; HyperQueue: the newest output's mtime), the "
        "same clock for both; tasks/s is N over it. `wall`: until the tool's submit side "
        "returned (hpcflow: `hpcflow run`'s pilot, from planning until the allocation has "
        "ended; HyperQueue: until its client's result file appeared).",
        "- CPU µs/task: CPU seconds of the run's central processes over N, start-up "
        "included. `scheduler`: hpcflow's Dask scheduler; HyperQueue's server (in a "
        "process of its own). `driver`: hpcflow's driver (plans nothing here: it submits "
        "the tasks, records every attempt in state.sqlite and the memo); HyperQueue's "
        "client (submits the tasks as one job and waits). `central`: both.",
        "- `floor`: the same N tasks from a pool of 2 threads running `bash -c` on this "
        "host, on the same volume, with no batch system: the physical limit of the one "
        "host every logical node runs on; `× floor` is sbatch → last task over it.",
        "- `hyperqueue`: one HQ server and one HQ worker per node started inside an "
        "allocation of the same shape (bench/pilot_hq.py; HQ's Python API, as the wheel "
        "has no `hq` command), the tasks submitted there as one HQ job.",
        "",
        "| tool | nodes | tasks | ok | sbatch → last task s | tasks/s | × floor | scheduler "
        "µs/task | driver µs/task | central µs/task | wall s | sbatch calls | squeue calls | "
        "sbatch → first task s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "wall_s" not in r:
            lines.append(
                f"| {r.get('tool', 'hpcflow')} | {r.get('nodes', 1)} | {r['tasks']} | "
                f"{r['ok']} | {r.get('error', '')} | | | | | | | | | |"
            )
            continue
        last = float(r.get("submit_to_last_task_s") or -1)
        rate = round(int(r["tasks"]) / last, 1) if last > 0 else ""
        floor = floors.get(r["tasks"])
        ratio = ""
        if floor is not None and last > 0 and r is not floor:
            ratio = f"{last / float(floor['submit_to_last_task_s']):.2f}"
        lines.append(
            f"| {r.get('tool', 'hpcflow')} | {r.get('nodes', 1) or '-'} | {r['tasks']} | "
            f"{r['ok']} | {last if last > 0 else ''} | {rate} | {ratio} | "
            f"{r.get('scheduler_cpu_us_per_task', '')} | {r.get('driver_cpu_us_per_task', '')} | "
            f"{r.get('central_cpu_us_per_task', '')} | {r['wall_s']} | "
            f"{r.get('sbatch_calls', '')} | {r.get('squeue_calls', '')} | "
            f"{r.get('submit_to_first_task_s', '')} |"
        )
    lines += ["", end, ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", default="10000", help="task counts, comma-separated (default 10000)")
    ap.add_argument(
        "--tools",
        default="hpcflow,hyperqueue",
        help="any of floor, hpcflow, hyperqueue, comma-separated (default hpcflow,hyperqueue)",
    )
    ap.add_argument(
        "--nodes",
        default=None,
        help="nodes per allocation, comma-separated for a scale curve (default: the "
        "slurm-test profile's, 1); the test cluster gets the largest, at least 4",
    )
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"))
    args = ap.parse_args()
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    if set(tools) - {"floor", "hpcflow", "hyperqueue"}:
        ap.error("--tools takes floor, hpcflow and hyperqueue")
    node_counts: list[int | None] = [None]
    if args.nodes:
        node_counts = [int(x) for x in args.nodes.split(",")]
    measures = {"floor": measure_floor, "hpcflow": measure, "hyperqueue": measure_hq}
    rows = []
    cluster = start_cluster(nodes=max(4, *(k or 1 for k in node_counts)))
    try:
        # The nodes see the cluster's shared volume (GlusterFS), not this machine's /tmp.
        tmp = Path(tempfile.mkdtemp(prefix="hpcflow-pilot-bench-", dir=cluster.shared))
        os.environ["HPCFLOW_HOME"] = str(tmp / "home")
        for n in (int(x) for x in args.n.split(",")):
            if "floor" in tools:
                row = measure_floor(n, cluster, tmp)
                print(json.dumps(row), flush=True)
                rows.append(row)
            for k in node_counts:
                for tool in tools:
                    if tool == "floor":
                        continue
                    where = tmp / f"k{k or 1}"
                    row = measures[tool](n, cluster, where, k)
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    finally:
        cluster.stop()
    # A curve over several node counts is a section of its own, beside W7's.
    name = "pilot-scale" if len(node_counts) > 1 else "pilot"
    write_section(Path(args.out), section(rows, name), name)
    print(f"wrote {args.out}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
