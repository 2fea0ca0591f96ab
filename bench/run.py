#!/usr/bin/env python3
"""hpcflow benchmark: hpcflow vs. the no-tool floor, Snakemake and Parsl.

One invocation measures every tool side by side, round-robin across
repetitions. Each measurement is a fresh child process, timed end to end
(interpreter start-up included), in a fresh temporary directory; the outputs
are verified afterwards. See bench/README.md.

    bash bench/setup.sh && .venv/bin/python bench/run.py
    .venv/bin/python bench/run.py --quick          # smoke check, N=200
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from measure import Measurement, run_measured  # noqa: E402
from workloads import W2_LAYERS, Workload, hpcflow_yaml, snakefile  # noqa: E402

TOOLS = ["floor", "hpcflow", "snakemake", "snakemake_greedy", "parsl_htex"]
PEERS = ["snakemake", "snakemake_greedy", "parsl_htex"]
TOOL_DESC = {
    "floor": "no tool: Python ThreadPool(2) of subprocess.run(['bash','-c',cmd]), "
    "DAG-aware (reference floor)",
    "hpcflow": "hpcflow run workflow.yaml --threads 2 --quiet",
    "snakemake": "snakemake --cores 2 -q (default scheduler: ilp)",
    "snakemake_greedy": "snakemake --cores 2 -q --scheduler greedy",
    "parsl_htex": "Parsl bash_app, HighThroughputExecutor + LocalProvider, 2 workers",
}
SLOTS = 2

# Issue targets, checked on W1 at this N.
TARGET_N = 5000
TARGET_FLOOR_RATIO = 1.5
TARGET_SPEEDUP = {"snakemake": 10.0, "parsl_htex": 2.0}


# ---------------------------------------------------------------------------
# Command lines
# ---------------------------------------------------------------------------


class Setup:
    def __init__(self, args: argparse.Namespace) -> None:
        self.python = sys.executable
        self.hpcflow = args.hpcflow
        self.peers = args.peers_venv
        self.peers_bin = os.path.join(self.peers, "bin")
        base = dict(os.environ)
        base.pop("PYTHONPATH", None)
        base.pop("PYTHONHOME", None)
        self.env_project = dict(base)
        proj_bin = os.path.dirname(self.hpcflow)
        self.env_project["PATH"] = proj_bin + os.pathsep + base.get("PATH", "")
        self.env_peers = dict(base)
        # like an activated venv: Parsl launches interchange.py and
        # process_worker_pool.py by name from PATH
        self.env_peers["PATH"] = self.peers_bin + os.pathsep + base.get("PATH", "")
        self.env_peers["VIRTUAL_ENV"] = self.peers

    def prepare(self, tool: str, w: Workload, workdir: str) -> tuple[list[str], dict[str, str]]:
        """Write the tool's input files into workdir; return argv and env."""
        if tool == "floor":
            return (
                [self.python, os.path.join(HERE, "child_floor.py"), w.key, str(w.n)],
                self.env_project,
            )
        if tool == "hpcflow":
            with open(os.path.join(workdir, "workflow.yaml"), "w") as fh:
                fh.write(hpcflow_yaml(w))
            return (
                [self.hpcflow, "run", "workflow.yaml", "--threads", str(SLOTS), "--quiet"],
                self.env_project,
            )
        if tool in ("snakemake", "snakemake_greedy"):
            with open(os.path.join(workdir, "Snakefile"), "w") as fh:
                fh.write(snakefile(w))
            argv = [os.path.join(self.peers_bin, "snakemake"), "--cores", str(SLOTS), "-q"]
            if tool == "snakemake_greedy":
                argv += ["--scheduler", "greedy"]
            return argv, self.env_peers
        if tool == "parsl_htex":
            return (
                [
                    os.path.join(self.peers_bin, "python"),
                    os.path.join(HERE, "child_parsl.py"),
                    w.key,
                    str(w.n),
                ],
                self.env_peers,
            )
        raise ValueError(tool)


# ---------------------------------------------------------------------------
# Bounded numbers: a timed-out run only gives a lower bound on its wall time
# ---------------------------------------------------------------------------


