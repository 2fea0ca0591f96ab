"""A randomized fault campaign with exactly-once accounting, counted from side effects.

Each iteration copies a workflow of 46 tasks of mixed kinds into a folder of its own: 20
shell tasks (a sweep), 20 Python tasks (a sweep whose values a reduce gathers), a chain
of three Python tasks handing values on, a shell reduce and a Python reduce, plus one
task that reads both reduces. Every attempt of every task appends a ``start`` line when
it begins, a ``beat`` line every 0.1 s while it works and an ``end`` line when it has
written its output, each with an attempt id (its pid and a random token) and a wall-clock
time, to a file of its own in ``attempts/``: outside hpcflow's state, written by the
tasks themselves.

The iteration picks, from its own seeded random generator, a fault, an engine (the pool
or the embedded Dask cluster) and an instant (after K attempts have ended):

* ``driver``: SIGKILL of the ``hpcflow run`` process alone (not its process group: its
  tasks must die with it);
* ``task``: SIGKILL of one running attempt's process (the shell or the Python worker
  whose pid its attempt id names);
* ``disk``: the iteration's folder (workflow, outputs, ``.hpcflow``) is a tmpfs of 8 MiB
  of its own, and at the instant a filler file is written to it until it is full; the
  run must end within the same wait as other faults, with a clear error (the disk is
  full, or the tasks it failed) and no traceback; the filler is then removed.
  ``attempts/`` is a link to a folder on the larger file system beside it, so the
  tasks' lines are written whole while the disk is full.

Then it re-runs the workflow to the end and checks, from ``attempts/`` and the outputs
alone:

1. no task ever had two attempts alive at once (an attempt is alive from its ``start``
   to its ``end``, or to its last ``beat`` when it was killed: what it wrote proves it
   was alive then), and no attempt of the faulted run ends after the re-run began;
2. of the tasks that had ended before the fault, at most ``SLOTS`` ran again (attempts
   that had ended but whose end the driver had not yet recorded: tasks in flight);
3. every output is exact, the faulted run ended within its wait, the re-run exits 0, and
   neither printed a traceback (the faulted run: unless it was killed).

Run it as a script for a recorded campaign (``python -m tests.fault.campaign --iterations
200 --seed 1``); ``tests/fault/test_campaign.py`` runs a short seeded one in the suite.
``--cluster`` runs the faults on a cluster instead (pilot driver, worker, node, follower,
cancelled allocation; :mod:`tests.fault.campaign_cluster`) on a test SLURM cluster it
starts; ``--all`` draws each iteration's fault from every fault of both, on a test SLURM
cluster it starts. ``--start N --iterations 1`` (with the same seed, mode and
``--faults``) replays iteration N alone. The disk fault mounts a tmpfs: it needs root.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
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
from collections.abc import Callable, Iterable, Iterator
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
FAULTS = ("driver", "task", "disk")

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
    "mkdir -p out && echo {i} {i} {i} > out/sh{i}.txt && "
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
      cat out/sh*.txt | awk '{{s += $1 + $2 + $3}} END {{print s}}' > sh_total.txt &&
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
      cat sh_total.txt py_total.txt chain.txt > last.txt &&
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
    #: Ended tasks that may run again (the slots in flight).
    bound: int = SLOTS


@dataclass
class Faulted:
    """What one iteration's faulted run and re-run did."""

    #: What the fault struck, "" when the run had ended before the instant came.
    struck: str
    fault_at: float
    rerun_at: float
    first_rc: int
    first_err: str
    again_rc: int
    again_err: str
    #: A run that did not end in time, what the fault left behind.
    problems: list[str]


