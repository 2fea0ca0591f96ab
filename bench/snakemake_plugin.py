"""One Snakefile, two executors: ``--executor hpcflow`` (pilot) vs ``--executor slurm``.

The same N-job Snakefile (N - 1 trivial shell jobs fanning out, one reduce) runs on a private
local test SLURM (tests/slurm_cluster.py, with slurmdbd so that ``sacct`` works) once with
Snakemake's own SLURM executor plugin (one ``sbatch`` per job, ``sacct`` polls) and once with
hpcflow's plugin in pilot mode (one allocation for the whole run). Every batch command is
counted by a wrapper first on PATH that logs the call and execs the real command; calls made
inside a batch job (``SLURM_JOB_ID`` set) are counted apart from those of the Snakemake
process itself.

    bash bench/setup.sh            # snakemake 9 + snakemake-executor-plugin-slurm
    .venv/bin/python bench/snakemake_plugin.py --n 100,1000 --timeout 1500

Writes its section of bench/RESULTS.md (``<!-- section:snakemake-plugin -->``), keeping the
rest of the file (``--jsonl FILE``: raw rows too; ``--also FILE``: report earlier rows).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from sections import markers, write_section  # noqa: E402  (bench/)

from tests.slurm_cluster import SlurmCluster, start_cluster  # noqa: E402

START, END = markers("snakemake-plugin")
PEERS = HERE / ".venv-peers"
#: Batch commands counted. Status queries are squeue + sacct + scontrol.
COUNTED = (
    "sbatch", "squeue", "sacct", "scontrol", "scancel", "sinfo", "sacctmgr", "sshare", "srun",
)  # fmt: skip
STATUS = ("squeue", "sacct", "scontrol")
TOOLS = ("hpcflow", "slurm")
NODES = 4

SNAKEFILE = """\
N = {n}

rule all:
    input: "total.txt"

rule square:
    output: "sq/{{i}}.txt"
    shell: "echo $(( {{wildcards.i}} * {{wildcards.i}} )) > {{output}}"

rule total:
    input: expand("sq/{{i}}.txt", i=range(N))
    output: "total.txt"
    shell: "cat {{input}} | awk '{{{{s += $1}}}} END {{{{print s}}}}' > {{output}}"
"""


def write_wrappers(directory: Path, path: str, slurm_conf: str) -> Path:
    """``directory/bin/PROGRAM`` for each counted command; returns the shared call log.

    Each call appends one line, ``PROGRAM job`` inside a batch job or ``PROGRAM driver``
    outside (short ``O_APPEND`` writes: concurrent calls do not mix lines). The wrapper
    also puts back ``SLURM_CONF`` where a caller removed it (the slurm plugin's jobstep
    executor drops every ``SLURM_*`` variable before its ``srun``): a real site finds its
    configuration without it, the private test cluster does not."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True)
    log = directory / "calls.log"
    log.touch()
    for program in COUNTED:
        real = shutil.which(program, path=path)
        if real is None:
            continue
        wrapper = bin_dir / program
        wrapper.write_text(
            "#!/bin/sh\n"
            f'if [ -n "${{SLURM_JOB_ID:-}}" ]; then w=job; else w=driver; fi\n'
            f'export SLURM_CONF="${{SLURM_CONF:-{slurm_conf}}}"\n'
            f'echo "{program} $w" >> "{log}"\n'
            f'exec "{real}" "$@"\n'
        )
        wrapper.chmod(0o755)
    return log


def argv_for(tool: str, jobs: int) -> list[str]:
    """The Snakemake command line for ``tool``; both get the same Snakefile and --jobs."""
    common = ["--jobs", str(jobs), "--latency-wait", "10", "--quiet", "progress"]
    if tool == "hpcflow":
        return [
            str(REPO / ".venv" / "bin" / "python"), "-m", "snakemake", *common,
            "--executor", "hpcflow", "--hpcflow-mode", "pilot",
            "--hpcflow-profile", "slurm-test", "--hpcflow-nodes", str(NODES),
            "--hpcflow-walltime", "2h", "--hpcflow-partition", "debug",
        ]  # fmt: skip
    return [
        str(PEERS / "bin" / "python"), "-m", "snakemake", *common,
        "--executor", "slurm",
        "--default-resources", "slurm_partition=debug", "slurm_account=hpcflow",
        "mem_mb=100", "runtime=30",
    ]  # fmt: skip


def done_jobs(workdir: Path, n: int) -> int:
    """Jobs whose output exists (the fan-out's files plus the reduce)."""
    sq = workdir / "sq"
    count = len(list(sq.iterdir())) if sq.exists() else 0
    return count + (workdir / "total.txt").exists()


