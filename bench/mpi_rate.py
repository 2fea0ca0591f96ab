"""MPI launch rate in a pilot on the local test SLURM: how many small MPI tasks per
second one allocation starts, each as its own ``srun`` step inside the allocation (the
default), or on its worker's own node by ``mpirun`` (the profile's ``local_mpi_launch``),
against the same number of one-rank tasks (no step) as the ceiling of the pilot itself.

Each MPI task is ``ranks: 2`` of ``true`` on a 2-node allocation (2 CPUs each); the
rate is tasks / (last task's end - first task's start), from the run's own attempt
records. Writes the ``mpi-rate`` section of bench/RESULTS.md.

    .venv/bin/python bench/mpi_rate.py              # 100 MPI tasks
    .venv/bin/python bench/mpi_rate.py --n 50
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

SECTION = "mpi-rate"
START, END = markers(SECTION)

TASK = {
    "mpi": "    resources: {ranks: 2, nodes: 1}\n    argv: ['true']\n",
    "mpi-local": "    resources: {ranks: 2, nodes: 1}\n    argv: ['true']\n",
    "single": "    argv: ['true']\n",
}
#: Profile settings of each kind: ``mpi-local`` starts each task's ranks on its worker's
#: node with Open MPI's mpirun (no step); the others as the test profile does.
OVERRIDES: dict[str, dict[str, object]] = {
    "mpi-local": {
        "local_mpi_launch": [
            "mpirun",
            "--mca",
            "plm",
            "isolated",
            "--oversubscribe",
            "--bind-to",
            "none",
        ]
    },
}


def measure(kind: str, n: int, cluster, workdir: Path) -> dict[str, object]:
    wf = workdir / f"{kind}{n}" / "workflow.yaml"
    wf.parent.mkdir(parents=True)
    wf.write_text(
        f"name: {kind}{n}\ntasks:\n  - name: t\n    foreach: {{i: {{range: [0, {n}]}}}}\n"
        + TASK[kind]
    )
    runner = CommandRunner(env=cluster.extra_env)
    overrides = {"nodes": 2, **OVERRIDES.get(kind, {})}
    profile = resolve_profile("slurm-test", environ={}, overrides=overrides).profile
    options = RunOptions()
    summary = run_pilot(prepare(wf, options), options, profile, SlurmBackend(runner))
    timings = pilot_timings(summary.paths.state_db)
    span = (timings.last_task_ended or 0) - (timings.first_task_started or 0)
    # 2 nodes x 2 slots: a step holds 1 slot of its worker, a local launch its 2 ranks'.
    in_flight = 4 // (2 if kind == "mpi-local" else 1)
    rate = n / span if span > 0 else None
    return {
        "kind": kind,
        "tasks": n,
        "ok": summary.ok,
        "span_s": round(span, 2),
        "tasks_per_s": round(rate, 1) if rate else None,
        "in_flight": in_flight,
        "s_per_task": round(in_flight / rate, 3) if rate else None,
    }


def section(rows: list[dict[str, object]]) -> str:
    lines = [
        START,
        "## MPI launch rate in a pilot (bench/mpi_rate.py)",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M:%S %Z')} on the local test SLURM (2 logical "
        "nodes of 2 CPUs on this 2-core machine), one allocation. `mpi`: tasks of `ranks: 2` "
        "running `true`, each started as its own `srun` step inside the allocation; "
        "`mpi-local`: the same tasks started on their worker's node by Open MPI's `mpirun "
        "--mca plm isolated` (profile `local_mpi_launch`: no step, each holds 2 of the "
        "worker's slots); `single`: the same count of one-rank tasks (no step), the "
        "pilot's own ceiling. "
        "Rate = tasks / (last end - first start), from the run's attempt records.",
        "",
        "`in flight`: tasks running at once (4 slots; a step holds 1 of its worker's, a "
        "local launch its 2 ranks'); `s per task`: in flight / rate, the time one launch "
        "takes end to end.",
        "",
        "| tasks | kind | ok | span s | tasks/s | in flight | s per task |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['tasks']} | {r['kind']} | {r['ok']} | {r['span_s']} | {r['tasks_per_s']} "
            f"| {r['in_flight']} | {r['s_per_task']} |"
        )
    lines += ["", END, ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"))
    args = ap.parse_args()
    rows = []
    cluster = start_cluster()
    try:
        # The nodes see the cluster's shared volume (GlusterFS), not this machine's /tmp.
        tmp = Path(tempfile.mkdtemp(prefix="hpcflow-mpi-rate-", dir=cluster.shared))
        os.environ["HPCFLOW_HOME"] = str(tmp / "home")
        for kind in ("mpi", "mpi-local", "single"):
            row = measure(kind, args.n, cluster, tmp)
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        cluster.stop()
    write_section(Path(args.out), section(rows), SECTION)
    print(f"wrote {args.out}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
