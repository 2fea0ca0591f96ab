"""Per-task cost of a software environment: the same tiny shell task with and without a
container (Charliecloud, Podman where it runs), with an Lmod module, and the raw start of
each runtime. No target: the figure users ask for before they put every step in an image.

Each variant is ``hpcflow run`` of N tasks ``echo i > out_i.txt`` (2 slots, the default
local engine) as a fresh child process timed end to end, in rotating order, in a fresh
folder on local disk. Baselines: the plain task (tiny tasks then share long-lived shells)
and the same task as its own process (``argv: [sh, -c, ...]``), which is what a task in an
environment always is. Per-task overhead = (variant - own-process baseline) / N x 2 slots.
Writes the ``containers`` section of bench/RESULTS.md.

    .venv/bin/python bench/containers.py              # N=200, 3 repetitions
    .venv/bin/python bench/containers.py --n 100 --reps 1
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
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from measure import run_measured  # noqa: E402
from sections import write_section  # noqa: E402

from tests.e2e.software_images import busybox_rootfs, lmod_tree  # noqa: E402
from tests.e2e.test_software import CONTAINERS_CONF  # noqa: E402

SECTION = "containers"
LMOD_INIT = Path("/usr/share/lmod/lmod/init/bash")

TASK = {
    "plain": "    command: echo {i} > out_{i}.txt\n",
    "own_process": "    argv: [sh, -c, 'echo {i} > out_{i}.txt']\n",
    "charliecloud": (
        "    container: {image: image, runtime: charliecloud}\n"
        "    command: echo {i} > out_{i}.txt\n"
    ),
    "podman": (
        "    container: {image: 'localhost/hpcflow-bench:1', runtime: podman}\n"
        "    command: echo {i} > out_{i}.txt\n"
    ),
    "lmod": ("    modules: [hpctool/1.0]\n    command: echo {i} > out_{i}.txt\n"),
}

DESC = {
    "plain": "plain shell task (tiny tasks share long-lived shells)",
    "own_process": "the same task as its own process (`argv: [sh, -c, ...]`)",
    "charliecloud": "in a Charliecloud image folder (`ch-run`, busybox)",
    "podman": "in a Podman image (`podman run --rm`)",
    "lmod": "with one Lmod module loaded (`module load hpctool/1.0`)",
}


def _workflow(variant: str, n: int) -> str:
    return (
        f"name: bench-{variant}\ntasks:\n  - name: t\n    foreach: {{i: {{range: [0, {n}]}}}}\n"
        + TASK[variant]
        + '    outputs: ["out_{i}.txt"]\n'
    )


def _podman_works() -> bool:
    if shutil.which("podman") is None:
        return False
    try:
        done = subprocess.run(
            ["podman", "run", "--rm", "localhost/hpcflow-bench:1", "true"],
            capture_output=True, timeout=60, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def _raw_start(argv: list[str], reps: int = 20) -> float:
    """Median seconds of one start of ``argv`` (a command that does nothing)."""
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, env={**os.environ, "USER": "root"})
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="hpcflow-bench-containers-", dir="/var/tmp"))
    # runc and lower default limits: what this machine needs (tests/e2e/test_software.py).
    (base / "containers.conf").write_text(CONTAINERS_CONF)
    os.environ["CONTAINERS_CONF"] = str(base / "containers.conf")
    image = base / "image"
    busybox_rootfs(image, "bench", [])
    modulepath = lmod_tree(base / "lmod")
    variants = ["plain", "own_process"]
    if shutil.which("ch-run"):
        variants.append("charliecloud")
    if LMOD_INIT.exists():
        variants.append("lmod")
    if shutil.which("podman"):
        tar = subprocess.Popen(["tar", "-C", str(image), "-c", "."], stdout=subprocess.PIPE)
        subprocess.run(
            ["podman", "import", "-q", "-", "localhost/hpcflow-bench:1"],
            stdin=tar.stdout, capture_output=True, check=False,
        )  # fmt: skip
        tar.wait()
        if _podman_works():
            variants.append("podman")
    env = {**os.environ, "MODULEPATH": str(modulepath), "USER": os.environ.get("USER", "root")}
    walls: dict[str, list[float]] = {v: [] for v in variants}
    for rep in range(args.reps):
        for variant in variants[rep % len(variants) :] + variants[: rep % len(variants)]:
            folder = base / f"{variant}-{rep}"
            folder.mkdir()
            if variant == "charliecloud":
                (folder / "image").symlink_to(image)
                (image / str(folder).lstrip("/")).mkdir(parents=True, exist_ok=True)
            (folder / "workflow.yaml").write_text(_workflow(variant, args.n))
            m = run_measured(
                [sys.executable, "-m", "hpcflow.cli.main", "run", "workflow.yaml", "-q"],
                str(folder), env, 1800, str(folder),
            )  # fmt: skip
            made = len(list(folder.glob("out_*.txt")))
            if m.rc != 0 or made != args.n:
                print(f"{variant}: rc={m.rc}, {made} outputs\n{m.stderr_tail}", file=sys.stderr)
                return 1
            walls[variant].append(m.wall_s)
            print(f"{variant} rep {rep}: {m.wall_s:.2f}s", flush=True)
    raw = {"sh -c true": _raw_start(["sh", "-c", "true"])}
    if "charliecloud" in variants:
        raw["ch-run IMAGE -- true"] = _raw_start(["ch-run", str(image), "--", "true"])
    if "podman" in variants:
        raw["podman run --rm IMAGE true"] = _raw_start(
            ["podman", "run", "--rm", "localhost/hpcflow-bench:1", "true"], reps=5
        )
    own = statistics.median(walls["own_process"])
    lines = [
        f"<!-- section:{SECTION} -->",
        "## Software environments: per-task cost (bench/containers.py)",
        "",
        f"{args.n} tasks `echo i > out_i.txt`, 2 slots, default local engine, median of "
        f"{args.reps} fresh `hpcflow run`s each (end to end), folders on local disk. "
        "Per task: (wall - own-process wall) / N x 2 slots. No target.",
        "",
        "| variant | wall (s) | per task vs own process (ms) |",
        "|---|---:|---:|",
    ]
    for variant in variants:
        wall = statistics.median(walls[variant])
        extra = (wall - own) / args.n * 2 * 1000
        lines.append(f"| {DESC[variant]} | {wall:.2f} | {extra:+.1f} |")
    lines += ["", "Raw start of each runtime (median, no hpcflow):", ""]
    lines += [f"- `{name}`: {seconds * 1000:.1f} ms" for name, seconds in raw.items()]
    if "podman" not in variants:
        lines.append("- Podman: not measured, `podman run` does not work on this machine.")
    lines += ["", f"<!-- /section:{SECTION} -->", ""]
    write_section(args.out, "\n".join(lines), SECTION)
    print("\n".join(lines))
    shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