class Bound:
    """A value that is exact ('='), a lower bound ('>') or an upper bound
    ('<'), or unknown (value None)."""

    def __init__(self, value: float | None, kind: str = "=") -> None:
        self.value = value
        self.kind = kind if value is not None else "?"

    def __truediv__(self, other: Bound) -> Bound:
        if self.value is None or other.value is None or other.value == 0:
            return Bound(None)
        v = self.value / other.value
        kinds = {self.kind, "inv" + other.kind}
        if kinds == {"=", "inv="}:
            return Bound(v, "=")
        if kinds <= {"=", ">", "inv=", "inv<"}:
            return Bound(v, ">")
        if kinds <= {"=", "<", "inv=", "inv>"}:
            return Bound(v, "<")
        return Bound(None)

    def fmt(self, unit: str = "", digits: int = 3) -> str:
        if self.value is None:
            return "–"
        s = f"{_num(self.value)}{unit}"
        return s if self.kind == "=" else f"{self.kind} {s}"


def _num(v: float, digits: int = 3) -> str:
    a = abs(v)
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    if a >= 0.01:
        return f"{v:.2f}"
    return f"{v:.2g}"


def _rel(path: str) -> str:
    path = os.path.abspath(path)
    return os.path.relpath(path, ROOT) if path.startswith(ROOT + os.sep) else path


def summarize(records: list[dict]) -> dict:
    """Median wall time over successful and timed-out runs of one tool."""
    ok = [r for r in records if r["status"] == "ok"]
    to = [r for r in records if r["status"] == "timeout"]
    vals = sorted([(r["wall_s"], False) for r in ok] + [(r["wall_s"], True) for r in to])
    out: dict[str, Any] = {
        "runs": len(records),
        "ok": len(ok),
        "timeouts": len(to),
        "failed": len(records) - len(ok) - len(to),
    }
    if not vals:
        out["median"] = Bound(None)
        out["min"] = Bound(None)
    else:
        k = len(vals)
        mid = vals[(k - 1) // 2 : k // 2 + 1]
        med = sum(v for v, _ in mid) / len(mid)
        out["median"] = Bound(med, ">" if any(t for _, t in mid) else "=")
        out["min"] = Bound(vals[0][0], ">" if vals[0][1] else "=")
    rss = [r["peak_rss_mb"] for r in ok + to if r.get("peak_rss_mb")]
    out["rss"] = statistics.median(rss) if rss else None
    cpu = [r["cpu_s"] for r in ok if r.get("cpu_s") is not None]
    out["cpu"] = statistics.median(cpu) if cpu else None
    out["timeout_done"] = [(r["done"], r["expected"], r["wall_s"]) for r in to]
    out["errors"] = [r for r in records if r["status"] not in ("ok", "timeout")]
    return out


def wall_text(s: dict) -> str:
    med: Bound = s["median"]
    if med.value is None:
        return "failed"
    if med.kind == ">":
        done = ", ".join(f"{d}/{e}" for d, e, _ in s["timeout_done"])
        return f"> {_num(med.value)} s (timed out, {done} done)"
    return f"{_num(med.value)}"


# ---------------------------------------------------------------------------
# Environment facts
# ---------------------------------------------------------------------------


def _pkg_versions(python: str, pkgs: list[str]) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json, sys, platform\n"
        "out = {'python': platform.python_version()}\n"
        "for p in sys.argv[1:]:\n"
        "    try: out[p] = m.version(p)\n"
        "    except Exception: pass\n"
        "print(json.dumps(out))\n"
    )
    try:
        res = subprocess.run(
            [python, "-c", code, *pkgs], capture_output=True, text=True, timeout=60
        )
        return json.loads(res.stdout)
    except Exception:  # noqa: BLE001 - missing venv etc.
        return {}


