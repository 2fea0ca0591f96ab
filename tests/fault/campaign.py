"""A randomized fault campaign with exactly-once accounting, counted from side effects.

Each iteration copies a workflow of 46 tasks of mixed kinds into a folder of its own: 20
shell tasks (a sweep), 20 Python tasks (a sweep whose values a reduce gathers), a chain
of three Python tasks handing values on, a shell reduce and a Python reduce, plus one
task that reads both reduces. Every attempt of every task appends a ``start`` line when
it begins, a ``beat`` line every 0.1 s while it works and an ``end`` line when it has
written its output, each with an attempt id (its pid and a random token) and a wall-clock
time, to a file of its own in ``attempts/``: outside hpcflow's state, written by the
tasks themselves.

The iteration picks, from its own seeded random generator, an engine (the pool or the
embedded Dask cluster), a fault and an instant (after K attempts have ended):

* ``driver``: SIGKILL of the ``hpcflow run`` process alone (not its process group: its
  tasks must die with it);
* ``task``: SIGKILL of one running attempt's process (the shell or the Python worker
  whose pid its attempt id names).

Then it re-runs the workflow to the end and checks, from ``attempts/`` and the outputs
alone:

1. no task ever had two attempts alive at once (an attempt is alive from its ``start``
   to its ``end``, or to its last ``beat`` when it was killed: what it wrote proves it
   was alive then), and no attempt of the faulted run ends after the re-run began;
2. of the tasks that had ended before the fault, at most ``SLOTS`` ran again (attempts
   that had ended but whose end the driver had not yet recorded: tasks in flight);
3. every output is exact.

Run it as a script for a recorded campaign (``python -m tests.fault.campaign --iterations
200 --seed 1``); ``tests/fault/test_campaign.py`` runs a short seeded one in the suite.
``--cluster`` runs the faults on a cluster instead (pilot driver, worker, node, follower,
cancelled allocation; :mod:`tests.fault.campaign_cluster`) on a test SLURM cluster it
starts. A full disk is not in it yet.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

log = logging.getLogger("campaign")

REPO = Path(__file__).resolve().parent.parent.parent

#: Slots of every run (--threads), so also the bound on tasks in flight at a fault.
SLOTS = 2
N_SHELL = 20
N_PY = 20
ENGINES = ("pool", "dask")
FAULTS = ("driver", "task")

STEPS = """
import os, random, secrets, time

LOGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "attempts")

def _line(what, task, attempt):
    os.makedirs(LOGS, exist_ok=True)
    path = os.path.join(LOGS, f"{task}.{attempt}")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{what} {task} {attempt} {time.time():.6f}\\n".encode())
    finally:
        os.close(fd)

def _attempt(task):
    attempt = f"{os.getpid()}-{secrets.token_hex(4)}"
    _line("start", task, attempt)
    for _ in range(random.randint(1, 4)):   # alive, and saying so
        time.sleep(0.1)
        _line("beat", task, attempt)
    return attempt

def py(i):
    attempt = _attempt(f"py{i}")
    value = i * i
    _line("end", f"py{i}", attempt)
    return value

def gather(squares):
    attempt = _attempt("gather")
    total = sum(squares)
    with open("py_total.txt", "w") as f:
        f.write(f"{total}\\n")
    _line("end", "gather", attempt)
    return total

def first():
    attempt = _attempt("first")
    _line("end", "first", attempt)
    return [1, 2, 3]

def second(x):
    attempt = _attempt("second")
    _line("end", "second", attempt)
    return [v * 10 for v in x]

def third(x):
    attempt = _attempt("third")
    with open("chain.txt", "w") as f:
        f.write(" ".join(str(v + 1) for v in x) + "\\n")
    _line("end", "third", attempt)
    return x