def _run_to_end(
    argv: list[str], folder: Path, env: dict[str, str], timeout: float
) -> tuple[int, str, str]:
    """Run ``argv`` in ``folder`` to its end: (exit status, stderr, a problem or "").
    One that has not ended after ``timeout`` seconds is killed with its process group."""
    proc = subprocess.Popen(
        argv, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        _, err = proc.communicate(timeout=timeout)
        return proc.returncode, err, ""
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        return proc.returncode, err, f"the re-run had not ended {timeout:.0f} s after it began"


def fault_and_rerun(
    argv: list[str],
    folder: Path,
    env: dict[str, str],
    after_ends: int,
    strike: Callable[[subprocess.Popen[str]], str],
    restore: Callable[[str], list[str]] = lambda struck: [],
    *,
    wait_s: float = 180,
    hang_s: float = 240,
    rerun_s: float = 600,
) -> Faulted:
    """The shape every iteration shares: run ``argv`` in ``folder``; once ``after_ends``
    attempts have ended (at most ``wait_s`` seconds) ``strike`` it (unless it has ended);
    wait up to ``hang_s`` seconds for it to end (killing its process group after that);
    ``restore`` what the fault broke (it returns problems it saw); re-run to the end."""
    log_path = folder / "attempts"
    first = subprocess.Popen(
        argv, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    struck, first_err, problems = "", "", []
    fault_at = time.time()
    try:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and first.poll() is None:
            if sum(line.what == "end" for line in read_lines(log_path)) >= after_ends:
                break
            time.sleep(0.02)
        fault_at = time.time()
        if first.poll() is None:
            struck = strike(first)
        try:
            _, first_err = first.communicate(timeout=hang_s)
        except subprocess.TimeoutExpired:
            problems.append(
                f"the faulted run ({struck or 'not struck'}) had not ended {hang_s:.0f} s "
                "after the fault"
            )
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.communicate()
        problems += restore(struck)
    rerun_at = time.time()
    again_rc, again_err, hung = _run_to_end(argv, folder, env, rerun_s)
    problems += [hung] if hung else []
    return Faulted(
        struck, fault_at, rerun_at, first.returncode, first_err, again_rc, again_err, problems
    )


def rerun_verdict(faulted: Faulted, folder: Path, **expect: Any) -> Verdict:
    """:func:`check` of what an iteration left in ``folder``, plus what every iteration
    asks of its runs: each ended in time, the re-run exits 0 and prints no traceback."""
    verdict = check(
        read_lines(folder / "attempts"), faulted.fault_at, faulted.rerun_at, folder, **expect
    )
    for problem in faulted.problems:
        verdict.add(problem)
    if faulted.again_rc != 0:
        verdict.add(f"the re-run exited {faulted.again_rc}: {faulted.again_err[-1500:]}")
    if "Traceback" in faulted.again_err:
        verdict.add(f"the re-run printed a traceback: {faulted.again_err[-1500:]}")
    return verdict


#: The filler file the disk fault writes until the file system is full.
FILLER = "filler.bin"
#: The size of an iteration's file system for the disk fault (a run needs under 1 MiB).
DISK_SIZE = "8m"


@contextlib.contextmanager
def small_disk(folder: Path, size: str = DISK_SIZE) -> Iterator[Path]:
    """``folder`` as a tmpfs of its own of ``size`` (mounting needs root), unmounted at
    the end; its ``attempts`` is a link to a folder beside it, on the larger file system,
    so the tasks' lines (the checker's evidence) are written whole when it is full."""
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if made.returncode != 0:
        raise RuntimeError(
            f"the disk fault cannot mount a {size} tmpfs on {folder} (it needs root): "
            f"{made.stderr.strip()}"
        )
    try:
        attempts = folder.with_name(f"{folder.name}.attempts")
        attempts.mkdir()
        (folder / "attempts").symlink_to(attempts)
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


def fill(folder: Path) -> int:
    """Write ``folder``/FILLER until its file system says it is full; the bytes written."""
    written = 0
    chunk = bytes(1 << 20)
    try:
        fd = os.open(folder / FILLER, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            while True:
                written += os.write(fd, chunk)
        finally:
            os.close(fd)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
    return written


def _first_run_problem(fault: str, faulted: Faulted) -> str:
    """What is wrong with how the faulted run ended, or ""."""
    rc, err = faulted.first_rc, faulted.first_err
    if fault != "disk" or not faulted.struck:
        # A run killed with SIGKILL says nothing; its Dask workers may still print why
        # they lost their scheduler. A run that lived must not print tracebacks.
        if rc == 2 or (rc >= 0 and "Traceback" in err):
            return f"the first run exited {rc}: {err[-1500:]}"
        return ""
    # A full disk: a clear error (the disk is full, or the tasks it failed), no traceback.
    if rc == 0 or "Traceback" in err or not ("disk is full" in err or "failed" in err):
        return f"the run with a full disk exited {rc}, not with a clear error: {err[-1500:]}"
    return ""


def run_iteration(number: int, rng: random.Random, base: Path, fault: str) -> Iteration:
    """One first run, ``fault`` at a random instant, one re-run to the end; checked."""
    began = time.monotonic()
    engine = rng.choice(ENGINES)
    after_ends = rng.randint(1, len(TASKS) - 6)
    folder = base / f"it{number:04d}"
    folder.mkdir(parents=True)
    argv = [sys.executable, "-m", "hpcflow.cli.main", "run", "workflow.yaml", "-q",
            *engine_args(engine)]  # fmt: skip

    def strike(first: subprocess.Popen[str]) -> str:
        if fault == "driver":
            os.kill(first.pid, signal.SIGKILL)
            return f"driver {first.pid}"
        if fault == "disk":
            return f"disk filled ({fill(folder)} bytes)"
        victims = running_attempt_pids(read_lines(folder / "attempts"))
        if not victims:
            return "no running attempt"
        victim = rng.choice(victims)
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim, signal.SIGKILL)
        return f"task {victim}"

    def restore(struck: str) -> list[str]:
        (folder / FILLER).unlink(missing_ok=True)
        return []

    with contextlib.ExitStack() as stack:
        if fault == "disk":
            stack.enter_context(small_disk(folder))
        (folder / "steps.py").write_text(textwrap.dedent(STEPS))
        (folder / "workflow.yaml").write_text(WORKFLOW)
        faulted = fault_and_rerun(
            argv, folder, hpcflow_env(base / "home"), after_ends, strike, restore
        )
        verdict = rerun_verdict(faulted, folder)
        problem = _first_run_problem(fault, faulted)
        if problem:
            verdict.add(problem)
        # Whatever the first run left must be gone before the next iteration loads the
        # machine (and before the small disk is unmounted).
        for proc in psutil.process_iter(["cwd"]):
            try:
                if proc.info["cwd"] and str(folder) in proc.info["cwd"]:
                    verdict.add(
                        f"process {proc.pid} ({' '.join(proc.cmdline())[:80]}) outlived both runs"
                    )
                    proc.kill()
            except psutil.Error:
                continue
    return Iteration(
        number, engine, fault, after_ends, verdict, time.monotonic() - began, faulted.struck
    )


def kinds(mode: str) -> list[tuple[str, str]]:
    """Every (engine, fault) a campaign of ``mode`` (local, cluster, all) draws from."""
    from tests.fault.campaign_cluster import FAULTS as CLUSTER_FAULTS

    local = [(engine, fault) for engine in ENGINES for fault in FAULTS]
    cluster = [("pilot", fault) for fault in CLUSTER_FAULTS]
    return {"local": local, "cluster": cluster, "all": local + cluster}[mode]


def campaign(
    iterations: int,
    seed: int,
    base: Path,
    cluster: Any = None,
    start: int = 0,
    faults: tuple[str, ...] | None = None,
    *,
    mode: str | None = None,
    cluster_base: Path | None = None,
) -> list[Iteration]:
    """``iterations`` iterations from ``seed``; each iteration's generator is derived
    from the seed and its number, so one iteration can be replayed alone (the same
    ``mode`` and ``faults``). ``mode``: ``local`` (the default without a ``cluster``),
    ``cluster`` (the default with one: its faults, :mod:`tests.fault.campaign_cluster`)
    or ``all`` (every fault of both). Local iterations run in ``base``, cluster ones in
    ``cluster_base`` (default ``base``), which must be on the cluster's shared file
    system. ``faults``: only these."""
    mode = mode or ("local" if cluster is None else "cluster")
    pool = sorted({fault for _, fault in kinds(mode)} if not faults else set(faults))
    local_faults = set(FAULTS)
    done = []
    for number in range(start, start + iterations):
        rng = random.Random(f"{seed}:{number}")
        fault = rng.choice(pool)
        if fault in local_faults:
            done.append(run_iteration(number, rng, base, fault))
        else:
            from tests.fault.campaign_cluster import run_cluster_iteration

            done.append(run_cluster_iteration(number, rng, cluster_base or base, cluster, fault))
        it = done[-1]
        log.info(
            "iteration %d: %s/%s after %d ends (%s), %d attempts, %d ended tasks re-ran, "
            "%.1f s, %s",
            number, it.engine, it.fault, it.after_ends, it.struck or "nothing struck",
            it.verdict.attempts, it.verdict.rerun_after_end, it.seconds,
            "ok" if not it.verdict.violations else "; ".join(it.verdict.violations),
        )  # fmt: skip
    return done


def summary(done: Iterable[Iteration], seed: int, mode: str = "local") -> str:
    """A table of faults by kind (every kind of ``mode``, drawn or not), iterations and
    violations (for docs/reliability.md)."""
    done = list(done)
    rows = Counter((it.engine, it.fault) for it in done)
    bad = Counter((it.engine, it.fault) for it in done if it.verdict.violations)
    missed = Counter((it.engine, it.fault) for it in done if not it.struck)
    again: Counter[tuple[str, str]] = Counter()
    for it in done:
        again[(it.engine, it.fault)] += it.verdict.rerun_after_end
    bounds = {(it.engine, it.fault): it.bound for it in done}
    lines = [
        f"seed {seed}, {len(done)} iterations",
        "| engine | fault | iterations | violations | run over before the fault "
        "| ended tasks run again (bound per iteration) |",
        "|---|---|---|---|---|---|",
    ]
    for kind in kinds(mode):
        lines.append(
            f"| {kind[0]} | {kind[1]} | {rows[kind]} | {bad[kind]} | {missed[kind]} "
            f"| {again[kind]} ({bounds.get(kind, '-')}) |"
        )
    total = sum(len(it.verdict.violations) for it in done)
    lines.append(f"violations: {total}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--start", type=int, default=0, help="the first iteration's number")
    parser.add_argument("--faults", default="", help="only these, comma-separated")
    parser.add_argument("--keep", action="store_true", help="keep the iterations' folders")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--cluster",
        action="store_true",
        help="the cluster faults, in pilot mode on a test SLURM cluster this starts",
    )
    where.add_argument(
        "--all",
        action="store_true",
        help="every fault, local and cluster (on a test SLURM cluster this starts)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    mode = "all" if args.all else "cluster" if args.cluster else "local"
    only = tuple(f for f in args.faults.split(",") if f) or None
    known = {fault for _, fault in kinds(mode)}
    if only and not set(only) <= known:
        parser.error(f"--faults: {sorted(set(only) - known)} not among {sorted(known)}")
    cluster = None
    base = Path(tempfile.mkdtemp(prefix="hpcflow-campaign-"))
    cluster_base = None
    try:
        if mode != "local":
            from tests.fault.campaign_cluster import CPUS
            from tests.slurm_cluster import start_cluster

            # SlurmdTimeout 6 s: a dead node is declared DOWN within seconds, not 5 minutes.
            cluster = start_cluster(nodes=3, cpus=CPUS, keep=args.keep, slurmd_timeout=6)
            cluster_base = cluster.mkdtemp(prefix="campaign-")
        done = campaign(
            args.iterations, args.seed, base, cluster, args.start, only,
            mode=mode, cluster_base=cluster_base,
        )  # fmt: skip
    finally:
        if not args.keep:
            for folder in (base, cluster_base):
                if folder is not None:
                    subprocess.run(["rm", "-rf", str(folder)], check=False)
        if cluster is not None:
            cluster.stop()
    print(summary(done, args.seed, mode))
    return 1 if any(it.verdict.violations for it in done) else 0


if __name__ == "__main__":
    sys.exit(main())
