"""W8: return values handed from task to task, hpcflow against files, Dask and Parsl.

Two workloads (bench/w8_tasks.py): a 10-task chain handing on a 256 MiB NumPy array,
and a sweep of 200 tasks of 1 MiB each gathered by one reduce. Each tool runs them with
two slots, as a fresh child process timed end to end, in rotating order, on local disk
(/var/tmp: the files form writes real files there, and hpcflow its run directory):

- ``hpcflow``: ``from:`` with ``persist: false`` on ``--engine dask --workers 2
  --threads 1``: the values stay on the worker that made them (in memory);
- ``hpcflow_persist``: the same with the default ``persist: true`` (each value is also
  written to the run directory, so that a re-run can reuse it);
- ``hpcflow_pool``: the default local engine, which hands values over as files in the
  run directory;
- ``files``: no tool, np.save / np.load in a ProcessPoolExecutor(2);
- ``dask``: plain Dask futures on a LocalCluster(2 worker processes x 1 thread);
- ``parsl``: Parsl python_app futures, HighThroughputExecutor with 2 workers;
- ``inline``: no tool and no hand-over: the same calls in one process on one slot, the
  floor of every form (the work itself and one interpreter start; a tool with two slots
  can only gain the gather's parallel part, which is small next to the start).

Targets: hpcflow (in memory) within 1.3x of plain Dask futures, and at least 3x faster
than files. Writes its section of bench/RESULTS.md; bench/run.py --only W8 starts it.

    .venv/bin/python bench/values.py              # 3 repetitions
    .venv/bin/python bench/values.py --reps 1 --tools hpcflow,dask
    .venv/bin/python bench/values.py --root shared   # on a GlusterFS volume (root)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import w8_tasks  # noqa: E402  (bench/)
from measure import run_measured  # noqa: E402
from sections import write_section  # noqa: E402

WORKLOADS = ["chain", "gather"]
TOOLS = ["hpcflow", "hpcflow_persist", "hpcflow_pool", "files", "dask", "parsl", "inline"]
TARGET_OF_DASK = 1.3
TARGET_OVER_FILES = 3.0
SECTION = "values"
#: ``--root shared``: the work directories on the test cluster's GlusterFS volume.
SHARED = "shared"
SECTION_SHARED = "values-shared"

DESC = {
    "hpcflow": "`from:`, `persist: false`, `--engine dask --workers 2 --threads 1`",
    "hpcflow_persist": "`from:` (default `persist: true`), same engine",
    "hpcflow_pool": "`from:`, default local engine (pool): values as files in the run dir",
    "files": "no tool: np.save / np.load, ProcessPoolExecutor(2)",
    "dask": "plain Dask futures, LocalCluster(2 processes x 1 thread)",
    "parsl": "Parsl python_app futures, HTEX, 2 workers",
    "inline": "no tool, no hand-over: the calls in one process (the floor)",
}


def workflow(workload: str, persist: bool) -> str:
    """The hpcflow workflow of ``workload``."""
    import yaml

    keep = {} if persist else {"persist": False}
    if workload == "chain":
        last = w8_tasks.CHAIN_TASKS - 1
        tasks = [{"name": "c0", "python": "w8_tasks:start", **keep}]
        tasks += [
            {
                "name": f"c{k}",
                "python": f"w8_tasks:{'finish' if k == last else 'step'}",
                "from": {"x": f"c{k - 1}"},
                **keep,
            }
            for k in range(1, last + 1)
        ]
    else:
        sweep = {"i": {"range": [0, w8_tasks.GATHER_N]}}
        tasks = [
            {"name": "part", "foreach": sweep, "python": "w8_tasks:part", **keep},
            {"name": "reduce", "python": "w8_tasks:reduce", "from": {"parts": "part"}},
        ]
    return yaml.safe_dump({"name": f"w8-{workload}", "tasks": tasks}, sort_keys=False)


def last_task(workload: str) -> str:
    return f"c{w8_tasks.CHAIN_TASKS - 1}" if workload == "chain" else "reduce"


def command(tool: str, workload: str, workdir: Path, peers_python: str) -> list[str]:
    """The measured command of ``tool``, its inputs written into ``workdir``."""
    if tool.startswith("hpcflow"):
        wf = workdir / "workflow.yaml"
        wf.write_text(workflow(workload, persist=tool != "hpcflow"))
        shutil.copy(HERE / "w8_tasks.py", workdir / "w8_tasks.py")
        cmd = [str(REPO / ".venv" / "bin" / "hpcflow"), "run", str(wf), "--quiet"]
        if tool == "hpcflow_pool":
            return [*cmd, "--threads", "2"]
        return [*cmd, "--engine", "dask", "--workers", "2", "--threads", "1"]
    python = peers_python if tool == "parsl" else sys.executable
    return [python, str(HERE / "child_values.py"), tool, workload]


def value_of(tool: str, workload: str, workdir: Path, stdout: str) -> float | None:
    """The last task's value, as the tool left it."""
    if not tool.startswith("hpcflow"):
        for line in stdout.splitlines():
            if line.startswith("W8 value "):
                return float(line.split()[-1])
        return None
    import hpcflow

    runs = sorted((workdir / ".hpcflow" / "runs").iterdir())
    return float(hpcflow.load_result(runs[-1], last_task(workload)))