def environment(setup: Setup) -> dict[str, str]:
    proj = _pkg_versions(sys.executable, ["hpcflow", "dask", "distributed", "psutil", "PyYAML"])
    peers_py = os.path.join(setup.peers_bin, "python")
    peers = (
        _pkg_versions(peers_py, ["snakemake", "parsl", "dask", "psutil", "pulp", "pyzmq"])
        if os.path.exists(peers_py)
        else {}
    )
    hv = proj.get("hpcflow")
    if not hv and os.path.exists(setup.hpcflow):
        try:
            res = subprocess.run(
                [setup.hpcflow, "--version"],
                capture_output=True,
                text=True,
                timeout=60,
                env=setup.env_project,
            )
            hv = (res.stdout or res.stderr).strip().splitlines()[-1] or None
        except Exception:  # noqa: BLE001
            hv = None
    mem_gib = "?"
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    mem_gib = f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    try:
        bash = subprocess.run(
            ["bash", "--version"], capture_output=True, text=True
        ).stdout.splitlines()[0]
    except Exception:  # noqa: BLE001
        bash = "?"
    dask = proj.get("dask") or peers.get("dask")
    return {
        "host": f"{platform.system()} {platform.release()} {platform.machine()}",
        "nproc": str(os.cpu_count()),
        "memory": mem_gib,
        "python": f"{platform.python_version()} ({sys.executable})",
        "python (peers venv)": peers.get("python", "missing: run bash bench/setup.sh"),
        "hpcflow": (hv or "not installed") + f" (CLI: {_rel(setup.hpcflow)})",
        "snakemake": peers.get("snakemake", "not installed"),
        "parsl": peers.get("parsl", "not installed"),
        "dask": (f"{dask} (not benchmarked)" if dask else "not installed"),
        "psutil": proj.get("psutil") or peers.get("psutil", "?"),
        "bash": bash,
    }


# ---------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------


def one_run(
    setup: Setup,
    tool: str,
    w: Workload,
    rep: int,
    order: int,
    args: argparse.Namespace,
    run_id: str,
) -> dict:
    root = tempfile.mkdtemp(prefix=f"hpcflow-bench-{tool}-", dir=args.tmpdir)
    workdir = os.path.join(root, "work")
    logdir = os.path.join(root, "log")
    os.makedirs(workdir)
    os.makedirs(logdir)
    tasks = w.tasks()
    load_before = os.getloadavg()[0]
    argv: list[str] = []
    try:
        argv, env = setup.prepare(tool, w, workdir)
        if not os.path.exists(argv[0]):
            hint = (
                "the hpcflow CLI is not installed (pip install -e . in the project venv)"
                if tool == "hpcflow"
                else "peers venv missing: run bash bench/setup.sh"
            )
            m = Measurement(argv=argv, launch_error=f"{argv[0]} not found: {hint}")
        else:
            m = run_measured(argv, workdir, env, args.timeout, logdir)
        done = _count(tasks, workdir)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    expected = len(tasks)
    if m.launch_error:
        status, error = "failed", m.launch_error
    elif m.timed_out:
        status, error = "timeout", f"killed after {m.wall_s:.0f} s (cap {args.timeout:g} s)"
    elif m.rc != 0:
        status, error = "failed", f"exit code {m.rc}"
    elif done != expected:
        status, error = "failed", f"only {done}/{expected} outputs correct"
    else:
        status, error = "ok", ""
    rec = {
        "run_id": run_id,
        "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "workload": w.key,
        "n": w.n,
        "width": w.width if w.key == "W2" else None,
        "label": w.label,
        "ntasks": expected,
        "tool": tool,
        "rep": rep,
        "order": order,
        "status": status,
        "ok": status == "ok",
        "wall_s": round(m.wall_s, 4),
        "cpu_s": round(m.cpu_s, 3),
        "rc": m.rc,
        "done": done,
        "expected": expected,
        "peak_rss_mb": round(m.peak_rss_mb, 1),
        "peak_procs": m.peak_procs,
        "rss_samples": m.samples,
        "leftover_procs_killed": m.leftover_procs,
        "loadavg_before": round(load_before, 2),
        "timeout_s": args.timeout,
        "argv": [os.path.basename(a) if os.path.isabs(a) else a for a in argv],
        "error": error,
    }
    if status != "ok":
        rec["stderr_tail"] = m.stderr_tail[-800:]
        rec["stdout_tail"] = m.stdout_tail[-400:]
    return rec


def _count(tasks, workdir: str) -> int:
    from workloads import count_done

    return count_done(tasks, workdir)


def rotate(seq: list[str], k: int) -> list[str]:
    if not seq:
        return seq
    k %= len(seq)
    return seq[k:] + seq[:k]


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------


