"""One Snakefile, four ways to run it: ``snakemake --cores 2``, ``--executor hpcflow``
locally, ``--executor hpcflow`` in a pilot allocation, and ``--executor slurm``.

The same N-job Snakefile runs with each tool (``--tools``): ``cores`` (Snakemake alone on
this machine), ``local`` (hpcflow's plugin, its local cluster), ``hpcflow`` (hpcflow's
plugin in pilot mode: one allocation for the whole run) and ``slurm`` (Snakemake's own
SLURM executor plugin: one ``sbatch`` per job, ``sacct`` polls). The last two run on a
private local test SLURM (tests/slurm_cluster.py, with slurmdbd so that ``sacct`` works),
started only when one of them is asked for. Two Snakefiles (``--snakefiles``): ``shell``
(N - 1 trivial shell jobs fanning out, one reduce) and ``python`` (N/2 - 1 ``run:`` jobs,
as many ``script:`` jobs reading them, a ``run:`` reduce). Every batch command is counted
by a wrapper first on PATH that logs the call and execs the real command; calls made
inside a batch job (``SLURM_JOB_ID`` set) are counted apart from those of the Snakemake
process itself.

    bash bench/setup.sh            # snakemake 9 + snakemake-executor-plugin-slurm
    .venv/bin/python bench/snakemake_plugin.py --n 1000 --timeout 3000  # about 80 min
    .venv/bin/python bench/snakemake_plugin.py --n shell=1000,python=200 --snakefiles shell,python
    .venv/bin/python bench/snakemake_plugin.py --tools cores,local --n 1000   # no SLURM

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
TOOLS = ("cores", "local", "hpcflow", "slurm")
#: The tools that need the test SLURM.
ON_SLURM = ("hpcflow", "slurm")
LABELS = {
    "cores": "snakemake --cores 2",
    "local": "hpcflow (local)",
    "hpcflow": "hpcflow (pilot)",
    "slurm": "slurm plugin",
}
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

#: Python rules: ``run:`` jobs, ``script:`` jobs reading them, a ``run:`` reduce.
PYTHON_SNAKEFILE = """\
N = {n}

rule all:
    input: "total.txt"

rule square:
    output: "sq/{{i}}.txt"
    run:
        i = int(wildcards.i)
        with open(output[0], "w") as f:
            f.write(f"{{i * i}}\\n")

rule cube:
    input: "sq/{{i}}.txt"
    output: "cube/{{i}}.txt"
    script: "cube.py"

rule total:
    input: expand("cube/{{i}}.txt", i=range(N))
    output: "total.txt"
    run:
        total = sum(int(open(p).read()) for p in input)
        with open(output[0], "w") as f:
            f.write(f"{{total}}\\n")
"""

CUBE_SCRIPT = """\
i = int(snakemake.wildcards.i)
with open(snakemake.output[0], "w") as f:
    f.write(f"{i ** 3}\\n")