def measure(tool: str, workload: str, root: Path, args: argparse.Namespace) -> dict:
    """One timed run of ``tool`` on ``workload``; checked afterwards."""
    workdir = Path(tempfile.mkdtemp(prefix=f"w8-{tool}-{workload}-", dir=root))
    logdir = Path(tempfile.mkdtemp(prefix="log-", dir=root))
    python = args.peers_python if tool == "parsl" else sys.executable
    env = {
        **os.environ,
        "PYTHONPATH": str(HERE),
        "HPCFLOW_HOME": str(workdir / "home"),
        "OMP_NUM_THREADS": "1",
        # Parsl starts interchange.py and process_worker_pool.py by name from PATH
        "PATH": os.path.dirname(python) + os.pathsep + os.environ.get("PATH", ""),
    }
    argv = command(tool, workload, workdir, args.peers_python)
    m = run_measured(argv, str(workdir), env, args.timeout, str(logdir))
    rec = {"tool": tool, "workload": workload, "wall_s": m.wall_s, "rss_mb": m.peak_rss_mb}
    if m.timed_out or m.rc != 0:
        rec["error"] = "timed out" if m.timed_out else f"exit {m.rc}: {m.stderr_tail[-400:]}"
    else:
        try:
            got = value_of(tool, workload, workdir, m.stdout_tail)
        except Exception as exc:  # a wrong or missing result is a failed measurement
            got, rec["error"] = None, f"no result: {exc}"
        if got != w8_tasks.expected(workload) and "error" not in rec:
            rec["error"] = f"wrong value {got!r}"
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(logdir, ignore_errors=True)
    return rec


def medians(recs: list[dict]) -> dict[tuple[str, str], float]:
    by: dict[tuple[str, str], list[float]] = {}
    for r in recs:
        if "error" not in r:
            by.setdefault((r["workload"], r["tool"]), []).append(r["wall_s"])
    return {k: statistics.median(v) for k, v in by.items()}