"""

SHELL = (
    'a="$$-$RANDOM$RANDOM"; f=attempts/sh{i}.$a; mkdir -p attempts; '
    'echo "start sh{i} $a $(date +%s.%N)" >> $f; '
    "for k in $(seq $((RANDOM % 4 + 1))); do sleep 0.1; "
    'echo "beat sh{i} $a $(date +%s.%N)" >> $f; done; '
    "mkdir -p out; echo {i} {i} {i} > out/sh{i}.txt; "
    'echo "end sh{i} $a $(date +%s.%N)" >> $f'
)

WORKFLOW = f"""
name: campaign
tasks:
  - name: sh
    foreach: {{i: {{range: [0, {N_SHELL}]}}}}
    command: {json.dumps(SHELL)}
    outputs: ["out/sh{{i}}.txt"]
  - name: sh_total
    needs: [sh]
    command: >-
      a="$$-$RANDOM"; f=attempts/sh_total.$a; mkdir -p attempts;
      echo "start sh_total $a $(date +%s.%N)" >> $f;
      cat out/sh*.txt | awk '{{s += $1 + $2 + $3}} END {{print s}}' > sh_total.txt;
      echo "end sh_total $a $(date +%s.%N)" >> $f
    outputs: [sh_total.txt]
  - name: py
    foreach: {{i: {{range: [0, {N_PY}]}}}}
    python: steps:py
  - name: gather
    python: steps:gather
    from: {{squares: py}}
  - name: first
    python: steps:first
  - name: second
    python: steps:second
    from: {{x: first}}
  - name: third
    python: steps:third
    from: {{x: second}}
  - name: last
    needs: [sh_total, gather, third]
    command: >-
      a="$$-$RANDOM"; f=attempts/last.$a; mkdir -p attempts;
      echo "start last $a $(date +%s.%N)" >> $f;
      cat sh_total.txt py_total.txt chain.txt > last.txt;
      echo "end last $a $(date +%s.%N)" >> $f
    outputs: [last.txt]
"""

TASKS = (
    [f"sh{i}" for i in range(N_SHELL)]
    + [f"py{i}" for i in range(N_PY)]
    + ["sh_total", "gather", "first", "second", "third", "last"]
)


def expected_outputs() -> dict[str, str]:
    """Every output file of the workflow and its exact text."""
    sh_total = sum(i * 3 for i in range(N_SHELL))
    py_total = sum(i * i for i in range(N_PY))
    files = {f"out/sh{i}.txt": f"{i} {i} {i}\n" for i in range(N_SHELL)}
    files["sh_total.txt"] = f"{sh_total}\n"
    files["py_total.txt"] = f"{py_total}\n"
    files["chain.txt"] = "11 21 31\n"
    files["last.txt"] = f"{sh_total}\n{py_total}\n11 21 31\n"
    return files


@dataclass(frozen=True)
class Line:
    """One line an attempt wrote to its file in attempts/."""

    what: str
    task: str
    attempt: str
    at: float


def read_lines(path: Path) -> list[Line]:
    """The complete lines the attempts wrote to their files in the folder ``path``, one
    file per attempt (so one writer per file: appends from two clients of a network file
    system to one file can overwrite each other); a line being written is left out."""
    if not path.is_dir():
        return []
    text = "".join(p.read_text() for p in sorted(path.iterdir()) if p.is_file())
    lines = []
    for raw in text.splitlines(keepends=True):
        parts = raw.split()
        if not raw.endswith("\n") or len(parts) != 4:
            continue
        lines.append(Line(parts[0], parts[1], parts[2], float(parts[3])))
    return lines


@dataclass
class Verdict:
    """What one iteration's side effects show."""

    violations: list[str] = field(default_factory=list)
    rerun_after_end: int = 0
    attempts: int = 0

    def add(self, message: str) -> None:
        self.violations.append(message)


