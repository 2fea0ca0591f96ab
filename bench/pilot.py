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

START, END = markers("pilot")


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


def section(rows: list[dict[str, object]]) -> str:
    lines = [
        START,
        "## Pilot mode on the local test SLURM (bench/pilot.py)",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, profile slurm-test (2 CPUs "
        "per node, poll interval 0.5 s backing off to 2 s); W7 of the benchmark suite: "
        "`bench/run.py` runs it last. Reproduce alone: `.venv/bin/python bench/pilot.py "
        "--n N[,N...]` (default 10000). `sbatch → first task` is the time from submitting "
        "the allocation to the first task starting; squeue/sacct are the status calls.",
        "`hyperqueue`: the same tasks in an allocation of the same shape on the same cluster, "
        "one HQ server and one HQ worker per node started inside it, the tasks submitted "
        "there as one HQ job (bench/pilot_hq.py; HQ's Python API, as the wheel has no `hq` "
        "command); its submit side polls squeue at the profile's 0.5 s and stops at the "
        "client's result file; its first task is the first output's mtime.",
        "",
        "| tool | nodes | tasks | ok | wall s | tasks/s | sbatch calls | squeue calls | "
        "sacct calls | sbatch → first task s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "wall_s" not in r:
            lines.append(
                f"| {r.get('tool', 'hpcflow')} | {r.get('nodes', 1)} | {r['tasks']} | "
                f"{r['ok']} | {r.get('error', '')} | | | | | |"
            )
            continue
        lines.append(
            f"| {r.get('tool', 'hpcflow')} | {r.get('nodes', 1)} | {r['tasks']} | {r['ok']} | "
            f"{r['wall_s']} | "
            f"{r['tasks_per_s']} | {r['sbatch_calls']} | {r['squeue_calls']} | "
            f"{r['sacct_calls']} | {r['submit_to_first_task_s']} |"
        )
    lines += ["", END, ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", default="10000", help="task counts, comma-separated (default 10000)")
    ap.add_argument(
        "--tools", default="hpcflow,hyperqueue", help="hpcflow, hyperqueue or both (default)"
    )
    ap.add_argument(
        "--nodes",
        type=int,
        default=None,
        help="nodes per allocation (default: the slurm-test profile's, 1); the test cluster "
        "gets at least 4",
    )
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"))
    args = ap.parse_args()
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    if set(tools) - {"hpcflow", "hyperqueue"}:
        ap.error("--tools takes hpcflow, hyperqueue or both")
    rows = []
    cluster = start_cluster(nodes=max(4, args.nodes or 1))
    try:
        # The nodes see the cluster's shared volume (GlusterFS), not this machine's /tmp.
        tmp = Path(tempfile.mkdtemp(prefix="hpcflow-pilot-bench-", dir=cluster.shared))
        os.environ["HPCFLOW_HOME"] = str(tmp / "home")
        for n in (int(x) for x in args.n.split(",")):
            for tool in tools:
                how = measure if tool == "hpcflow" else measure_hq
                row = how(n, cluster, tmp, args.nodes)
                print(json.dumps(row), flush=True)
                rows.append(row)
    finally:
        cluster.stop()
    write_section(Path(args.out), section(rows), "pilot")
    print(f"wrote {args.out}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
