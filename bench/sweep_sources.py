"""Planning with file-sourced sweeps: W5/W6's dry run (the W1 fan-out of 100,000 and
1,000,000 tasks) when the instances come from a sample sheet (``from_table``) or from
files (``from_files``) instead of a ``range``, against the same targets (W5: 5 s and
500 MB at 100,000 tasks; W6: 60 s and 4 GB at 1,000,000).

Each case is ``hpcflow run --dry-run`` in a child process: wall time and the child's
peak RSS (from ``wait4``). The files case creates N empty files once (100,000 only: a
million files is a file-system benchmark of its own). Writes the ``sweep-sources``
section of bench/RESULTS.md.

    .venv/bin/python bench/sweep_sources.py
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sections import markers, write_section  # noqa: E402  (bench/)

SECTION = "sweep-sources"
START, END = markers(SECTION)
#: (tasks, seconds, MB): W5's and W6's targets.
TARGETS = {100_000: (5.0, 500.0), 1_000_000: (60.0, 4096.0)}

FOREACH = {
    "range": "      i: {{range: [0, {n}]}}",
    "table": "      from_table: samples.tsv",
    "files": '      from_files: "in/{{i}}.txt"',
}


def _workflow(folder: Path, kind: str, n: int) -> Path:
    if kind == "table" and not (folder / "samples.tsv").exists():
        (folder / "samples.tsv").write_text("i\n" + "".join(f"{i}\n" for i in range(n)))
    if kind == "files" and not (folder / "in").exists():
        (folder / "in").mkdir()
        for i in range(n):
            (folder / "in" / f"{i}.txt").touch()
    wf = folder / f"{kind}.yaml"
    wf.write_text(
        "name: plan\ntasks:\n  - name: t\n    foreach:\n"
        + FOREACH[kind].format(n=n)
        + '\n    command: echo {i} > {outputs}\n    outputs: ["out_{i}.txt"]\n'
    )
    return wf


def _plan(wf: Path, home: Path) -> tuple[int, float, float]:
    """Exit status, wall seconds and peak RSS (MB) of a dry run of ``wf``."""
    env = {**os.environ, "HPCFLOW_HOME": str(home)}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "--dry-run", "-q"],
        cwd=wf.parent, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    return os.waitstatus_to_exitcode(status), seconds, usage.ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="hpcflow-sources-") as tmp:
        for n in TARGETS:
            folder = Path(tmp) / str(n)
            folder.mkdir()
            kinds = ("range", "table", "files") if n <= 100_000 else ("range", "table")
            for kind in kinds:
                rc, seconds, mb = _plan(_workflow(folder, kind, n), Path(tmp) / "home")
                limit_s, limit_mb = TARGETS[n]
                ok = rc == 0 and seconds <= limit_s and mb <= limit_mb
                rows.append((n, kind, rc, seconds, mb, limit_s, limit_mb, ok))
                print(f"{n} {kind}: rc {rc}, {seconds:.2f} s, {mb:.0f} MB", flush=True)
    lines = [
        START,
        "## Planning with file-sourced sweeps (bench/sweep_sources.py)",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M:%S %Z')}: `hpcflow run --dry-run` of W1's "
        "fan-out whose instances come from a `range` (as W5/W6), a sample sheet "
        "(`from_table`, one column, a row per task) or files (`from_files`, one empty file "
        "per task), against W5's and W6's targets.",
        "",
        "| tasks | sweep | exit | plan s | peak MB | target | |",
        "|---|---|---|---|---|---|---|",
    ]
    for n, kind, rc, seconds, mb, limit_s, limit_mb, ok in rows:
        lines.append(
            f"| {n:,} | {kind} | {rc} | {seconds:.2f} | {mb:.0f} | ≤ {limit_s:g} s, "
            f"≤ {limit_mb:g} MB | {'PASS' if ok else 'FAIL'} |"
        )
    lines += ["", END, ""]
    write_section(Path(args.out), "\n".join(lines), SECTION)
    print(f"wrote {args.out}")
    return 0 if all(row[-1] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
