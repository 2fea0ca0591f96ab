"""W1 (N tiny shell tasks) with the run on a shared file system, on local disk and on tmpfs.

The shared file system is the test cluster's GlusterFS volume (slurm/start-cluster.sh),
mounted through a FUSE client of its own, as a login node mounts a site's NFS or Lustre.
Three placements, each measured in the same run, in rotating order:

- ``shared``: the workflow folder (task outputs) and the run directory on the volume;
- ``shared run dir``: the run directory (state.sqlite, memo, journals, logs) on the volume,
  the task outputs on local disk: what hpcflow's own bookkeeping costs there;
- ``local disk`` (/var/tmp) and ``tmpfs`` (/dev/shm): both on this machine.

Writes its section of bench/RESULTS.md.

    .venv/bin/python bench/shared_fs.py               # W1 5k and 10k, 3 repetitions
    .venv/bin/python bench/shared_fs.py --n 5000 --reps 1
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from sections import markers, write_section  # noqa: E402  (bench/)

from tests.slurm_cluster import start_cluster  # noqa: E402

START, END = markers("shared-fs")

WORKFLOW = (
    "name: w1\ntasks:\n  - name: t\n    foreach: {{i: {{range: [0, {n}]}}}}\n"
    '    command: echo {{i}} > {{outputs}}\n    outputs: ["out/{{i}}.txt"]\n'
)


def one_run(n: int, workdir: Path, run_dir: Path | None) -> float:
    """Wall seconds of ``hpcflow run`` of W1 with ``n`` tasks in ``workdir``."""
    workdir.mkdir(parents=True)
    wf = workdir / "workflow.yaml"
    wf.write_text(WORKFLOW.format(n=n))
    env = {**os.environ, "HPCFLOW_HOME": str(workdir / "home")}
    cmd = [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "-q"]
    if run_dir is not None:
        cmd += ["--run-dir", str(run_dir)]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"hpcflow run failed in {workdir}: {proc.stdout}{proc.stderr}")
    made = len(list((workdir / "out").iterdir()))
    if made != n:
        raise RuntimeError(f"{made} of {n} outputs in {workdir}")
    return wall


def filesystem(path: Path) -> str:
    """The file system type ``path`` is on (from /proc/self/mounts)."""
    best, kind = "", "?"
    for line in Path("/proc/self/mounts").read_text().splitlines():
        parts = line.split()
        mnt = parts[1]
        if str(path).startswith(mnt.rstrip("/") + "/") or str(path) == mnt:
            if len(mnt) > len(best):
                best, kind = mnt, parts[2]
    return kind


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="5000,10000", help="task counts (comma-separated)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--results", default=str(HERE / "RESULTS.md"))
    args = parser.parse_args(argv)
    counts = [int(x) for x in args.n.split(",")]
    cluster = start_cluster(nodes=1, gpus=0)
    try:
        if cluster.shared is None:
            raise SystemExit("the test cluster has no shared volume")
        roots = {
            "shared": cluster.mkdtemp(),
            "local disk": Path(tempfile.mkdtemp(prefix="hpcflow-fs-", dir="/var/tmp")),
            "tmpfs": Path(tempfile.mkdtemp(prefix="hpcflow-fs-", dir="/dev/shm")),
        }
        places = ["shared", "shared run dir", "local disk", "tmpfs"]
        walls: dict[tuple[str, int], list[float]] = {}
        for n in counts:
            for rep in range(args.reps):
                order = places[rep % len(places) :] + places[: rep % len(places)]
                for place in order:
                    tag = f"{place.replace(' ', '-')}-{n}-{rep}"
                    if place == "shared run dir":
                        workdir = roots["local disk"] / tag
                        run_dir = roots["shared"] / tag / "run"
                    else:
                        workdir = roots[place] / tag
                        run_dir = None
                    wall = one_run(n, workdir, run_dir)
                    walls.setdefault((place, n), []).append(wall)
                    print(f"{place:>15} n={n:>6} rep {rep}: {wall:6.2f} s", flush=True)
                    shutil.rmtree(workdir, ignore_errors=True)
                    if run_dir is not None:
                        shutil.rmtree(run_dir.parent, ignore_errors=True)
        kinds = {place: filesystem(root) for place, root in roots.items()}
        write_section(Path(args.results), report(walls, counts, places, kinds, args), "shared-fs")
    finally:
        cluster.stop()
        for place in ("local disk", "tmpfs"):
            shutil.rmtree(roots.get(place, Path("/nonexistent")), ignore_errors=True)
    return 0


def report(walls, counts, places, kinds, args) -> str:  # type: ignore[no-untyped-def]
    med = {key: statistics.median(v) for key, v in walls.items()}
    lines = [
        START,
        "## W1 on a shared file system, local disk and tmpfs",
        "",
        f"`.venv/bin/python bench/shared_fs.py --n {args.n} --reps {args.reps}`, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Shared volume: GlusterFS "
        f"({kinds['shared']}) of the test cluster, through its own FUSE client; local disk: "
        f"/var/tmp ({kinds['local disk']}); tmpfs: /dev/shm ({kinds['tmpfs']}). Local pool "
        "engine; median of the repetitions, wall seconds of `hpcflow run`.",
        "",
        "| placement | " + " | ".join(f"W1 {n:,}" for n in counts) + " | vs local disk |",
        "|---|" + "---|" * len(counts) + "---|",
    ]
    for place in places:
        ratios = ", ".join(f"{med[(place, n)] / med[('local disk', n)]:.2f}x" for n in counts)
        cells = " | ".join(f"{med[(place, n)]:.2f} s" for n in counts)
        lines.append(f"| {place} | {cells} | {ratios} |")
    big = max(counts)
    ratio = med[("shared run dir", big)] / med[("local disk", big)]
    verdict = "PASS" if ratio <= 1.5 else "FAIL"
    lines += [
        "",
        "`shared run dir` is what hpcflow's own bookkeeping costs on the volume (state, "
        "memo, journals; batched commits). `shared` adds the tasks' own work there: each "
        "W1 task creates an output file, and a file creation on GlusterFS is a round trip "
        "to its server through FUSE, whoever makes it.",
        "",
        f"Target (issue 15): {big:,} tiny tasks with the run directory on the shared volume "
        f"within 1.5x of local disk: **{ratio:.2f}x, {verdict}**.",
        END,
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