def table(w: Workload, recs: list[dict], tools: list[str]) -> tuple[str, dict[str, dict]]:
    stats = {t: summarize([r for r in recs if r["tool"] == t]) for t in tools}
    floor = stats.get("floor", {}).get("median", Bound(None))
    hpc = stats.get("hpcflow", {}).get("median", Bound(None))
    head = (
        "| tool | ok/runs | wall median s | wall min s | tasks/s | ratio to floor "
        "| hpcflow speed-up (peer / hpcflow) | peak RSS MB (tree) | CPU s |"
    )
    lines = [head, "|" + "---|" * 9]
    for t in tools:
        s = stats[t]
        med: Bound = s["median"]
        tps = Bound(float(w.ntasks)) / med if med.value else Bound(None)
        ratio = med / floor if "floor" in stats else Bound(None)
        sp = (med / hpc).fmt("x") if t in PEERS and "hpcflow" in stats else ""
        if med.value is None:
            ratio_s = "–"
        else:
            ratio_s = ratio.fmt("x")
        lines.append(
            f"| {t} | {s['ok']}/{s['runs']} | {wall_text(s)} | {s['min'].fmt()} "
            f"| {tps.fmt(digits=3)} | {ratio_s} | {sp} "
            f"| {_num(s['rss']) if s['rss'] else '–'} "
            f"| {_num(s['cpu']) if s['cpu'] is not None else '–'} |"
        )
    return "\n".join(lines), stats


def targets(all_stats: dict[str, dict[str, dict]], w1_ns: list[int]) -> list[str]:
    key = f"W1 N={TARGET_N}"
    out = []
    if key not in all_stats:
        measured = [n for n in w1_ns if f"W1 N={n}" in all_stats]
        big = max(measured) if measured else None
        out.append(
            f"- N = {TARGET_N} was not measured in this run: targets "
            "NOT CHECKED" + (f" (indicative check at N = {big} below)" if big else "")
        )
        if not big:
            return out
        key = f"W1 N={big}"
        prefix = f"(indicative, N = {big}) "
    else:
        prefix = ""
    st = all_stats[key]

    def med(t: str) -> Bound:
        return st[t]["median"] if t in st else Bound(None)

    hpc, floor = med("hpcflow"), med("floor")
    # 1. hpcflow <= 1.5x floor
    r = hpc / floor
    if "hpcflow" not in st or "floor" not in st:
        v = "NOT MEASURED"
    elif hpc.value is None:
        v = "FAIL (hpcflow failed)"
    elif r.value is None:
        v = "NOT DECIDED"
    elif r.kind in ("=", "<") and r.value <= TARGET_FLOOR_RATIO:
        v = "PASS"
    elif r.kind in ("=", ">") and r.value > TARGET_FLOOR_RATIO:
        v = "FAIL"
    else:
        v = "NOT DECIDED"
    out.append(f"- {prefix}hpcflow ≤ {TARGET_FLOOR_RATIO}× floor: measured {r.fmt('x')} → **{v}**")
    # 2./3. speed-ups
    for peer, need in TARGET_SPEEDUP.items():
        sp = med(peer) / hpc
        if "hpcflow" not in st or peer not in st:
            v = "NOT MEASURED"
        elif hpc.value is None:
            v = "FAIL (hpcflow failed)"
        elif med(peer).value is None:
            v = f"NOT DECIDED ({peer} failed)"
        elif sp.value is None:
            v = "NOT DECIDED"
        elif sp.kind in ("=", ">") and sp.value >= need:
            v = "PASS"
        elif sp.kind in ("=", "<") and sp.value < need:
            v = "FAIL"
        else:
            v = "NOT DECIDED"
        label = "snakemake (default scheduler)" if peer == "snakemake" else peer
        out.append(
            f"- {prefix}hpcflow ≥ {need:g}× faster than {label}: measured {sp.fmt('x')} → **{v}**"
        )
    return out


def command_line() -> str:
    py = (
        os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(ROOT) else sys.executable
    )
    script = os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)
    return shlex.join([py, script, *sys.argv[1:]])