def report(recs: list[dict], tools: list[str], args: argparse.Namespace) -> str:
    """The markdown section: a table per workload and the two targets."""
    med = medians(recs)
    section = SECTION_SHARED if args.root == SHARED else SECTION
    where = f"{args.root} (local disk)"
    title = "## W8: values handed between tasks (bench/values.py)"
    if args.root == SHARED:
        where = (
            "the test cluster's GlusterFS volume through its FUSE client (a site's shared "
            "file system, where a pipeline's files go between nodes: the files form writes "
            "its .npy files there, hpcflow its run directory)"
        )
        title = "## W8 on a shared file system (bench/values.py --root shared)"
    out = [
        f"<!-- section:{section} -->",
        title,
        "",
        f"Two slots on each tool, work directories on {where}, median of "
        f"{args.reps} run(s), each a fresh process timed end to end. chain: 10 tasks "
        "handing on a 256 MiB float64 array (9 hand-overs); gather: 200 tasks of 1 MiB "
        "received by one reduce. Every run's last value is checked.",
        "",
    ]
    for w in WORKLOADS:
        out += [
            f"### W8 {w}",
            "",
            "| tool | how | wall s | vs Dask | files / tool |",
            "|---|---|---:|---:|---:|",
        ]
        dask, files = med.get((w, "dask")), med.get((w, "files"))
        for tool in tools:
            failed = [
                r["error"]
                for r in recs
                if r["workload"] == w and r["tool"] == tool and "error" in r
            ]
            wall = med.get((w, tool))
            if wall is None and failed and all(f == "timed out" for f in failed):
                cap = f"{args.timeout:g}"
                of_dask = f"> {args.timeout / dask:.1f}x" if dask else ""
                out.append(f"| {tool} | {DESC[tool]} | > {cap} (its cap) | {of_dask} | |")
                continue
            if wall is None:
                why = failed[0][:80].replace("\n", " ").replace("|", "/") if failed else "not run"
                out.append(f"| {tool} | {DESC[tool]} | failed: {why} | | |")
                continue
            of_dask = f"{wall / dask:.2f}x" if dask else ""
            over_files = f"{files / wall:.2f}x" if files else ""
            note = f" ({len(failed)} failed)" if failed else ""
            out.append(f"| {tool} | {DESC[tool]} | {wall:.2f}{note} | {of_dask} | {over_files} |")
        out.append("")
    out += ["Targets (hpcflow in memory):", ""]
    for w in WORKLOADS:
        hpc, dask, files = (med.get((w, k)) for k in ("hpcflow", "dask", "files"))
        if hpc and dask:
            ok = "met" if hpc / dask <= TARGET_OF_DASK else "NOT met"
            out.append(
                f"- {w}: within {TARGET_OF_DASK}x of plain Dask futures: {hpc / dask:.2f}x, {ok}"
            )
        if hpc and files:
            ok = "met" if files / hpc >= TARGET_OVER_FILES else "NOT met"
            ratio = files / hpc
            out.append(
                f"- {w}: at least {TARGET_OVER_FILES:g}x faster than files: {ratio:.2f}x, {ok}"
            )
        floor = med.get((w, "inline"))
        if files and floor:
            goal = files / TARGET_OVER_FILES
            reach = (
                "below the floor: no tool can reach it here" if goal < floor else "above the floor"
            )
            out.append(
                f"- {w}: {TARGET_OVER_FILES:g}x faster than files is {goal:.2f} s; the work "
                f"alone in one process (inline) takes {floor:.2f} s, so that goal is {reach}"
            )
    out += ["", f"<!-- /section:{section} -->", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--only", default=",".join(WORKLOADS), help="chain,gather")
    ap.add_argument("--timeout", type=float, default=300.0, help="cap per run, s")
    ap.add_argument(
        "--root",
        default="/var/tmp",
        help="where the work directories go; 'shared': on the test cluster's GlusterFS volume",
    )
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"))
    ap.add_argument("--jsonl", default=str(HERE / "results.jsonl"))
    ap.add_argument("--peers-python", default=str(HERE / ".venv-peers" / "bin" / "python"))
    ap.add_argument("--keep", action="store_true", help="keep the work directories")
    args = ap.parse_args(argv)
    tools = [t for t in args.tools.split(",") if t]
    workloads = [w for w in args.only.split(",") if w]
    if set(tools) - set(TOOLS) or set(workloads) - set(WORKLOADS):
        ap.error(f"--tools takes some of {TOOLS}, --only some of {WORKLOADS}")
    if "parsl" in tools and not os.path.exists(args.peers_python):
        print("bench W8: no Parsl (run bash bench/setup.sh); left out", file=sys.stderr)
        tools.remove("parsl")
    cluster = None
    if args.root == SHARED:
        sys.path.insert(0, str(REPO))
        from tests.slurm_cluster import start_cluster

        cluster = start_cluster(nodes=1, gpus=0)  # only its volume is used
        root = Path(cluster.mkdtemp())
    else:
        root = Path(tempfile.mkdtemp(prefix="hpcflow-w8-", dir=args.root))
    recs: list[dict] = []
    try:
        for rep in range(args.reps):
            for w in workloads:
                k = rep % len(tools)
                for tool in tools[k:] + tools[:k]:
                    rec = measure(tool, w, root, args) | {"rep": rep, "bench": "W8"}
                    recs.append(rec)
                    with open(args.jsonl, "a") as fh:
                        fh.write(json.dumps(rec) + "\n")
                    status = rec.get("error", "ok")
                    print(
                        f"W8 {w:<6} {tool:<16} rep {rep}: {rec['wall_s']:7.2f} s  {status}",
                        file=sys.stderr,
                        flush=True,
                    )
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if cluster is not None:
            cluster.stop()
    text = report(recs, tools, args)
    write_section(Path(args.out), text, SECTION_SHARED if args.root == SHARED else SECTION)
    print(text)
    return 0 if all("error" not in r for r in recs) else 1


if __name__ == "__main__":
    sys.exit(main())
