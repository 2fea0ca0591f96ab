"""Helpers for the Snakemake plugin tests (also used by tests/integration/slurm)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import CliResult

SNAKEMAKE = [sys.executable, "-m", "snakemake"]

#: A multi-rule workflow: wildcards, a fan-out of N jobs (grouped so that Snakemake's
#: per-job start-up cost stays a few seconds), a per-chunk rule and a reduce.
FANOUT_SNAKEFILE = """
N = {n}
CHUNKS = ["a", "b"]

rule all:
    input: "results/total.txt", expand("results/chunk_{{c}}.txt", c=CHUNKS)

rule square:
    output: "results/sq/{{i}}.txt"
    group: "fan"
    resources: mem_mb=10, runtime=5
    shell: "echo $(( {{wildcards.i}} * {{wildcards.i}} )) > {{output}}"

rule chunk:
    output: "results/chunk_{{c}}.txt"
    threads: 1
    shell: "echo chunk {{wildcards.c}} > {{output}}"

rule total:
    input: expand("results/sq/{{i}}.txt", i=range(N))
    output: "results/total.txt"
    shell: "cat {{input}} | awk '{{{{s += $1}}}} END {{{{print s}}}}' > {{output}}"
"""


def fanout_snakefile(n: int) -> str:
    """The fan-out workflow for ``n`` square jobs."""
    return FANOUT_SNAKEFILE.format(n=n)


def sum_of_squares(n: int) -> int:
    return sum(i * i for i in range(n))


def write_snakefile(directory: Path, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "Snakefile"
    path.write_text(text)
    return path


def run_dirs(workdir: Path) -> list[Path]:
    """The hpcflow run directories the plugin made in ``workdir``."""
    root = workdir / ".hpcflow" / "runs"
    return sorted(root.iterdir()) if root.exists() else []


def clean_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` without variables that would send Snakemake elsewhere; this Python first."""
    clean = {k: v for k, v in env.items() if not k.startswith(("SNAKEMAKE_", "SLURM_"))}
    clean["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{clean.get('PATH', '')}"
    return clean


def run_snakemake(*args: str, cwd: Path, env: dict[str, str], timeout: float = 240) -> CliResult:
    """Run ``snakemake ARGS...`` as a real process in ``cwd``."""
    proc = subprocess.run(
        [*SNAKEMAKE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


#: A job that says when it starts and ends in ``lines.txt`` (its shell's pid tells
#: attempts apart), and waits for a file ``go`` in between.
WAITING_SNAKEFILE = (
    'rule all:\n    input: "slow.txt"\n'
    'rule slow:\n    output: "slow.txt"\n'
    '    shell: "echo start $$ >> lines.txt; while [ ! -e go ]; do sleep 0.1; done; '
    'echo end $$ >> lines.txt; touch {output}"\n'
)


def job_lines(workdir: Path) -> list[tuple[str, str]]:
    """The ``(start|end, pid)`` lines the jobs of :data:`WAITING_SNAKEFILE` wrote."""
    path = workdir / "lines.txt"
    text = path.read_text() if path.exists() else ""
    return [(w[0], w[1]) for w in (line.split() for line in text.splitlines()) if len(w) == 2]


def wait_for_starts(
    workdir: Path, proc: subprocess.Popen[str], n: int, timeout: float = 120
) -> None:
    """Wait until ``n`` jobs have written their ``start`` line (``proc``: the Snakemake run)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum(what == "start" for what, _ in job_lines(workdir)) >= n:
            return
        if proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            raise AssertionError(f"snakemake ended before its job started:\n{out[-3000:]}")
        time.sleep(0.1)
    raise AssertionError(f"no job started within {timeout:.0f} s; lines: {job_lines(workdir)}")
