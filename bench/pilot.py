"""Pilot mode on the local test SLURM: N tiny tasks in one allocation.

Reports the number of sbatch and status calls, tasks/s and the time from sbatch to the first
task starting, and writes them into bench/RESULTS.md (its own section, kept when bench/run.py
rewrites the file).

    .venv/bin/python bench/pilot.py              # 10,000 tasks (W7)
    .venv/bin/python bench/pilot.py --n 1000,10000
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

from sections import markers, write_section  # noqa: E402  (bench/)

from hpcflow.backends._commands import CommandRunner  # noqa: E402
from hpcflow.backends.slurm.backend import SlurmBackend  # noqa: E402
from hpcflow.engine.prepare import RunOptions, prepare  # noqa: E402
from hpcflow.modes.pilot import run_pilot  # noqa: E402
from hpcflow.modes.pilot_stats import pilot_timings  # noqa: E402
from hpcflow.settings import resolve_profile  # noqa: E402
from tests.slurm_cluster import start_cluster  # noqa: E402

START, END = markers("pilot")


def measure(n: int, cluster, workdir: Path) -> dict[str, object]:
    wf = workdir / f"w{n}" / "workflow.yaml"
    wf.parent.mkdir(parents=True)
    wf.write_text(
        f"name: pilot{n}\ntasks:\n  - name: t\n    foreach: {{i: {{range: [0, {n}]}}}}\n"
        '    command: echo {i} > {outputs}\n    outputs: ["out/{i}.txt"]\n'
    )
    runner = CommandRunner(env=cluster.extra_env)
    profile = resolve_profile("slurm-test", environ={}).profile
    options = RunOptions()
    t0 = time.monotonic()
    summary = run_pilot(prepare(wf, options), options, profile, SlurmBackend(runner))
    wall = time.monotonic() - t0
    done = len(list((wf.parent / "out").iterdir()))
    timings = pilot_timings(summary.paths.state_db)
    return {
        "tasks": n,
        "ok": summary.ok and done == n,
        "wall_s": round(wall, 2),
        "tasks_per_s": round(n / wall, 1),
        "sbatch_calls": runner.calls["sbatch"],
        "squeue_calls": runner.calls["squeue"],
        "sacct_calls": runner.calls["sacct"],
        "poll_interval_s": profile.poll_interval,
        "submit_to_first_task_s": round(timings.submit_to_first_task or -1, 2),
    }


def section(rows: list[dict[str, object]]) -> str:
    lines = [
        START,
        "## Pilot mode on the local test SLURM (bench/pilot.py)",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, profile slurm-test (1 node, "
        "2 CPUs, poll interval 0.5 s backing off to 2 s); W7 of the benchmark suite: "
        "`bench/run.py` runs it last. Reproduce alone: `.venv/bin/python bench/pilot.py "
        "--n N[,N...]` (default 10000). `sbatch → first task` is the time from submitting "
        "the allocation to the first task starting; squeue/sacct are the status calls.",
        "",
        "| tasks | ok | wall s | tasks/s | sbatch calls | squeue calls | sacct calls | "
        "sbatch → first task s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['tasks']} | {r['ok']} | {r['wall_s']} | {r['tasks_per_s']} | "
            f"{r['sbatch_calls']} | {r['squeue_calls']} | {r['sacct_calls']} | "
            f"{r['submit_to_first_task_s']} |"
        )
    lines += ["", END, ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", default="10000", help="task counts, comma-separated (default 10000)")
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"))
    args = ap.parse_args()
    rows = []
    cluster = start_cluster()
    try:
        # The nodes see the cluster's shared volume (GlusterFS), not this machine's /tmp.
        tmp = Path(tempfile.mkdtemp(prefix="hpcflow-pilot-bench-", dir=cluster.shared))
        os.environ["HPCFLOW_HOME"] = str(tmp / "home")
        for n in (int(x) for x in args.n.split(",")):
            row = measure(n, cluster, tmp)
            print(json.dumps(row))
            rows.append(row)
    finally:
        cluster.stop()
    write_section(Path(args.out), section(rows), "pilot")
    print(f"wrote {args.out}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