def clear_queue(cluster: SlurmCluster) -> None:
    """Cancel whatever a measurement left on the (private) cluster and wait for it to go."""
    cluster.run(["scancel", "--user", os.environ.get("USER", "root")], check=False)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        out = cluster.run(["squeue", "-h", "-o", "%i"], check=False).stdout.split()
        if not out:
            return
        time.sleep(1)


def measure(tool: str, n: int, jobs: int, cluster: SlurmCluster, root: Path, cap: float) -> dict:
    """Run one Snakemake process to the end (or the cap) and count its batch calls."""
    where = root / f"{tool}-{n}"
    workdir = where / "wf"
    workdir.mkdir(parents=True)
    (workdir / "Snakefile").write_text(SNAKEFILE.format(n=n - 1))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SNAKEMAKE_", "SLURM_"))}
    env.update(cluster.extra_env)
    env["HPCFLOW_HOME"] = str(root / "hpcflow-home")
    calls_log = write_wrappers(where, env["PATH"], cluster.extra_env["SLURM_CONF"])
    env["PATH"] = f"{where / 'bin'}:{Path(argv_for(tool, jobs)[0]).parent}:{env['PATH']}"
    argv = argv_for(tool, jobs)
    load = round(os.getloadavg()[0], 1)
    started = time.monotonic()
    proc = subprocess.Popen(
        argv, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    timed_out = False
    try:
        output, _ = proc.communicate(timeout=cap)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGINT)  # let Snakemake cancel its jobs
        try:
            output, _ = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
    wall = time.monotonic() - started
    done = done_jobs(workdir, n)
    expected = sum(i * i for i in range(n - 1))
    total = workdir / "total.txt"
    ok = (
        proc.returncode == 0
        and not timed_out
        and total.exists()
        and total.read_text().strip() == str(expected)
    )
    (where / "snakemake.log").write_text(output)
    calls = Counter(tuple(line.split()) for line in calls_log.read_text().splitlines() if line)
    driver = {p: calls[(p, "driver")] for p in COUNTED}
    in_jobs = {p: calls[(p, "job")] for p in COUNTED}
    clear_queue(cluster)
    return {
        "tool": tool,
        "jobs": n,
        "ok": ok,
        "timed_out": timed_out,
        "done": done,
        "rc": proc.returncode,
        "wall_s": round(wall, 1),
        "load": load,
        "sbatch": driver["sbatch"],
        "status_queries": sum(driver[p] for p in STATUS),
        "driver_calls": {p: c for p, c in driver.items() if c},
        "in_job_calls": {p: c for p, c in in_jobs.items() if c},
        "tail": "" if ok else output[-1500:],
    }


def wall_text(row: dict) -> str:
    if row["ok"]:
        return f"{row['wall_s']}"
    if row["timed_out"] and row["done"] == row["jobs"]:
        return f"> {row['wall_s']} (cut by the cap as it finished)"
    if row["timed_out"]:
        return f"> {row['wall_s']} ({row['done']}/{row['jobs']} done)"
    return f"failed after {row['wall_s']} ({row['done']}/{row['jobs']} done)"


