#!/usr/bin/env python3
"""hpcflow benchmark: hpcflow vs. the no-tool floor, Snakemake, Parsl, Dask and HyperQueue.

One invocation measures every tool side by side, round-robin across
repetitions. Each measurement is a fresh child process, timed end to end
(interpreter start-up included), in a fresh temporary directory; the outputs
are verified afterwards. W1-W6 are measured here, W7 (pilot mode on the local
test SLURM) by bench/pilot.py and W8 (values handed between tasks) by bench/values.py,
both started from here. See bench/README.md.

    bash bench/setup.sh && .venv/bin/python bench/run.py
    .venv/bin/python bench/run.py --quick          # smoke check, about a minute
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
from workloads import (  # noqa: E402
    W2_LAYERS,
    W3_MODULE,
    W3_SOURCE,
    Workload,
    hpcflow_yaml,
    snakefile,
)

TOOLS = ["floor", "hpcflow", "snakemake", "snakemake_greedy", "parsl_htex", "dask", "hyperqueue"]
PEERS = ["snakemake", "snakemake_greedy", "parsl_htex", "dask", "hyperqueue"]
#: The tools each workload is measured with (``--tools`` narrows these).
TOOLS_FOR = {
    "W1": ["floor", "hpcflow", "snakemake", "snakemake_greedy", "parsl_htex", "hyperqueue"],
    "W2": ["floor", "hpcflow", "snakemake", "snakemake_greedy", "parsl_htex", "hyperqueue"],
    "W3": ["floor", "hpcflow", "parsl_htex", "dask", "hyperqueue"],
    "W4": ["floor", "hpcflow", "snakemake"],
    "W5": ["hpcflow", "snakemake"],
    "W6": ["hpcflow", "snakemake"],
}
#: Above this W1 size Snakemake's greedy scheduler is left out unless --tools names it
#: (it needs far longer than any cap; the default scheduler decides the target).
GREEDY_MAX_N = 5000
TOOL_DESC = {
    "floor": "no tool: Python ThreadPool(2) of subprocess.run(['bash','-c',cmd]), "
    "DAG-aware (reference floor)",
    "hpcflow": "hpcflow run workflow.yaml --threads 2 --quiet",
    "snakemake": "snakemake --cores 2 -q (default scheduler: ilp)",
    "snakemake_greedy": "snakemake --cores 2 -q --scheduler greedy",
    "parsl_htex": "Parsl bash_app, HighThroughputExecutor + LocalProvider, 2 workers",
    "dask": "not used for shell tasks",
    "hyperqueue": "HyperQueue Python API (bench/child_hq.py): LocalCluster, server and one "
    "2-core worker in the child; one job of `bash -c CMD` program tasks (1 CPU each; W2's "
    "edges as task dependencies), stdout/stderr not kept",
}
TOOL_DESC_FOR = {
    "W3": {
        "floor": "no tool: ProcessPoolExecutor(2), one submit per call (reference floor)",
        "hpcflow": "hpcflow run workflow.yaml --threads 2 --quiet; one task with "
        "`python: w3mod:inc` and `foreach: {x: {range: [0, N]}}`",
        "parsl_htex": "Parsl python_app, HighThroughputExecutor + LocalProvider, 2 workers",
        "dask": "plain Dask: client.map(inc, range(N)) + gather, LocalCluster(2 worker "
        "processes x 1 thread)",
        "hyperqueue": "HyperQueue Python API: job.function(inc, args=(x,)) per call on a "
        "LocalCluster with one 2-core worker; each task is a fresh Python process; HQ keeps "
        "no return value, so inc prints it and the sum of the tasks' stdout files is checked",
    },
    "W4": {
        "floor": "no tool: os.path.exists over the N outputs",
        "hpcflow": "hpcflow run workflow.yaml --threads 2 --quiet, a second time, after a "
        "complete first run (not timed)",
        "snakemake": "snakemake --cores 2 -q in a directory where all N outputs exist "
        "(written before the clock starts; Snakemake has no metadata for them)",
    },
    "W5": {
        "hpcflow": "hpcflow run workflow.yaml --dry-run",
        "snakemake": "snakemake -n --cores 2 -q (dry run: parse + DAG, nothing runs)",
    },
}
TOOL_DESC_FOR["W6"] = TOOL_DESC_FOR["W5"]
SLOTS = 2
#: Tools driven by a child script of bench/: (script, run with the peers venv's python).
CHILD_SCRIPTS = {
    "floor": ("child_floor.py", False),
    "dask": ("child_dask.py", False),
    "parsl_htex": ("child_parsl.py", True),
    "hyperqueue": ("child_hq.py", True),
}

# Issue targets.
#: hpcflow ≤ this × the floor (W4: issue 22, the resume of an up-to-date run).
TARGET_FLOOR_RATIO = {"W1": 1.5, "W2": 2.0, "W4": 3.0}
TARGET_SPEEDUP = {"snakemake": 20.0, "parsl_htex": 5.0}
TARGET_W3_TPS = 3000.0
TARGET_W4_S = 1.0
TARGET_PLAN = {"W5": (5.0, 500.0), "W6": (60.0, 4096.0)}  # seconds, MB peak RSS
#: A W1 peer's cap: enough to decide its speed-up target, at most --timeout.
CAP_MARGIN = 1.25
CAP_MIN = 30.0


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
        # hpcflow is measured as installed, its modules compiled once (pip does it at
        # install): with PYTHONDONTWRITEBYTECODE set, every module edited since its .pyc
        # was written would be compiled again at each start (tens of ms, more than a W4).
        self.env_project.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", os.path.join(ROOT, "hpcflow")],
            stdout=subprocess.DEVNULL,
            check=False,
        )
        proj_bin = os.path.dirname(self.hpcflow)
        self.env_project["PATH"] = proj_bin + os.pathsep + base.get("PATH", "")
        self.env_peers = dict(base)
        # like an activated venv: Parsl launches interchange.py and
        # process_worker_pool.py by name from PATH
        self.env_peers["PATH"] = self.peers_bin + os.pathsep + base.get("PATH", "")
        self.env_peers["VIRTUAL_ENV"] = self.peers

    def prepare(
        self, tool: str, w: Workload, workdir: str, timeout: float
    ) -> tuple[list[str], dict[str, str]]:
        """Write the tool's input files into workdir, do the untimed first run W4
        needs; return the argv and env to measure."""
        if w.key == "W4":
            return self._prepare_w4(tool, w, workdir, timeout)
        if w.key in ("W5", "W6"):
            if tool == "hpcflow":
                with open(os.path.join(workdir, "workflow.yaml"), "w") as fh:
                    fh.write(hpcflow_yaml(w))
                return [self.hpcflow, "run", "workflow.yaml", "--dry-run"], self.env_project
            with open(os.path.join(workdir, "Snakefile"), "w") as fh:
                fh.write(snakefile(w))
            return (
                [os.path.join(self.peers_bin, "snakemake"), "-n", "--cores", str(SLOTS), "-q"],
                self.env_peers,
            )
        if w.key == "W3" and tool == "hpcflow":
            with open(os.path.join(workdir, W3_MODULE + ".py"), "w") as fh:
                fh.write(W3_SOURCE)
        if tool in CHILD_SCRIPTS:
            return self.child(tool, w)
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
        raise ValueError(tool)

    def child(self, tool: str, w: Workload) -> tuple[list[str], dict[str, str]]:
        """The argv and env of a tool that a child script of bench/ drives."""
        script, peers = CHILD_SCRIPTS[tool]
        python = os.path.join(self.peers_bin, "python") if peers else self.python
        argv = [python, os.path.join(HERE, script), w.key, str(w.n)]
        return argv, self.env_peers if peers else self.env_project

    def _prepare_w4(
        self, tool: str, w: Workload, workdir: str, timeout: float
    ) -> tuple[list[str], dict[str, str]]:
        if tool == "hpcflow":
            with open(os.path.join(workdir, "workflow.yaml"), "w") as fh:
                fh.write(hpcflow_yaml(w))
            argv = [self.hpcflow, "run", "workflow.yaml", "--threads", str(SLOTS), "--quiet"]
            first = subprocess.run(
                argv,
                cwd=workdir,
                env=self.env_project,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
            if first.returncode != 0:
                raise RuntimeError(f"W4 first run failed: {first.stderr[-400:]}")
            return argv, self.env_project
        for t in w.tasks():
            with open(os.path.join(workdir, t.output), "w") as fh:
                fh.write(t.content)
        if tool == "floor":
            return self.child(tool, w)
        if tool == "snakemake":
            with open(os.path.join(workdir, "Snakefile"), "w") as fh:
                fh.write(snakefile(w))
            argv = [os.path.join(self.peers_bin, "snakemake"), "--cores", str(SLOTS), "-q"]
            return argv, self.env_peers
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
    for key, field_ in (("main_rss", "main_maxrss_mb"), ("rest_rss", "rest_peak_rss_mb")):
        vals_ = [r[field_] for r in ok + to if r.get(field_)]
        out[key] = statistics.median(vals_) if vals_ else None
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


#: Free space a RAM-backed folder needs to hold every tool's work directories.
TMPFS_MIN_FREE = 4 * 2**30


def filesystem_of(path: str) -> str:
    """The type of the file system ``path`` is on (``tmpfs``, ``ext4``, ...), from
    /proc/mounts: the longest mount point above it."""
    real = os.path.realpath(path)
    best, kind = "", "?"
    try:
        with open("/proc/mounts") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = fields[1].replace("\\040", " ")
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    best, kind = point, fields[2]
    except OSError:
        pass
    return kind


def default_workdir_root() -> str | None:
    """Where work directories go unless --tmpdir says: /dev/shm when it is a tmpfs with
    room, else the system's temporary folder (None).

    Every W1/W2 task writes a file; on the shared disk, creating 10,000 files took
    anywhere from 1 to 13 s between runs, more than the differences being measured.
    In RAM every tool pays the same small cost for its tasks' files, and what is left
    is the tools' own overhead.
    """
    shm = "/dev/shm"
    try:
        free = shutil.disk_usage(shm).free
    except OSError:
        return None
    if filesystem_of(shm) == "tmpfs" and free >= TMPFS_MIN_FREE and os.access(shm, os.W_OK):
        return shm
    return None


def environment(setup: Setup) -> dict[str, str]:
    proj = _pkg_versions(sys.executable, ["hpcflow", "dask", "distributed", "psutil", "PyYAML"])
    peers_py = os.path.join(setup.peers_bin, "python")
    peers = (
        _pkg_versions(
            peers_py,
            ["snakemake", "parsl", "hyperqueue", "dask", "psutil", "pulp", "pyzmq", "matplotlib"],
        )
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
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "host": f"{platform.system()} {platform.release()} {platform.machine()}",
        "cpu": cpu,
        "nproc": str(os.cpu_count()),
        "memory": mem_gib,
        "python": f"{platform.python_version()} ({sys.executable})",
        "python (peers venv)": peers.get("python", "missing: run bash bench/setup.sh"),
        "hpcflow": (hv or "not installed") + f" (CLI: {_rel(setup.hpcflow)})",
        "snakemake": peers.get("snakemake", "not installed"),
        "parsl": peers.get("parsl", "not installed"),
        "hyperqueue": peers.get("hyperqueue", "not installed"),
        "dask": (
            f"{dask}, distributed {proj.get('distributed', '?')} (project venv: hpcflow's "
            "engine, and plain Dask in W3)"
            if dask
            else "not installed"
        ),
        "matplotlib": peers.get("matplotlib", "not installed (no plot)"),
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
    cap: float | None = None,
) -> dict:
    """Measure one tool on one workload in a fresh directory; return its JSON record."""
    cap = args.timeout if cap is None else cap
    root = tempfile.mkdtemp(prefix=f"hpcflow-bench-{tool}-", dir=args.tmpdir)
    workdir = os.path.join(root, "work")
    logdir = os.path.join(root, "log")
    os.makedirs(workdir)
    os.makedirs(logdir)
    tasks = w.tasks()
    argv: list[str] = []
    before: dict[str, int] = {}
    try:
        try:
            argv, env = setup.prepare(tool, w, workdir, args.timeout)
            prep_error = None
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as exc:
            prep_error = f"preparation failed: {exc}"
        if w.key == "W4":
            before = _mtimes(tasks, workdir)
        load_before = os.getloadavg()[0]
        if prep_error:
            m = Measurement(argv=argv, launch_error=prep_error)
        elif not os.path.exists(argv[0]):
            hint = (
                "the hpcflow CLI is not installed (pip install -e . in the project venv)"
                if tool == "hpcflow"
                else "peers venv missing: run bash bench/setup.sh"
            )
            m = Measurement(argv=argv, launch_error=f"{argv[0]} not found: {hint}")
        else:
            m = run_measured(argv, workdir, env, cap, logdir)
        done, check_error = verify(tool, w, tasks, workdir, m, before)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    expected = w.ntasks
    if m.launch_error:
        status, error = "failed", m.launch_error
    elif m.timed_out:
        status, error = "timeout", f"killed after {m.wall_s:.0f} s (cap {cap:g} s)"
    elif m.rc != 0:
        status, error = "failed", f"exit code {m.rc}"
    elif check_error:
        status, error = "failed", check_error
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
        # sampling can miss a short run's peak; the main process's own max is exact
        "peak_rss_mb": round(max(m.peak_rss_mb, m.root_maxrss_mb), 1),
        "main_maxrss_mb": round(m.root_maxrss_mb, 1),
        "main_peak_rss_mb": round(m.peak_root_rss_mb, 1),
        "rest_peak_rss_mb": round(m.peak_rest_rss_mb, 1),
        "peak_procs": m.peak_procs,
        "rss_samples": m.samples,
        "leftover_procs_killed": m.leftover_procs,
        "loadavg_before": round(load_before, 2),
        "timeout_s": cap,
        "argv": [os.path.basename(a) if os.path.isabs(a) else a for a in argv],
        "error": error,
    }
    if status != "ok":
        rec["stderr_tail"] = m.stderr_tail[-800:]
        rec["stdout_tail"] = m.stdout_tail[-400:]
    return rec


def _mtimes(tasks, workdir: str) -> dict[str, int]:
    out = {}
    for t in tasks:
        try:
            out[t.output] = os.stat(os.path.join(workdir, t.output)).st_mtime_ns
        except OSError:
            pass
    return out


def verify(
    tool: str, w: Workload, tasks, workdir: str, m: Measurement, before: dict[str, int]
) -> tuple[int, str]:
    """(tasks done, error or ""): did the run do what the workload asks, whatever its rc?"""
    text = m.stdout_tail + "\n" + m.stderr_tail
    if w.key in ("W1", "W2"):
        done = _count(tasks, workdir)
        return done, "" if done == len(tasks) else f"only {done}/{len(tasks)} outputs correct"
    if w.key == "W3":
        # floor, Parsl, Dask and HyperQueue check the sum of the results themselves
        # (rc != 0 if wrong)
        if tool == "hpcflow" and f"{w.n} ran, 0 up to date, 0 failed" not in text:
            return 0, "hpcflow did not report all W3 tasks as run"
        return (w.n if m.rc == 0 else 0), ""
    if w.key == "W4":
        done = _count(tasks, workdir)
        changed = sum(1 for k, v in _mtimes(tasks, workdir).items() if before.get(k) != v)
        if done != len(tasks) or changed:
            return done, f"outputs rewritten or missing: {changed} changed, {done} intact"
        if tool == "hpcflow" and f"0 ran, {w.n} up to date" not in text:
            return done, "hpcflow did not report every task up to date"
        return done, ""
    # W5, W6: a plan, nothing executed
    made = _count(tasks, workdir) if w.n <= 200_000 else 0
    if made:
        return 0, f"a dry run wrote {made} outputs"
    if tool == "hpcflow" and f"{w.n} of {w.n} tasks would run" not in text:
        return 0, "hpcflow's plan does not list every task"
    return (w.n if m.rc == 0 else 0), ""


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
    """The markdown table of one workload, and its per-tool summaries."""
    stats = {t: summarize([r for r in recs if r["tool"] == t]) for t in tools}
    floor = stats.get("floor", {}).get("median", Bound(None))
    hpc = stats.get("hpcflow", {}).get("median", Bound(None))
    head = (
        "| tool | ok/runs | wall median s | wall min s | tasks/s | ratio to floor "
        "| hpcflow speed-up (peer / hpcflow) | peak RSS MB (tree) "
        "| main process max RSS MB | rest of tree peak RSS MB | CPU s |"
    )
    lines = [head, "|" + "---|" * 11]
    for t in tools:
        s = stats[t]
        med: Bound = s["median"]
        tps = Bound(float(w.ntasks)) / med if med.value else Bound(None)
        ratio = med / floor if "floor" in stats else Bound(None)
        sp = (med / hpc).fmt("x") if t in PEERS and "hpcflow" in stats else ""
        ratio_s = "–" if med.value is None or "floor" not in stats else ratio.fmt("x")
        lines.append(
            f"| {t} | {s['ok']}/{s['runs']} | {wall_text(s)} | {s['min'].fmt()} "
            f"| {tps.fmt(digits=3)} | {ratio_s} | {sp} "
            f"| {_mb(s['rss'])} | {_mb(s['main_rss'])} | {_mb(s['rest_rss'])} "
            f"| {_num(s['cpu']) if s['cpu'] is not None else '–'} |"
        )
    return "\n".join(lines), stats


def _mb(v: float | None) -> str:
    return _num(v) if v else "–"


def _verdict(value: Bound, limit: float, want: str) -> str:
    """PASS / FAIL / NOT DECIDED for ``value <= limit`` (want "<=") or ``>=``."""
    if value.value is None:
        return "NOT DECIDED"
    if want == "<=":
        if value.kind in ("=", "<") and value.value <= limit:
            return "PASS"
        if value.kind in ("=", ">") and value.value > limit:
            return "FAIL"
    else:
        if value.kind in ("=", ">") and value.value >= limit:
            return "PASS"
        if value.kind in ("=", "<") and value.value < limit:
            return "FAIL"
    return "NOT DECIDED"


def targets(all_stats: dict[str, dict[str, dict]], pilot: list[dict] | None) -> list[str]:
    """One line per issue target, with the measured value and PASS / FAIL."""
    out: list[str] = []

    def med(st: dict[str, dict], t: str) -> Bound:
        return st[t]["median"] if t in st else Bound(None)

    def line(text: str, value: str, verdict: str) -> None:
        out.append(f"- {text}: measured {value} → **{verdict}**")

    for label, st in all_stats.items():
        key = label.split()[0]
        hpc, floor = med(st, "hpcflow"), med(st, "floor")
        if key in TARGET_FLOOR_RATIO and "hpcflow" in st and "floor" in st:
            r = hpc / floor
            lim = TARGET_FLOOR_RATIO[key]
            v = "FAIL (hpcflow failed)" if hpc.value is None else _verdict(r, lim, "<=")
            line(f"{label}: hpcflow ≤ {lim:g}× floor", r.fmt("x"), v)
        if key == "W1":
            for peer, need in TARGET_SPEEDUP.items():
                if peer not in st or "hpcflow" not in st:
                    continue
                sp = med(st, peer) / hpc
                v = "FAIL (hpcflow failed)" if hpc.value is None else _verdict(sp, need, ">=")
                note = ""
                if peer == "parsl_htex" and "floor" in st:
                    pf = med(st, peer) / floor
                    note = f" (Parsl is {pf.fmt('x')} the floor itself)"
                name = "snakemake (default scheduler)" if peer == "snakemake" else peer
                line(f"{label}: hpcflow ≥ {need:g}× faster than {name}", sp.fmt("x") + note, v)
        if key in ("W1", "W2") and "hyperqueue" in st and "hpcflow" in st:
            # Issue 22 adds HyperQueue as a peer without a target of its own.
            sp = med(st, "hyperqueue") / hpc
            note = ""
            if "floor" in st:
                note = f" (HyperQueue is {(med(st, 'hyperqueue') / floor).fmt('x')} the floor)"
            out.append(
                f"- {label}: hpcflow versus hyperqueue (report only): hpcflow "
                f"{sp.fmt('x')} faster{note}"
            )
        if key == "W3" and "hpcflow" in st:
            n = int(label.split("=")[1])
            tps = Bound(float(n)) / hpc if hpc.value else Bound(None)
            extra = ", ".join(
                f"{(med(st, p) / hpc).fmt('x')} faster than {p}"
                for p in ("parsl_htex", "dask", "hyperqueue")
                if p in st
            )
            line(
                f"{label}: hpcflow ≥ {TARGET_W3_TPS:g} tasks/s end to end",
                f"{tps.fmt()} tasks/s" + (f" ({extra})" if extra else ""),
                _verdict(tps, TARGET_W3_TPS, ">="),
            )
        if key == "W4" and "hpcflow" in st:
            line(
                f"{label}: resume decided in ≤ {TARGET_W4_S:g} s",
                hpc.fmt(" s"),
                _verdict(hpc, TARGET_W4_S, "<="),
            )
        if key in TARGET_PLAN and "hpcflow" in st:
            lim_s, lim_mb = TARGET_PLAN[key]
            rss = st["hpcflow"]["rss"]
            sm = med(st, "snakemake")
            cmp = f"; snakemake -n: {wall_text(st['snakemake'])} s" if "snakemake" in st else ""
            line(
                f"{label}: dry-run plan ≤ {lim_s:g} s",
                hpc.fmt(" s") + cmp,
                _verdict(hpc, lim_s, "<="),
            )
            line(
                f"{label}: dry-run peak RSS ≤ {lim_mb:g} MB",
                f"{_mb(rss)} MB"
                + (
                    f"; snakemake -n: {_mb(st['snakemake']['rss'])} MB"
                    if "snakemake" in st and sm.value
                    else ""
                ),
                _verdict(Bound(rss), lim_mb, "<=") if rss else "NOT DECIDED",
            )
    big = [lab for lab in all_stats if lab.startswith("W1 ") and "hpcflow" in all_stats[lab]]
    if big:
        lab = max(big, key=lambda x: int(x.split("=")[1]))
        h = all_stats[lab]["hpcflow"]
        out.append(
            f"- {lab}: memory (report only): hpcflow tree peak {_mb(h['rss'])} MB; driver "
            f"process (CLI + engine) max RSS {_mb(h['main_rss'])} MB; Python workers "
            f"and task processes together peak {_mb(h['rest_rss'])} MB"
        )
    if pilot:
        for r in pilot:
            out.append(
                f"- W7 pilot on the local test SLURM, {r.get('tool', 'hpcflow')}, "
                f"{r.get('tasks')} tasks (report only): "
                f"{'ok' if r.get('ok') else 'FAILED'}, {r.get('tasks_per_s')} tasks/s over "
                f"{r.get('wall_s')} s; {r.get('sbatch_calls')} sbatch, "
                f"{r.get('squeue_calls')} squeue, {r.get('sacct_calls')} sacct calls; "
                f"sbatch → first task {r.get('submit_to_first_task_s')} s, → last task "
                f"{r.get('submit_to_last_task_s')} s; central CPU "
                f"{r.get('central_cpu_us_per_task', '?')} µs/task"
                + (f"; {r['error']}" if r.get("error") else "")
            )
    return out


def command_line() -> str:
    py = (
        os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(ROOT) else sys.executable
    )
    script = os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)
    return shlex.join([py, script, *sys.argv[1:]])


def tools_for(w: Workload, selected: list[str], explicit: bool) -> list[str]:
    """The tools that measure ``w``: its own list, narrowed by --tools."""
    out = [t for t in TOOLS_FOR[w.key] if t in selected]
    if w.key == "W1" and w.n > GREEDY_MAX_N and not explicit:
        out = [t for t in out if t != "snakemake_greedy"]
    return out


def tool_desc(key: str, tool: str) -> str:
    return TOOL_DESC_FOR.get(key, {}).get(tool, TOOL_DESC[tool])


def report(
    args: argparse.Namespace,
    env_info: dict[str, str],
    load_before: tuple[float, float, float],
    started: str,
    took: float,
    plan: list[tuple[Workload, list[str]]],
    recs: list[dict],
    cmd: str,
    pilot: list[dict] | None,
    plot: str | None,
    partial: tuple[int, int] | None = None,
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
        if not k.startswith("_"):
            md.append(f"{k + ':':<21}{v}")
    md.append(
        f"{'loadavg:':<21}{load_before[0]:.2f} {load_before[1]:.2f} "
        f"{load_before[2]:.2f} (1/5/15 min, before the runs)"
    )
    if env_info.get("_pressure"):
        md.append(f"{'CPU pressure:':<21}{env_info['_pressure']} (before the runs)")
    loads = [r["loadavg_before"] for r in recs]
    if loads:
        md.append(
            f"{'loadavg per run:':<21}min {min(loads):.2f}, median "
            f"{statistics.median(loads):.2f}, max {max(loads):.2f} (1 min, before each)"
        )
    md += ["```", ""]
    console: list[str] = []
    all_stats: dict[str, dict[str, dict]] = {}
    body: list[str] = []
    for w, tools in sorted(plan, key=lambda wt: (wt[0].key, wt[0].n)):
        wrecs = [r for r in recs if r["label"] == w.label]
        if not wrecs:
            continue
        tbl, stats = table(w, wrecs, tools)
        all_stats[w.label] = stats
        body += [f"## {w.label}: {w.describe()}", "", tbl, ""]
        console += [f"\n{w.label}: {w.describe()}", tbl]
    tg = targets(all_stats, pilot)
    md += ["## Issue targets", ""] + (tg or ["- nothing measured yet"]) + [""]
    if plot:
        md += [
            "## Wall time versus task count",
            "",
            f"![wall time versus task count per tool]({plot})",
            "",
            "Left: W1 (shell fan-out) end to end; an open marker with an arrow is a "
            "lower bound (the run hit its cap). Right: W5/W6 planning (dry run) and, for "
            "reference, W3 (Python calls).",
            "",
        ]
    md += body
    console += ["\nIssue targets:"] + tg
    md += [
        "## Method",
        "",
        f"- Every measurement is one fresh child process timed end to end "
        f"(interpreter start-up, imports, executor start/stop, all tasks) in "
        f"a fresh temporary directory; {args.reps} repetition(s) of every tool, "
        f"and in each {args.core_reps} interleaved runs of floor and hpcflow "
        f"(cheap; medians reported), tools in rotating (round-robin) order "
        f"(floor and hpcflow first, then the peers, so a peer's cap can follow "
        f"hpcflow's time). Cap per "
        f"measurement: {args.timeout:g} s; a W1 peer's cap is lowered to "
        f"{CAP_MARGIN:g} × its speed-up target × hpcflow's wall (at least "
        f"{CAP_MIN:g} s): enough to decide the target. A timed-out run counts "
        f"as a lower bound (`>`), and so do ratios derived from it.",
        "- After each run the outputs are checked: W1/W2 every output file "
        "(exists, right content); W3 the sum of the results (hpcflow: its summary "
        "line says every task ran); W4 every output intact and not rewritten "
        "(mtime unchanged), hpcflow reports every task up to date; W5/W6 nothing "
        "written, hpcflow's plan lists every task. A run failing its check is failed.",
        "- `ratio to floor` = median wall / median wall of `floor` in this "
        "run; `hpcflow speed-up` = peer median wall / hpcflow median wall; "
        "`tasks/s` = tasks / median wall.",
        "- `peak RSS (tree)` = max over 0.2 s psutil samples of the summed RSS of "
        "the run's process tree (its session, descendants, and processes "
        "in its work directory). `main process max RSS` = the measured process's "
        "own ru_maxrss (exact; for hpcflow the driver, which also hosts its local "
        "engine: the pool, whose threads start the commands); `rest of tree` = peak "
        "of the sampled sum of everything else (hpcflow: the tasks' bash processes, "
        "and in W3 the fork server and Python worker processes). "
        "`CPU s` = user+sys of the processes reaped within the tree (daemonised "
        "processes such as Parsl's worker pool are not included, so Parsl's figure "
        "is an undercount).",
        "- The machine is small and shared: trust ratios within one run, not absolute seconds.",
        "- Work directories (every tool's, see `work directories` above) are on a RAM-backed "
        "tmpfs by default: on this machine's disk, creating 10,000 small files took 1 to 13 s "
        "from one run to the next, more than the differences being measured. "
        "`--tmpdir /tmp` measures on disk instead.",
        "",
        "Tools:",
        "",
    ]
    seen: set[tuple[str, str]] = set()
    for w, tools in plan:
        group = w.key if w.key in TOOL_DESC_FOR else "W1/W2"
        for t in tools:
            if (group, t) in seen:
                continue
            seen.add((group, t))
            md.append(f"- {group} `{t}`: {tool_desc(w.key, t)}")
    md.append("")
    errs = [r for r in recs if r["status"] != "ok"]
    md += ["## Errors, time-outs, failed checks", ""]
    if not errs:
        md.append("- none")
    for r in errs:
        tail = (r.get("stderr_tail") or r.get("stdout_tail") or "").strip()
        tail = tail.splitlines()[-6:] if tail else []
        md.append(
            f"- {r['label']} {r['tool']} rep {r['rep']}: {r['status']}: "
            f"{r['error']}; {r['done']}/{r['expected']} done"
        )
        if tail and r["status"] == "failed":
            md += ["  ```"] + [f"  {x}" for x in tail] + ["  ```"]
    md.append("")
    return "\n".join(md), "\n".join(console)


def peer_cap(w: Workload, tool: str, recs: list[dict], rep: int, timeout: float) -> float:
    """A W1 peer's cap: long enough to decide its speed-up target against hpcflow's wall
    in this repetition, never more than --timeout."""
    if w.key == "W6" and tool != "hpcflow":
        # The 1M-task plan: a peer gets as long as hpcflow's target allows it.
        return min(timeout, TARGET_PLAN["W6"][0])
    need = TARGET_SPEEDUP.get("snakemake" if tool.startswith("snakemake") else tool)
    if w.key != "W1" or need is None:
        return timeout
    hpc = [
        r["wall_s"]
        for r in recs
        if r["label"] == w.label and r["tool"] == "hpcflow" and r["rep"] == rep and r["ok"]
    ]
    if not hpc:
        return timeout
    return min(timeout, max(CAP_MIN, CAP_MARGIN * need * statistics.median(hpc)))


def run_pilot(args: argparse.Namespace) -> tuple[list[dict], str]:
    """W7: run bench/pilot.py (it writes its own section of the report); its rows."""
    if os.geteuid() != 0:
        return [], "W7 skipped: the local test SLURM needs root"
    argv = [sys.executable, os.path.join(HERE, "pilot.py"), "--n", args.pilot_n, "--out", args.out]
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=args.pilot_timeout)
    except subprocess.TimeoutExpired:
        return [], f"W7 timed out after {args.pilot_timeout:g} s"
    rows = []
    for ln in res.stdout.splitlines():
        if ln.startswith("{"):
            try:
                rows.append(json.loads(ln))
            except ValueError:
                pass
    err = "" if res.returncode == 0 else f"W7 exit code {res.returncode}: {res.stderr[-600:]}"
    return rows, err


def run_values(args: argparse.Namespace) -> None:
    """W8: run bench/values.py, which writes its own section of the report."""
    argv = [sys.executable, os.path.join(HERE, "values.py"), "--reps", str(max(args.reps, 3))]
    argv += ["--out", args.out, "--jsonl", args.jsonl, "--timeout", str(args.timeout)]
    argv += ["--peers-python", os.path.join(args.peers_venv, "bin", "python")]
    res = subprocess.run(argv, text=True, stdout=subprocess.DEVNULL, timeout=3600)
    if res.returncode != 0:
        print(
            f"bench: W8 exit code {res.returncode} (its section says which failed)", file=sys.stderr
        )


def make_plot(args: argparse.Namespace, recs: list[dict]) -> str | None:
    """Draw the PNG with bench/plot.py (matplotlib, from the peers venv or this python)."""
    data = [
        {k: r[k] for k in ("workload", "ntasks", "tool", "wall_s", "status", "rep")}
        for r in recs
        if r["status"] in ("ok", "timeout")
    ]
    if not data:
        return None
    png = os.path.splitext(args.out)[0] + ".png"
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(data, fh)
        src = fh.name
    try:
        for py in (os.path.join(args.peers_venv, "bin", "python"), sys.executable):
            if not os.path.exists(py):
                continue
            res = subprocess.run(
                [py, os.path.join(HERE, "plot.py"), src, png],
                capture_output=True,
                text=True,
                timeout=120,
            )
            if res.returncode == 0:
                return os.path.basename(png)
        print("bench: no plot (matplotlib missing? run bash bench/setup.sh)", file=sys.stderr)
        return None
    finally:
        os.unlink(src)


# ---------------------------------------------------------------------------


ALL_WORKLOADS = ["W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", default="1000,5000,20000", help="W1 sizes (default 1000,5000,20000)")
    ap.add_argument(
        "--layers", type=int, default=W2_LAYERS, help=f"W2 layers of 20 tasks (default {W2_LAYERS})"
    )
    ap.add_argument("--w3-n", type=int, default=10000, help="W3 Python calls (default 10000)")
    ap.add_argument("--w4-n", type=int, default=5000, help="W4 resumed run size (default 5000)")
    ap.add_argument("--w5-n", type=int, default=100_000, help="W5 sweep size (default 100000)")
    ap.add_argument("--w6-n", type=int, default=1_000_000, help="W6 sweep size (default 1000000)")
    ap.add_argument("--pilot-n", default="10000", help="W7 pilot task counts (default 10000)")
    ap.add_argument("--pilot-timeout", type=float, default=600.0, help="W7 cap, seconds")
    ap.add_argument("--only", default=",".join(ALL_WORKLOADS), help="workloads (default W1,...,W8)")
    ap.add_argument("--tools", default=None, help=f"tools (default: all of {','.join(TOOLS)})")
    ap.add_argument("--reps", type=int, default=1, help="repetitions (default 1)")
    ap.add_argument(
        "--core-reps",
        type=int,
        default=3,
        help="floor and hpcflow runs per repetition, interleaved (default 3; medians)",
    )
    ap.add_argument(
        "--timeout", type=float, default=240.0, help="cap per measurement, s (default 240)"
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="smoke check, small sizes: W1 N=200, W2 10x20, W3 500, W4 200, W5 2000, "
        "W6 5000, no W7 or W8; report goes to bench/RESULTS-quick.md unless --out is given",
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
    ap.add_argument(
        "--tmpdir",
        default=None,
        help="where the work directories go (default /dev/shm when it is a tmpfs with 4 GiB "
        "free, else the system's temporary folder); e.g. --tmpdir /tmp to measure on disk",
    )
    ap.add_argument("--keep", action="store_true", help="keep the work directories")
    args = ap.parse_args(argv)

    explicit = args.tools is not None
    selected = [t.strip() for t in (args.tools or ",".join(TOOLS)).split(",") if t.strip()]
    bad = [t for t in selected if t not in TOOLS]
    if bad:
        ap.error(f"unknown tool(s) {bad}; choose from {TOOLS}")
    only = {x.strip().upper() for x in args.only.split(",") if x.strip()}
    if only - set(ALL_WORKLOADS):
        ap.error(f"--only takes some of {','.join(ALL_WORKLOADS)}")
    if args.quick:
        ns, layers = [200], 10
        args.w3_n, args.w4_n, args.w5_n, args.w6_n = 500, 200, 2000, 5000
        args.core_reps = 1
        only -= {"W7", "W8"}
    else:
        ns, layers = [int(x) for x in args.n.split(",") if x.strip()], args.layers
    if args.out is None:
        args.out = os.path.join(HERE, "RESULTS-quick.md" if args.quick else "RESULTS.md")
    workloads: list[Workload] = []
    if "W1" in only:
        workloads += [Workload("W1", n) for n in ns]
    if "W2" in only:
        workloads.append(Workload("W2", layers))
    for key, n in (("W3", args.w3_n), ("W4", args.w4_n), ("W5", args.w5_n), ("W6", args.w6_n)):
        if key in only:
            workloads.append(Workload(key, n))
    plan = [(w, tools_for(w, selected, explicit)) for w in workloads]
    plan = [(w, t) for w, t in plan if t]
    # The big W1 last (before W7): an interrupted run still has every other workload.
    plan.sort(key=lambda wt: wt[0].key == "W1" and wt[0].n > GREEDY_MAX_N)
    if not plan and not only & {"W7", "W8"}:
        ap.error("nothing to run")
    setup = Setup(args)
    cmd = command_line()
    run_id = _dt.datetime.now().strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    env_info = environment(setup)
    if args.tmpdir is None:
        args.tmpdir = default_workdir_root()
    where = args.tmpdir or tempfile.gettempdir()
    env_info["work directories"] = f"{where} ({filesystem_of(where)})"
    load_before = os.getloadavg()
    try:
        with open("/proc/pressure/cpu") as fh:
            env_info["_pressure"] = "some " + fh.readline().split()[1]  # avg10=...: % stalled
    except (OSError, IndexError):
        pass
    total = args.reps * sum(
        len(t) + (args.core_reps - 1) * len([x for x in t if x in ("floor", "hpcflow")])
        for _, t in plan
    )
    print(
        f"bench: run {run_id}; {total} measurement(s)"
        f"{' + W7' if 'W7' in only else ''}; loadavg {load_before[0]:.2f}; cap "
        f"{args.timeout:g} s",
        file=sys.stderr,
    )
    t_start = time.perf_counter()
    recs: list[dict] = []
    pilot: list[dict] | None = None
    plot: str | None = None
    k = 0
    os.makedirs(os.path.dirname(os.path.abspath(args.jsonl)), exist_ok=True)

    def write(partial: tuple[int, int] | None) -> str:
        md, console = report(
            args,
            env_info,
            load_before,
            started,
            time.perf_counter() - t_start,
            plan,
            recs,
            cmd,
            pilot,
            plot,
            partial=partial,
        )
        kept = _kept_sections(args.out)
        with open(args.out, "w") as fh:
            fh.write(md + kept)
        return console

    for rep in range(args.reps):
        for wi, (w, tools) in enumerate(plan):
            first = [t for t in tools if t in ("floor", "hpcflow")]
            rest = [t for t in tools if t not in ("floor", "hpcflow")]
            # floor and hpcflow are cheap: --core-reps interleaved pairs of them
            order_ = [t for r in range(args.core_reps) for t in rotate(first, rep + wi + r)]
            order_ += rotate(rest, rep + wi)
            for order, tool in enumerate(order_):
                k += 1
                cap = peer_cap(w, tool, recs, rep, args.timeout)
                rec = one_run(setup, tool, w, rep, order, args, run_id, cap)
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
                write((k, total) if k < total or only & {"W7", "W8"} else None)
    plot = make_plot(args, recs)
    if "W7" in only:
        print(f"bench: W7 pilot, {args.pilot_n} tasks, local test SLURM", file=sys.stderr)
        pilot, err = run_pilot(args)
        if err:
            print(f"bench: {err}", file=sys.stderr)
            pilot = pilot or [{"tasks": args.pilot_n, "ok": False, "error": err}]
    console = write(None)
    if "W8" in only:
        print("bench: W8 values between tasks (bench/values.py)", file=sys.stderr)
        run_values(args)
    print(console)
    print(f"\nwrote {_rel(args.out)}; raw results appended to {_rel(args.jsonl)}")
    return 0


#: Sections of older reports that a new run replaces (not kept).
DROPPED_SECTIONS = {"w1-reps"}


def _kept_sections(path: str) -> str:
    """Sections other scripts own (bench/pilot.py's, the GPU check's, ...), kept across
    rewrites: every ``<!-- section:NAME -->`` ... ``<!-- /section:NAME -->`` block."""
    try:
        with open(path) as fh:
            old = fh.read()
    except OSError:
        return ""
    kept = []
    pos = 0
    while True:
        start = old.find("<!-- section:", pos)
        if start < 0:
            break
        name = old[start + len("<!-- section:") : old.find("-->", start)].strip()
        end_tag = f"<!-- /section:{name} -->"
        end = old.find(end_tag, start)
        if end < 0:
            break
        end += len(end_tag)
        if name not in DROPPED_SECTIONS:
            kept.append(old[start:end])
        pos = end
    return "".join("\n" + k + "\n" for k in kept)


if __name__ == "__main__":
    sys.exit(main())
