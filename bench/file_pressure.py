"""File pressure: files and folders 10,000 tiny tasks create, with each task_logs setting
and with scratch folders.

Every task prints a line (stdout) and writes its output; the ``temps`` workload also
writes three temporary files first, in its working directory, as many real tools do.
Settings:

- ``per-task``: the default, a log file per attempt (and a folder per task);
- ``per-worker``: ``task_logs: per-worker``, one log file per worker process;
- ``per-worker + scratch``: the same, and ``scratch: true`` (the temporaries go to a
  node-local folder, the output is copied back).

For each, the files and folders left in the run directory and the workflow folder are
counted, the temporaries each workload created and removed there are added (known by
construction: they never show in a listing), and ``hpcflow run``'s wall time is taken.
Placements: local disk (/var/tmp), and the test cluster's GlusterFS volume
(``--shared``; slurm/start-cluster.sh) with the pool engine on this machine.

Writes its section of bench/RESULTS.md.

    .venv/bin/python bench/file_pressure.py                    # 10,000 tasks, local disk
    .venv/bin/python bench/file_pressure.py --shared           # and on GlusterFS
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from sections import markers, write_section  # noqa: E402  (bench/)

START, END = markers("file-pressure")

#: (name, scratch, temporaries per task, task_logs)
SETTINGS = [
    ("per-task", False, 0, "per-task"),
    ("per-worker", False, 0, "per-worker"),
    ("per-task, temps", False, 3, "per-task"),
    ("per-worker, temps", False, 3, "per-worker"),
    ("per-worker + scratch, temps", True, 3, "per-worker"),
]

PLAIN = "echo line {i}; echo {i} > {outputs}"
TEMPS = (
    "echo line {i}; for k in 1 2 3; do echo {i} > tmp_{i}_$k.txt; done; "
    "cat tmp_{i}_*.txt > {outputs}; rm -f tmp_{i}_*.txt"
)


def workflow(n: int, scratch: bool, temps: int) -> str:
    command = TEMPS if temps else PLAIN
    lines = [
        "name: pressure",
        "tasks:",
        "  - name: t",
        f"    foreach: {{i: {{range: [0, {n}]}}}}",
        f"    command: {command!r}",
        '    outputs: ["out/{i}.txt"]',
    ]
    if scratch:
        lines.append("    scratch: true")
    return "\n".join(lines) + "\n"


def count(folder: Path) -> tuple[int, int]:
    """(files, folders) below ``folder`` (itself not counted)."""
    files = folders = 0
    for _root, dirs, names in os.walk(folder):
        folders += len(dirs)
        files += len(names)
    return files, folders


def one_run(n: int, root: Path, setting: tuple[str, bool, int, str]) -> dict[str, float]:
    """Run ``n`` tasks with ``setting`` in a new folder below ``root``; what it created."""
    name, scratch, temps, logs = setting
    workdir = Path(tempfile.mkdtemp(prefix="fp-", dir=root))
    local = Path(tempfile.mkdtemp(prefix="fp-scratch-", dir="/var/tmp"))
    try:
        wf = workdir / "workflow.yaml"
        wf.write_text(workflow(n, scratch, temps))
        env = {
            **os.environ,
            "HPCFLOW_HOME": str(local / "home"),
            "HPCFLOW_TASK_LOGS": logs,
            "HPCFLOW_SCRATCH_DIR": str(local),
        }
        before = count(workdir)
        t0 = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "-q"],
            env=env,
            capture_output=True,
            text=True,
            timeout=3600,
            check=False,
        )
        wall = time.monotonic() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"{name}: hpcflow run failed: {proc.stdout}{proc.stderr}")
        (run_dir,) = (workdir / ".hpcflow" / "runs").iterdir()
        run_files, run_folders = count(run_dir)
        all_files, all_folders = count(workdir)
        outputs = len(list((workdir / "out").iterdir()))
        if outputs != n:
            raise RuntimeError(f"{name}: {outputs} of {n} outputs")
        check = subprocess.run(
            [sys.executable, "-m", "hpcflow.cli.main", "logs", str(run_dir), "t[i=7]",
             "--stream", "stdout"],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if check.stdout != "line 7\n":
            raise RuntimeError(f"{name}: hpcflow logs shows {check.stdout!r}")
        left = [p for p in local.iterdir() if p.name != "home"]
        if left:
            raise RuntimeError(f"{name}: scratch folders left: {left[:3]}")
        return {
            "wall": wall,
            "run_files": run_files,
            "run_folders": run_folders,
            "files": all_files - before[0],
            "folders": all_folders - before[1],
            "temps": 0 if scratch else temps * n,
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(local, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="tasks per run")
    parser.add_argument("--shared", action="store_true", help="also on the GlusterFS volume")
    parser.add_argument(
        "--shared-settings",
        default="per-task,per-worker",
        help="the settings run on the volume (comma-separated names; the temps ones "
        "cost minutes there)",
    )
    parser.add_argument("--results", default=str(HERE / "RESULTS.md"))
    args = parser.parse_args(argv)
    on_volume = set(args.shared_settings.split(","))
    roots = {"local disk": Path(tempfile.mkdtemp(prefix="hpcflow-fp-", dir="/var/tmp"))}
    cluster = None
    results: dict[tuple[str, str], dict[str, float]] = {}
    try:
        if args.shared:
            from tests.slurm_cluster import start_cluster

            cluster = start_cluster(nodes=1, gpus=0)
            if cluster.shared is None:
                raise SystemExit("the test cluster has no shared volume")
            roots["GlusterFS"] = cluster.mkdtemp()
        for place, root in roots.items():
            for setting in SETTINGS:
                if place != "local disk" and setting[0] not in on_volume:
                    continue
                found = one_run(args.n, root, setting)
                results[(place, setting[0])] = found
                print(f"{place:>10} {setting[0]:>28}: {found}", flush=True)
        write_section(Path(args.results), report(results, roots, args), "file-pressure")
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(roots["local disk"], ignore_errors=True)
    return 0


def report(results, roots, args) -> str:  # type: ignore[no-untyped-def]
    n = args.n
    lines = [
        START,
        "## File pressure: files created per 10,000 tiny tasks (bench/file_pressure.py)",
        "",
        f"`.venv/bin/python bench/file_pressure.py --n {n}"
        f"{' --shared' if args.shared else ''}"
        f"{' --shared-settings ' + repr(args.shared_settings) if args.shared else ''}`, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. {n:,} tasks, each prints "
        "a line and writes its output (`out/I.txt`); *temps* tasks also write and remove "
        "three temporary files in their working directory first. Local pool engine, one "
        "run each. *Entries left* are the files and folders the run left in the run "
        "directory and the workflow folder (outputs included); *created* adds the "
        "temporaries made and removed there (3 per task without scratch; with scratch "
        "they are made on node-local /var/tmp). Every run's `hpcflow logs RUN 't[i=7]'` "
        "is checked to show exactly its line.",
        "",
        "| placement | setting | run dir files / folders | entries left | created "
        "| per task | wall s |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for (place, name), r in results.items():
        left = r["files"] + r["folders"]
        created = left + r["temps"]
        lines.append(
            f"| {place} | {name} | {r['run_files']:,.0f} / {r['run_folders']:,.0f} | "
            f"{left:,.0f} | {created:,.0f} | {created / n:.2f} | {r['wall']:.1f} |"
        )
    lines += [
        "",
        "With `per-task` logs each task that prints leaves a folder and a file in the run "
        "directory (two creates on the file system's metadata server); `per-worker` "
        "leaves one file per worker process, whatever the number of tasks. Outputs are "
        "the workload's own (one per task in every setting). `scratch: true` moves the "
        "temporaries to the node's own disk; it costs a fresh folder, links and a copy "
        "per task there, and its tasks start a process each (no shared shell). Wall "
        "times are of one run each on a 2-core machine shared with other work (load 4-8 "
        "during these runs): differences under ~50% are noise; the counts are exact.",
        END,
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