def versions(cluster_env: dict[str, str]) -> str:
    def version(python: Path, package: str) -> str:
        proc = subprocess.run(
            [str(python), "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        return proc.stdout.strip() or "?"

    slurm = subprocess.run(
        ["sbatch", "--version"], capture_output=True, text=True, check=False, env=cluster_env
    )
    peers = PEERS / "bin" / "python"
    plugin = version(peers, "snakemake-executor-plugin-slurm")
    jobstep = version(peers, "snakemake-executor-plugin-slurm-jobstep")
    return (
        f"snakemake {metadata.version('snakemake')}, hpcflow {metadata.version('hpcflow')}, "
        f"snakemake-executor-plugin-slurm {plugin} (+ jobstep {jobstep}), "
        f"{slurm.stdout.strip() or 'slurm ?'}"
    )


def summary(rows: list[dict]) -> list[str]:
    """One sentence per size measured with both executors."""
    lines = []
    for n in sorted({r["jobs"] for r in rows}):
        by_tool = {r["tool"]: r for r in rows if r["jobs"] == n}
        ours, theirs = by_tool.get("hpcflow"), by_tool.get("slurm")
        if ours is None or theirs is None or not ours["ok"]:
            continue
        ratio = theirs["wall_s"] / ours["wall_s"]
        bound = "" if theirs["ok"] else "more than "
        lines.append(
            f"- {n} jobs: `--executor hpcflow` finished {bound}{ratio:.1f}x sooner, with "
            f"{ours['sbatch']} sbatch instead of {theirs['sbatch']}"
            + (
                ""
                if theirs["ok"] or not theirs["done"]
                else f" (it had done {theirs['done']}/{n} jobs; at that rate all {n} would "
                f"take about {theirs['wall_s'] * n / theirs['done']:.0f} s)"
            )
            + f" and {ours['status_queries']} status queries instead of "
            f"{theirs['status_queries']}."
        )
    return lines


def section(rows: list[dict], jobs: int, software: str) -> str:
    load = os.getloadavg()
    lines = [
        START,
        "## Snakemake: `--executor hpcflow` vs `--executor slurm` (bench/snakemake_plugin.py)",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M %Z')} on {platform.node()} "
        f"({os.cpu_count()} cores, shared with other work; load {load[0]:.1f} at the end), "
        f"{software}. Private test SLURM: {NODES} logical nodes x 2 CPUs on this host, slurmdbd"
        " + MariaDB so that `sacct` works. The same Snakefile for both: N - 1 jobs "
        "`echo $((i*i)) > sq/{i}.txt` fanning out, one reduce summing them; "
        f"`--jobs {jobs}`, no grouping, each executor's defaults otherwise "
        "(slurm: `--default-resources slurm_partition=debug slurm_account=hpcflow mem_mb=100 "
        "runtime=30`; hpcflow: `--hpcflow-mode pilot --hpcflow-profile slurm-test "
        f"--hpcflow-nodes {NODES}`). Every Snakemake job starts `python -m snakemake` again "
        "under both executors. Each run is capped (`--timeout`); a run cut by its cap is "
        "a lower bound, `> T (k/N done)`. *load* is the 1-minute load average when the run "
        "started (other work shares the machine).",
        "",
        "Calls are counted by wrappers first on PATH. *Snakemake process* = calls made by the "
        "`snakemake` process (and its plugin); *inside jobs* = calls made from within batch "
        "jobs (srun for each job step by the slurm plugin's jobstep executor; the pilot "
        "allocation's launcher for hpcflow). Status queries = squeue + sacct + scontrol. "
        "The wrappers also put back `SLURM_CONF`, which the slurm plugin's jobstep executor "
        "removes before its `srun` (a real site finds its configuration without it).",
        "",
        "| jobs | executor | wall s | sbatch | status queries | all calls by the Snakemake "
        "process | calls inside jobs | load |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["jobs"], TOOLS.index(r["tool"]))):
        driver = ", ".join(f"{p} {c}" for p, c in sorted(r["driver_calls"].items())) or "-"
        in_jobs = ", ".join(f"{p} {c}" for p, c in sorted(r["in_job_calls"].items())) or "-"
        lines.append(
            f"| {r['jobs']} | {r['tool']} | {wall_text(r)} | {r['sbatch']} | "
            f"{r['status_queries']} | {driver} | {in_jobs} | {r.get('load', '?')} |"
        )
    lines += ["", *summary(rows)]
    lines += [
        "",
        "Reproduce: `bash bench/setup.sh && .venv/bin/python bench/snakemake_plugin.py "
        f"--n {','.join(sorted({str(r['jobs']) for r in rows}, key=int))} --timeout 1200` "
        "(as root: the test cluster needs it).",
        "",
        END,
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", default="100,1000", help="jobs per Snakefile, comma-separated")
    ap.add_argument("--tools", default=",".join(TOOLS), help="hpcflow,slurm")
    ap.add_argument("--jobs", type=int, default=100, help="Snakemake --jobs")
    ap.add_argument("--timeout", type=float, default=1500, help="cap per run, seconds")
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"), help="'-': do not write")
    ap.add_argument("--jsonl", default=None, help="also append raw rows to this file")
    ap.add_argument("--keep", action="store_true", help="keep the work directories")
    ap.add_argument(
        "--also",
        default=None,
        help="a JSON-lines file of earlier rows (e.g. --n 100 run first) to report with these",
    )
    args = ap.parse_args()
    if not (PEERS / "bin" / "python").exists():
        print("run `bash bench/setup.sh` first", file=sys.stderr)
        return 2
    rows = []
    root = Path(tempfile.mkdtemp(prefix="hpcflow-smk-bench-"))
    cluster = start_cluster(nodes=NODES, accounting=True, enforce_limits=True, timeout=120)
    software = versions(cluster.env)
    try:
        for n in (int(x) for x in args.n.split(",")):
            for tool in args.tools.split(","):
                row = measure(tool, n, args.jobs, cluster, root, args.timeout)
                print(json.dumps({k: v for k, v in row.items() if k != "tail"}), flush=True)
                if row["tail"]:
                    print(row["tail"], file=sys.stderr)
                rows.append(row)
                if args.jsonl:
                    with open(args.jsonl, "a") as f:
                        f.write(json.dumps({**row, "time": time.time()}) + "\n")
    finally:
        cluster.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"kept {root}")
    if args.also:
        earlier = [json.loads(line) for line in Path(args.also).read_text().splitlines() if line]
        rows = earlier + rows
    if args.out != "-":
        write_section(Path(args.out), section(rows, args.jobs, software), "snakemake-plugin")
        print(f"wrote {args.out}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