"""

SNAKEFILES = ("shell", "python")


def fan_out(snakefile: str, n: int) -> int:
    """How many fan-out values a Snakefile of ``n`` jobs has."""
    return n - 1 if snakefile == "shell" else (n - 1) // 2


def job_total(snakefile: str, n: int) -> int:
    """How many jobs a Snakefile of size ``n`` runs (the python one runs an odd count:
    as many ``script:`` jobs as ``run:`` jobs, and the reduce)."""
    return n if snakefile == "shell" else 2 * fan_out(snakefile, n) + 1


def expected_total(snakefile: str, n: int) -> int:
    power = 2 if snakefile == "shell" else 3
    return sum(i**power for i in range(fan_out(snakefile, n)))


def write_workflow(workdir: Path, snakefile: str, n: int) -> None:
    text = SNAKEFILE if snakefile == "shell" else PYTHON_SNAKEFILE
    (workdir / "Snakefile").write_text(text.format(n=fan_out(snakefile, n)))
    if snakefile == "python":
        (workdir / "cube.py").write_text(CUBE_SCRIPT)


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
    python = str(REPO / ".venv" / "bin" / "python")
    if tool == "cores":
        return [python, "-m", "snakemake", "--cores", "2", "--quiet", "progress"]
    if tool == "local":
        return [python, "-m", "snakemake", *common, "--executor", "hpcflow"]
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


def done_jobs(workdir: Path) -> int:
    """Jobs whose output exists (the fan-out's files plus the reduce)."""
    count = 0
    for folder in ("sq", "cube"):
        if (workdir / folder).exists():
            count += len(list((workdir / folder).iterdir()))
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


def measure(
    tool: str,
    snakefile: str,
    n: int,
    jobs: int,
    cluster: SlurmCluster | None,
    root: Path,
    cap: float,
) -> dict:
    """Run one Snakemake process to the end (or the cap) and count its batch calls."""
    where = root / f"{tool}-{snakefile}-{n}"
    workdir = where / "wf"
    workdir.mkdir(parents=True)
    write_workflow(workdir, snakefile, n)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SNAKEMAKE_", "SLURM_"))}
    env["HPCFLOW_HOME"] = str(root / "hpcflow-home")
    if cluster is not None:
        env.update(cluster.extra_env)
        calls_log = write_wrappers(where, env["PATH"], cluster.extra_env["SLURM_CONF"])
    else:
        (where / "bin").mkdir()
        calls_log = where / "calls.log"
        calls_log.touch()
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
    done = done_jobs(workdir)
    expected = expected_total(snakefile, n)
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
    if cluster is not None:
        clear_queue(cluster)
    return {
        "tool": tool,
        "snakefile": snakefile,
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
        "time": time.time(),
    }


def job_counts(spec: str, snakefiles: list[str]) -> dict[str, list[int]]:
    """The sizes each Snakefile runs at, from ``--n``: ``N`` is for every Snakefile,
    ``KIND=N`` for one (``1000,python=200``: shell at 1000, python at 1000 and 200)."""
    sizes: dict[str, list[int]] = {kind: [] for kind in snakefiles}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        kind, _, count = item.rpartition("=")
        if not count.isdigit() or int(count) < 2:
            raise ValueError(f"{item!r}: a job count is a whole number of at least 2")
        if kind and kind not in SNAKEFILES:
            raise ValueError(f"{item!r}: the Snakefiles are {', '.join(SNAKEFILES)}")
        for name in [kind] if kind else snakefiles:
            if name in sizes and int(count) not in sizes[name]:
                sizes[name].append(int(count))
    return sizes


def wall_text(row: dict) -> str:
    if row["ok"]:
        return f"{row['wall_s']}"
    total = job_total(row.get("snakefile", "shell"), row["jobs"])
    if row["timed_out"] and row["done"] == total:
        return f"> {row['wall_s']} (cut by the cap as it finished)"
    if row["timed_out"]:
        return f"> {row['wall_s']} ({row['done']}/{total} done)"
    return f"failed after {row['wall_s']} ({row['done']}/{total} done)"


def versions(cluster_env: dict[str, str] | None) -> str:
    def version(python: Path, package: str) -> str:
        proc = subprocess.run(
            [str(python), "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        return proc.stdout.strip() or "?"

    text = f"snakemake {metadata.version('snakemake')}, hpcflow {metadata.version('hpcflow')}"
    peers = PEERS / "bin" / "python"
    if peers.exists():
        plugin = version(peers, "snakemake-executor-plugin-slurm")
        jobstep = version(peers, "snakemake-executor-plugin-slurm-jobstep")
        text += f", snakemake-executor-plugin-slurm {plugin} (+ jobstep {jobstep})"
    if cluster_env is not None:
        slurm = subprocess.run(
            ["sbatch", "--version"], capture_output=True, text=True, check=False, env=cluster_env
        )
        text += f", {slurm.stdout.strip() or 'slurm ?'}"
    return text


#: Issue 20's targets: local within 1.5x of ``--cores 2``, the pilot within 2x of it and
#: at least 20x faster than the slurm plugin, with one sbatch.
OF_CORES = {"local": 1.5, "hpcflow": 2.0}
PILOT_OVER_SLURM = 20.0


def met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def summary(rows: list[dict]) -> list[str]:
    """One sentence per Snakefile and size: each tool against `snakemake --cores 2`, and
    the pilot against the slurm plugin, each with issue 20's target met or not."""
    lines = []
    for snakefile, n in sorted({(r.get("snakefile", "shell"), r["jobs"]) for r in rows}):
        by_tool = {
            r["tool"]: r
            for r in rows
            if r["jobs"] == n and r.get("snakefile", "shell") == snakefile
        }
        total = job_total(snakefile, n)
        what = f"- {snakefile} Snakefile, {total} jobs:"
        said = []
        cores = by_tool.get("cores")
        for tool in ("local", "hpcflow"):
            row = by_tool.get(tool)
            if row is not None and row["ok"] and cores is not None and cores["ok"]:
                ratio = row["wall_s"] / cores["wall_s"]
                said.append(
                    f"{LABELS[tool]} took {ratio:.2f}x the time of `snakemake --cores 2` "
                    f"(target at most {OF_CORES[tool]:g}x: {met(ratio <= OF_CORES[tool])})"
                )
        ours, theirs = by_tool.get("hpcflow"), by_tool.get("slurm")
        if ours is not None and theirs is not None and ours["ok"]:
            ratio = theirs["wall_s"] / ours["wall_s"]
            bound = "" if theirs["ok"] else "more than "
            said.append(
                f"the pilot finished {bound}{ratio:.1f}x sooner than the slurm plugin (target "
                f"at least {PILOT_OVER_SLURM:g}x: {met(ratio >= PILOT_OVER_SLURM)}), with "
                f"{ours['sbatch']} sbatch (target 1: {met(ours['sbatch'] == 1)}) instead of "
                f"{theirs['sbatch']}"
                + (
                    ""
                    if theirs["ok"] or not theirs["done"]
                    else f" (it had done {theirs['done']}/{total} jobs; at that rate all "
                    f"{total} would take about {theirs['wall_s'] * total / theirs['done']:.0f} s)"
                )
                + f" and {ours['status_queries']} status queries instead of "
                f"{theirs['status_queries']}"
            )
        if said:
            lines.append(f"{what} {'; '.join(said)}.")
    return lines


def ended(row: dict) -> str:
    """When a row's run ended (rows read with ``--also`` come from an earlier run)."""
    if "time" not in row:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(row["time"]))


def section(rows: list[dict], jobs: int, software: str) -> str:
    load = os.getloadavg()
    lines = [
        START,
        "## Snakemake: `--cores 2`, `--executor hpcflow` (local, pilot) and `--executor slurm` "
        "(bench/snakemake_plugin.py)",
        "",
        f"Written {time.strftime('%Y-%m-%d %H:%M %Z')} on {platform.node()} "
        f"({os.cpu_count()} cores, shared with other work; load {load[0]:.1f} at the end), "
        f"{software}. Private test SLURM: {NODES} logical nodes x 2 CPUs on this host, slurmdbd"
        " + MariaDB so that `sacct` works. Two Snakefiles: *shell*, N - 1 jobs "
        "`echo $((i*i)) > sq/{i}.txt` fanning out and one reduce summing them; *python*, "
        "(N - 1)/2 `run:` jobs writing i*i, as many `script:` jobs writing i**3 from them and a "
        f"`run:` reduce. `--jobs {jobs}`, no grouping, each executor's defaults otherwise "
        "(cores: `--cores 2`; local: `--executor hpcflow`, its warm runner; slurm: "
        "`--default-resources slurm_partition=debug slurm_account=hpcflow mem_mb=100 "
        "runtime=30`, every job starts `python -m snakemake` again; pilot: `--hpcflow-mode "
        f"pilot --hpcflow-profile slurm-test --hpcflow-nodes {NODES}`, its warm runners). Each "
        "run is capped (`--timeout`); a run cut by its cap is a lower bound, `> T (k/N done)`. "
        "*load* is the 1-minute load average when the run started (other work shares the "
        "machine).",
        "",
        "Calls are counted by wrappers first on PATH. *Snakemake process* = calls made by the "
        "`snakemake` process (and its plugin); *inside jobs* = calls made from within batch "
        "jobs (srun for each job step by the slurm plugin's jobstep executor; the pilot "
        "allocation's launcher for hpcflow). Status queries = squeue + sacct + scontrol. "
        "The wrappers also put back `SLURM_CONF`, which the slurm plugin's jobstep executor "
        "removes before its `srun` (a real site finds its configuration without it).",
        "",
        "| Snakefile | jobs | executor | wall s | sbatch | status queries | all calls by the "
        "Snakemake process | calls inside jobs | load | ended (UTC) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    order = sorted(
        rows,
        key=lambda r: (r.get("snakefile", "shell"), r["jobs"], TOOLS.index(r["tool"])),
    )
    for r in order:
        driver = ", ".join(f"{p} {c}" for p, c in sorted(r["driver_calls"].items())) or "-"
        in_jobs = ", ".join(f"{p} {c}" for p, c in sorted(r["in_job_calls"].items())) or "-"
        kind = r.get("snakefile", "shell")
        lines.append(
            f"| {kind} | {job_total(kind, r['jobs'])} | {LABELS[r['tool']]} | "
            f"{wall_text(r)} | {r['sbatch']} | {r['status_queries']} | {driver} | {in_jobs} | "
            f"{r.get('load', '?')} | {ended(r)} |"
        )
    lines += ["", "Each size, with issue 20's targets:", "", *summary(rows)]
    sizes = ",".join(sorted({f"{r.get('snakefile', 'shell')}={r['jobs']}" for r in rows}))
    kinds = ",".join(sorted({r.get("snakefile", "shell") for r in rows}))
    lines += [
        "",
        "Reproduce: `bash bench/setup.sh && .venv/bin/python bench/snakemake_plugin.py "
        f"--n {sizes} --snakefiles {kinds} --timeout 3000` (as root: the test cluster needs "
        "it; `--tools cores,local` needs no cluster).",
        "",
        END,
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--n",
        default="100,1000",
        help="jobs per Snakefile, comma-separated; KIND=N sizes one Snakefile only "
        "(e.g. shell=1000,python=200)",
    )
    ap.add_argument("--tools", default=",".join(TOOLS), help=",".join(TOOLS))
    ap.add_argument("--snakefiles", default=",".join(SNAKEFILES), help=",".join(SNAKEFILES))
    ap.add_argument("--jobs", type=int, default=100, help="Snakemake --jobs")
    ap.add_argument("--timeout", type=float, default=3000, help="cap per run, seconds")
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"), help="'-': do not write")
    ap.add_argument("--jsonl", default=None, help="also append raw rows to this file")
    ap.add_argument("--keep", action="store_true", help="keep the work directories")
    ap.add_argument(
        "--also",
        default=None,
        help="a JSON-lines file of earlier rows (e.g. --n 100 run first) to report with these",
    )
    args = ap.parse_args()
    tools = args.tools.split(",")
    unknown = set(tools) - set(TOOLS) | set(args.snakefiles.split(",")) - set(SNAKEFILES)
    if unknown:
        print(f"unknown: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    try:
        sizes = job_counts(args.n, args.snakefiles.split(","))
    except ValueError as exc:
        print(f"--n: {exc}", file=sys.stderr)
        return 2
    if "slurm" in tools and not (PEERS / "bin" / "python").exists():
        print("run `bash bench/setup.sh` first", file=sys.stderr)
        return 2
    rows = []
    root = Path(tempfile.mkdtemp(prefix="hpcflow-smk-bench-"))
    cluster = None
    # The test cluster's nodes have a /tmp of their own: runs there work on its volume.
    shared_root = root
    if set(tools) & set(ON_SLURM):
        cluster = start_cluster(nodes=NODES, accounting=True, enforce_limits=True, timeout=120)
        shared_root = cluster.mkdtemp(prefix="hpcflow-smk-bench-")
    software = versions(cluster.env if cluster is not None else None)
    try:
        for snakefile in args.snakefiles.split(","):
            for n in sizes[snakefile]:
                for tool in tools:
                    there = cluster if tool in ON_SLURM else None
                    where = shared_root if tool in ON_SLURM else root
                    row = measure(tool, snakefile, n, args.jobs, there, where, args.timeout)
                    print(json.dumps({k: v for k, v in row.items() if k != "tail"}), flush=True)
                    if row["tail"]:
                        print(row["tail"], file=sys.stderr)
                    rows.append(row)
                    if args.jsonl:
                        with open(args.jsonl, "a") as f:
                            f.write(json.dumps(row) + "\n")
    finally:
        if not args.keep:
            for folder in {root, shared_root}:
                shutil.rmtree(folder, ignore_errors=True)
        else:
            print(f"kept {root}" + (f" and {shared_root}" if shared_root != root else ""))
        if cluster is not None:
            cluster.stop()
    if args.also:
        earlier = [json.loads(line) for line in Path(args.also).read_text().splitlines() if line]
        rows = earlier + rows
    if args.out != "-":
        write_section(Path(args.out), section(rows, args.jobs, software), "snakemake-plugin")
        print(f"wrote {args.out}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