def check(
    lines: list[Line],
    fault_at: float,
    rerun_at: float,
    folder: Path,
    *,
    tasks: Iterable[str] = TASKS,
    expected: dict[str, str] | None = None,
    bound: int = SLOTS,
) -> Verdict:
    """The three properties of the module docstring, from the side effects alone:
    ``tasks`` must each have run, ``expected`` (default :func:`expected_outputs`) are the
    exact outputs, and ``bound`` ended tasks may run again (the slots in flight)."""
    verdict = Verdict()
    starts: dict[str, Line] = {}
    ends: dict[str, Line] = {}
    for line in lines:
        if line.what in ("start", "end"):
            (starts if line.what == "start" else ends)[line.attempt] = line
    verdict.attempts = len(starts)
    last_beat: dict[str, float] = {}
    for line in lines:
        if line.what == "beat":
            last_beat[line.attempt] = max(line.at, last_beat.get(line.attempt, line.at))
    by_task: dict[str, list[tuple[float, float, str]]] = {}
    for attempt, start in starts.items():
        end = ends.get(attempt)
        if end is None:  # killed: alive at least until the last thing it wrote
            stop = last_beat.get(attempt, start.at)
        else:
            stop = end.at
            if start.at <= fault_at and rerun_at <= end.at:
                verdict.add(
                    f"{start.task}: attempt {attempt} of the faulted run ended after the "
                    "re-run began"
                )
        by_task.setdefault(start.task, []).append((start.at, stop, attempt))
    for task, spans in by_task.items():
        spans.sort()
        for (s1, e1, a1), (s2, _, a2) in zip(spans, spans[1:]):
            if s2 < e1:
                verdict.add(
                    f"{task}: attempts {a1} and {a2} alive at once ({s1:.3f}-{e1:.3f} vs {s2:.3f})"
                )
    ended_before = {ends[a].task for a in ends if ends[a].at <= fault_at}
    started_after = Counter(s.task for s in starts.values() if s.at >= rerun_at)
    again = [task for task in ended_before if started_after[task]]
    verdict.rerun_after_end = len(again)
    if len(again) > bound:
        verdict.add(f"{len(again)} tasks that had ended ran again (bound {bound}): {sorted(again)}")
    never = [task for task in tasks if task not in by_task]
    if never:
        verdict.add(f"{len(never)} tasks never ran: {never[:5]}")
    for name, text in (expected_outputs() if expected is None else expected).items():
        path = folder / name
        got = path.read_text() if path.exists() else None
        if got != text:
            verdict.add(f"{name}: {got!r} instead of {text!r}")
    return verdict


def hpcflow_env(home: Path) -> dict[str, str]:
    return {**os.environ, "HPCFLOW_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200"}


def engine_args(engine: str) -> list[str]:
    args = ["--threads", str(SLOTS), "--engine", engine]
    return args + (["--workers", "1"] if engine == "dask" else [])


def running_attempt_pids(lines: list[Line]) -> list[int]:
    """Pids of the attempts that have started and not ended (the id starts with the pid)."""
    ended = {line.attempt for line in lines if line.what == "end"}
    return sorted(
        {int(line.attempt.split("-")[0]) for line in lines
         if line.what == "start" and line.attempt not in ended}
    )  # fmt: skip


@dataclass(frozen=True)
class Iteration:
    """One iteration's random choices and what it saw."""

    number: int
    engine: str
    fault: str
    after_ends: int
    verdict: Verdict
    seconds: float
    #: What the fault struck ("driver 1234", "node n2"), "" when the run had ended first.
    struck: str = ""