def report(
    args, env_info, load_before, started, took, workloads, tools, recs, cmd, partial=None
) -> tuple[str, str]:
    """Return (markdown, console text)."""
    md = ["# hpcflow benchmark results", ""]
    if partial:
        md += [
            f"**PARTIAL: {partial[0]} of {partial[1]} measurements done "
            "(run still going or interrupted).**",
            "",
        ]
    md += [
        f"Generated by `bench/run.py` (run `{recs[0]['run_id'] if recs else '-'}`)."
        " Reproduce from the repository root with:",
        "",
        "```",
        "bash bench/setup.sh",
        cmd,
        "```",
        "",
        "## Machine and versions",
        "",
        "```",
        f"{'date:':<21}{started}",
        f"{'took:':<21}{took / 60:.1f} min",
    ]
    for k, v in env_info.items():
        md.append(f"{k + ':':<21}{v}")
    md.append(
        f"{'loadavg:':<21}{load_before[0]:.2f} {load_before[1]:.2f} "
        f"{load_before[2]:.2f} (1/5/15 min, before the runs)"
    )
    md += [
        "```",
        "",
        "## Method",
        "",
        f"- Every measurement is one fresh child process timed end to end "
        f"(interpreter start-up, imports, executor start/stop, all tasks) in "
        f"a fresh temporary directory; {args.reps} repetition(s), tools in "
        f"rotating (round-robin) order each repetition. Time-out per "
        f"measurement: {args.timeout:g} s; a timed-out run counts as a lower "
        f"bound (`>`), and so do ratios derived from it.",
        "- After each run every expected output file is checked (exists, "
        "right content); a run with a missing or wrong output is failed.",
        "- `ratio to floor` = median wall / median wall of `floor` in this "
        "run; `hpcflow speed-up` = peer median wall / hpcflow median wall; "
        "`tasks/s` = tasks / median wall.",
        "- `peak RSS` = max over 0.2 s psutil samples of the summed RSS of "
        "the run's process tree (its session, descendants, and processes "
        "in its work directory); `CPU s` = user+sys of the processes reaped "
        "within the tree (daemonised processes such as Parsl's worker pool "
        "are not included, so Parsl's figure is an undercount).",
        "- The machine is small and shared: trust ratios within one run, not absolute seconds.",
        "",
        "Tools:",
        "",
    ]
    for t in tools:
        md.append(f"- `{t}`: {TOOL_DESC[t]}")
    md.append("")
    console = []
    all_stats: dict[str, dict[str, dict]] = {}
    for w in workloads:
        wrecs = [r for r in recs if r["label"] == w.label]
        if not wrecs:
            continue
        tbl, stats = table(w, wrecs, tools)
        all_stats[w.label] = stats
        md += [f"## {w.label}: {w.describe()}", "", tbl, ""]
        console += [f"\n{w.label}: {w.describe()}", tbl]
    tg = targets(all_stats, [w.n for w in workloads if w.key == "W1"])
    md += ["## Issue targets (W1, N = 5000)", ""] + tg + [""]
    console += ["\nIssue targets (W1, N = 5000):"] + tg
    errs = [r for r in recs if r["status"] != "ok"]
    md += ["## Errors, time-outs, failed checks", ""]
    if not errs:
        md.append("- none")
    for r in errs:
        tail = (r.get("stderr_tail") or r.get("stdout_tail") or "").strip()
        tail = tail.splitlines()[-6:] if tail else []
        md.append(
            f"- {r['label']} {r['tool']} rep {r['rep']}: {r['status']}: "
            f"{r['error']}; {r['done']}/{r['expected']} outputs done"
        )
        if tail and r["status"] == "failed":
            md += ["  ```"] + [f"  {x}" for x in tail] + ["  ```"]
    md.append("")
    return "\n".join(md), "\n".join(console)


# ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", default="1000,5000", help="W1 sizes (default 1000,5000)")
    ap.add_argument(
        "--layers", type=int, default=W2_LAYERS, help=f"W2 layers of 20 tasks (default {W2_LAYERS})"
    )
    ap.add_argument("--only", default="W1,W2", help="workloads (default W1,W2)")
    ap.add_argument("--tools", default=",".join(TOOLS), help=f"tools (default {','.join(TOOLS)})")
    ap.add_argument("--reps", type=int, default=1, help="repetitions (default 1)")
    ap.add_argument(
        "--timeout", type=float, default=300.0, help="seconds per measurement (default 300)"
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="smoke check: W1 N=200 and W2 10x20 only; report goes "
        "to bench/RESULTS-quick.md unless --out is given",
    )
    ap.add_argument("--out", default=None, help="markdown report (default bench/RESULTS.md)")
    ap.add_argument(
        "--jsonl",
        default=os.path.join(HERE, "results.jsonl"),
        help="raw results appended here (default bench/results.jsonl)",
    )
    ap.add_argument(
        "--hpcflow",
        default=os.path.join(ROOT, ".venv", "bin", "hpcflow"),
        help="hpcflow CLI (default .venv/bin/hpcflow)",
    )
    ap.add_argument("--peers-venv", default=os.path.join(HERE, ".venv-peers"))
    ap.add_argument("--tmpdir", default=None, help="where the work directories go")
    ap.add_argument("--keep", action="store_true", help="keep the work directories")
    args = ap.parse_args(argv)

    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    bad = [t for t in tools if t not in TOOLS]
    if bad:
        ap.error(f"unknown tool(s) {bad}; choose from {TOOLS}")
    only = {x.strip().upper() for x in args.only.split(",") if x.strip()}
    if only - {"W1", "W2"}:
        ap.error("--only takes W1 and/or W2")
    if args.quick:
        ns, layers = [200], 10
    else:
        ns, layers = [int(x) for x in args.n.split(",") if x.strip()], args.layers
    if args.out is None:
        args.out = os.path.join(HERE, "RESULTS-quick.md" if args.quick else "RESULTS.md")
    workloads: list[Workload] = []
    if "W1" in only:
        workloads += [Workload("W1", n) for n in ns]
    if "W2" in only:
        workloads.append(Workload("W2", layers))

    if not workloads or not tools:
        ap.error("nothing to run")
    setup = Setup(args)
    cmd = command_line()
    run_id = _dt.datetime.now().strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    env_info = environment(setup)
    load_before = os.getloadavg()
    print(
        f"bench: run {run_id}; {len(workloads)} workload(s) x {len(tools)} tool(s) "
        f"x {args.reps} rep(s); loadavg {load_before[0]:.2f}; timeout "
        f"{args.timeout:g} s",
        file=sys.stderr,
    )
    t_start = time.perf_counter()
    recs: list[dict] = []
    total = len(workloads) * len(tools) * args.reps
    k = 0
    os.makedirs(os.path.dirname(os.path.abspath(args.jsonl)), exist_ok=True)
    for rep in range(args.reps):
        for wi, w in enumerate(workloads):
            for order, tool in enumerate(rotate(tools, rep + wi)):
                k += 1
                rec = one_run(setup, tool, w, rep, order, args, run_id)
                rec["quick"] = args.quick
                recs.append(rec)
                with open(args.jsonl, "a") as fh:
                    fh.write(json.dumps(rec) + "\n")
                msg = (
                    f"[{k}/{total}] {w.label:<12} {tool:<17} rep {rep}: "
                    f"{rec['wall_s']:8.2f} s  {rec['status']}"
                )
                if rec["status"] != "ok":
                    msg += f" ({rec['error']})"
                    tail = (rec.get("stderr_tail") or "").strip().splitlines()
                    if tail and rec["status"] == "failed":
                        msg += "\n      " + "\n      ".join(tail[-3:])
                print(msg, file=sys.stderr, flush=True)
                # keep the report current, so an interrupted run leaves one
                md, console = report(
                    args,
                    env_info,
                    load_before,
                    started,
                    time.perf_counter() - t_start,
                    workloads,
                    tools,
                    recs,
                    cmd,
                    partial=(k, total) if k < total else None,
                )
                with open(args.out, "w") as fh:
                    fh.write(md + _kept_sections(args.out))
    print(console)
    print(f"\nwrote {_rel(args.out)}; raw results appended to {_rel(args.jsonl)}")
    return 0


def _kept_sections(path: str) -> str:
    """Sections other benchmarks own (e.g. bench/pilot.py), kept across rewrites."""
    try:
        with open(path) as fh:
            old = fh.read()
    except OSError:
        return ""
    start = old.find("<!-- section:")
    return "\n" + old[start:] if start >= 0 else ""


if __name__ == "__main__":
    sys.exit(main())