def run_iteration(number: int, rng: random.Random, base: Path) -> Iteration:
    """One first run, one fault at a random instant, one re-run to the end; checked."""
    began = time.monotonic()
    engine = rng.choice(ENGINES)
    fault = rng.choice(FAULTS)
    after_ends = rng.randint(1, len(TASKS) - 6)
    folder = base / f"it{number:04d}"
    folder.mkdir(parents=True)
    (folder / "steps.py").write_text(textwrap.dedent(STEPS))
    (folder / "workflow.yaml").write_text(WORKFLOW)
    env = hpcflow_env(base / "home")
    argv = [
        sys.executable,
        "-m",
        "hpcflow.cli.main",
        "run",
        "workflow.yaml",
        "-q",
        *engine_args(engine),
    ]
    first = subprocess.Popen(
        argv, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    log_path = folder / "attempts"
    fault_at = time.time()
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and first.poll() is None:
            if sum(line.what == "end" for line in read_lines(log_path)) >= after_ends:
                break
            time.sleep(0.02)
        fault_at = time.time()
        if first.poll() is None:
            if fault == "driver":
                os.kill(first.pid, signal.SIGKILL)
            else:
                victims = running_attempt_pids(read_lines(log_path))
                if victims:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(rng.choice(victims), signal.SIGKILL)
        _, first_err = first.communicate(timeout=240)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.communicate()
    first_err = locals().get("first_err", "")
    rerun_at = time.time()
    again = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    verdict = check(read_lines(log_path), fault_at, rerun_at, folder)
    # A run killed with SIGKILL says nothing; its Dask workers may still print why they
    # lost their scheduler. A run that lived (a task was killed) must not print tracebacks.
    if first.returncode == 2 or (first.returncode >= 0 and "Traceback" in first_err):
        verdict.add(f"the first run exited {first.returncode}: {first_err[-1500:]}")
    if again.returncode != 0:
        verdict.add(f"the re-run exited {again.returncode}: {again.stderr[-1500:]}")
    if "Traceback" in again.stderr:
        verdict.add(f"the re-run printed a traceback: {again.stderr[-1500:]}")
    # Whatever the first run left must be gone before the next iteration loads the machine.
    for proc in psutil.process_iter(["cwd"]):
        try:
            if proc.info["cwd"] and str(folder) in proc.info["cwd"]:
                verdict.add(
                    f"process {proc.pid} ({' '.join(proc.cmdline())[:80]}) outlived both runs"
                )
                proc.kill()
        except psutil.Error:
            continue
    return Iteration(number, engine, fault, after_ends, verdict, time.monotonic() - began)


def campaign(
    iterations: int,
    seed: int,
    base: Path,
    cluster: Any = None,
    start: int = 0,
    faults: tuple[str, ...] | None = None,
) -> list[Iteration]:
    """``iterations`` iterations from ``seed``; each iteration's generator is derived
    from the seed and its number, so one iteration can be replayed alone. With a test
    SLURM ``cluster``, the iterations are its faults (:mod:`tests.fault.campaign_cluster`)
    and ``base`` must be on its shared file system. ``faults``: only these (cluster
    faults only)."""
    done = []
    faults = (faults,) if faults else ()
    for number in range(start, start + iterations):
        rng = random.Random(f"{seed}:{number}")
        if cluster is None:
            done.append(run_iteration(number, rng, base))
        else:
            from tests.fault.campaign_cluster import run_cluster_iteration

            done.append(run_cluster_iteration(number, rng, base, cluster, *faults))
        it = done[-1]
        log.info(
            "iteration %d: %s/%s after %d ends, %d attempts, %d ended tasks re-ran, %.1f s, %s",
            number, it.engine, it.fault, it.after_ends, it.verdict.attempts,
            it.verdict.rerun_after_end, it.seconds,
            "ok" if not it.verdict.violations else "; ".join(it.verdict.violations),
        )  # fmt: skip
    return done


def summary(done: Iterable[Iteration], seed: int, bound: int = SLOTS) -> str:
    """A table of faults by kind, iterations and violations (for docs/reliability.md)."""
    done = list(done)
    rows = Counter((it.engine, it.fault) for it in done)
    bad = Counter((it.engine, it.fault) for it in done if it.verdict.violations)
    lines = [
        f"seed {seed}, {len(done)} iterations",
        "| engine | fault | iterations | violations |",
        "|---|---|---|---|",
    ]
    for (engine, fault), n in sorted(rows.items()):
        lines.append(f"| {engine} | {fault} | {n} | {bad[(engine, fault)]} |")
    total = sum(len(it.verdict.violations) for it in done)
    rerun = sum(it.verdict.rerun_after_end for it in done)
    lines.append(
        f"violations: {total}; ended tasks that ran again (within the bound of {bound}): {rerun}"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--start", type=int, default=0, help="the first iteration's number")
    parser.add_argument("--faults", default="", help="with --cluster: only these, comma-separated")
    parser.add_argument("--keep", action="store_true", help="keep the iterations' folders")
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="the cluster faults, in pilot mode on a test SLURM cluster this starts",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    cluster = None
    if args.cluster:
        from tests.fault.campaign_cluster import CPUS
        from tests.slurm_cluster import start_cluster

        # SlurmdTimeout 6 s: a dead node is declared DOWN within seconds, not 5 minutes.
        cluster = start_cluster(nodes=3, cpus=CPUS, keep=args.keep, slurmd_timeout=6)
        base = cluster.mkdtemp(prefix="campaign-")
    else:
        base = Path(tempfile.mkdtemp(prefix="hpcflow-campaign-"))
    try:
        only = tuple(f for f in args.faults.split(",") if f) or None
        done = campaign(args.iterations, args.seed, base, cluster, args.start, only)
    finally:
        if not args.keep:
            subprocess.run(["rm", "-rf", str(base)], check=False)
        if cluster is not None:
            cluster.stop()
    if cluster is not None:
        from tests.fault.campaign_cluster import SLOTS as CLUSTER_SLOTS

        print(summary(done, args.seed, CLUSTER_SLOTS))
    else:
        print(summary(done, args.seed))
    return 1 if any(it.verdict.violations for it in done) else 0


if __name__ == "__main__":
    sys.exit(main())
