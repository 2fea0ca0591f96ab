"""A local driver is SIGKILLed while shell, MPI and Python tasks run: its tasks die with
it, and the immediate re-run never has two attempts of one task alive at once.

The shell tasks each leave a daemon too (``(setsid … &)``: a double fork, so it is
nobody's child), the MPI task runs two ranks under Open MPI's ``mpirun``, and each
Python task starts a child process.

Every attempt writes to side-effect files of its task (the task's own lines to
``TASK.log``, each waiter process to a file of its own beside it), outside hpcflow's state:
``start <attempt> <time> <pid>`` when it starts, ``beat <attempt> <time> <pid>`` every
few hundredths of a second while it waits for a gate file this test creates, and ``end
<attempt> <time>`` once through the gate. An attempt's life is from its start to its
last line; no two lives of one task may overlap, and no process an attempt named may be
alive 5 s after its driver was killed. The waits are on the gate, not on fixed sleeps,
so every task is known to be running when the driver is killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from hpcflow.worker.guardian import MARK_VAR
from tests.conftest import left_with, processes_with, write_workflow
from tests.fault.test_driver_killed import wait_for

#: What each shell task's waiter runs (its command line carries the run's marker).
WAITER = """
import os, random, sys, time
log, attempt, gate = sys.argv[1:4]
log = f"{log}.{os.getpid()}.{random.getrandbits(32)}"  # a file of its own (see attempts())
deadline = time.monotonic() + 120
while not os.path.exists(gate) and time.monotonic() < deadline:
    with open(log, "a") as fh:
        fh.write(f"beat {attempt} {time.time()} {os.getpid()}\\n")
    time.sleep(0.05)
"""

#: The Python tasks: the same wait, in the process that runs the task.
MODULE = """
import os, random, subprocess, sys, time


def wait(i, effects, gate, waiter, marker):
    if marker.startswith("@"):  # the marker is in that file
        with open(marker[1:]) as fh:
            marker = fh.read().strip()
    log = os.path.join(effects, f"py-{i}.log")
    attempt = f"{os.getpid()}.{random.getrandbits(32)}"
    with open(log, "a") as fh:
        fh.write(f"start {attempt} {time.time()} {os.getpid()}\\n")
    # A child of the task too (it must die with it), then the task's own wait.
    subprocess.Popen([sys.executable, waiter, log, attempt + "c", gate, marker])
    deadline = time.monotonic() + 120
    while not os.path.exists(gate) and time.monotonic() < deadline:
        with open(log, "a") as fh:
            fh.write(f"beat {attempt} {time.time()} {os.getpid()}\\n")
        time.sleep(0.05)
    with open(log, "a") as fh:
        fh.write(f"end {attempt} {time.time()}\\n")
    return i
"""

WORKFLOW = """
name: die-with-driver
tasks:
  - name: sh
    foreach: {{i: {{range: [0, 2]}}}}
    command: >-
      a=$BASHPID.$RANDOM;
      echo "start $a $EPOCHREALTIME $BASHPID" >> {effects}/sh-{{i}}.log;
      (setsid {python} {waiter} {effects}/sh-{{i}}.log ${{a}}c {gate} {marker} &);
      {python} {waiter} {effects}/sh-{{i}}.log $a {gate} {marker};
      echo "end $a $EPOCHREALTIME" >> {effects}/sh-{{i}}.log
  - name: mpi
    command: >-
      a=$BASHPID.$RANDOM;
      echo "start $a $EPOCHREALTIME $BASHPID" >> {effects}/mpi.log;
      mpirun --mca plm isolated --oversubscribe --bind-to none -n 2
      {python} {waiter} {effects}/mpi.log $a {gate} {marker};
      echo "end $a $EPOCHREALTIME" >> {effects}/mpi.log
    env: {{OMPI_ALLOW_RUN_AS_ROOT: "1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: "1"}}
  - name: py
    foreach: {{i: {{range: [0, 2]}}}}
    python: dwd_tasks:wait
    params: {{effects: {effects}, gate: {gate}, waiter: {waiter}, marker: {marker}}}
"""

TASKS = ("sh-0", "sh-1", "mpi", "py-0", "py-1")


@dataclass
class Attempt:
    """One attempt of a task, as its side-effect lines tell it."""

    task: str
    start: float
    last: float
    ended: bool = False
    pids: set[int] = field(default_factory=set)


def attempts(effects: Path, tasks: tuple[str, ...] = TASKS) -> dict[str, list[Attempt]]:
    """Each task's attempts from its side-effect file, in start order (a waiter child's
    lines, ``<attempt>c``, count as its attempt's)."""
    found: dict[str, list[Attempt]] = {}
    for task in tasks:
        lives: dict[str, Attempt] = {}
        # The task's own lines in TASK.log, each waiter's in a file of its own beside it:
        # appends of two processes to one file on a FUSE file system (GlusterFS) can
        # overwrite each other, and a lost line would read as an attempt that never ended.
        text = "".join(path.read_text() for path in sorted(effects.glob(f"{task}.log*")))
        for line in text.splitlines():
            parts = line.split()
            if len(parts) < 3:
                continue  # a line being written
            kind, attempt, when = parts[0], parts[1].rstrip("c"), float(parts[2].replace(",", "."))
            life = lives.setdefault(attempt, Attempt(task, when, when))
            life.start, life.last = min(life.start, when), max(life.last, when)
            life.ended |= kind == "end"
            if len(parts) >= 4:
                life.pids.add(int(parts[3]))
        found[task] = sorted(lives.values(), key=lambda a: a.start)
    return found


def overlaps(found: dict[str, list[Attempt]]) -> list[str]:
    """Pairs of attempts of one task whose lives overlap."""
    bad = []
    for task, lives in found.items():
        for earlier, later in zip(lives, lives[1:], strict=False):
            if later.start <= earlier.last:
                bad.append(
                    f"{task}: an attempt started at {later.start:.2f} while the one started "
                    f"at {earlier.start:.2f} still ran (its last line at {earlier.last:.2f})"
                )
    return bad


def alive(pids: set[int], since: float) -> list[str]:
    """The command lines of those of ``pids`` that still live as the processes they were
    (started before ``since``: a reused pid is someone else)."""
    living = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            if proc.status() != psutil.STATUS_ZOMBIE and proc.create_time() <= since + 1:
                living.append(f"{pid}: {' '.join(proc.cmdline())[:200]}")
        except psutil.Error:
            continue
    return living


def scene(tmp_path: Path, module: str, text: str) -> tuple[Path, Path, Path]:
    """The side-effect folder, the gate (not there yet), the waiter script, and the
    Python tasks' module ``module`` (``text``) in ``tmp_path``."""
    effects, gate, waiter = tmp_path / "effects", tmp_path / "gate", tmp_path / "dwd_waiter.py"
    effects.mkdir()
    waiter.write_text(WAITER)
    (tmp_path / f"{module}.py").write_text(text)
    return effects, gate, waiter


def start_run(wf: Path, env: dict[str, str], engine: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "-q",
         "--threads", "5", "--engine", engine],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip


@dataclass
class Killed:
    """What a killed run and its immediate re-run left: each task's attempts, the
    processes of the killed run still alive 5 s after the kill, the re-run's stderr."""

    attempts: dict[str, list[Attempt]]
    left: list[str]
    stderr: str


def kill_and_rerun(tmp_path: Path, env: dict[str, str], engine: str, guardians: bool) -> Killed:
    """Run the workflow, SIGKILL its driver (its guardians first, if ``guardians``) once
    all five tasks run, start the re-run at once, and open the gate once the re-run's
    five tasks run too (or it gave up)."""
    marker = f"hpcflow-dwd-{engine}-{time.time_ns()}"
    effects, gate, waiter = scene(tmp_path, "dwd_tasks", MODULE)
    text = WORKFLOW.format(
        effects=effects, gate=gate, waiter=waiter, marker=marker, python=sys.executable
    )
    wf = write_workflow(tmp_path, text)
    first = start_run(wf, env, engine)
    rerun: subprocess.Popen[str] | None = None
    try:
        wait_for(
            lambda: all(lives for lives in attempts(effects).values()) or first.poll() is not None,
            120,
            "all five tasks of the first run to start",
        )
        assert first.poll() is None, first.communicate()
        # Every process the driver started: tasks, shells, workers, fork servers...
        family = psutil.Process(first.pid).children(recursive=True)
        if guardians:  # as if killed together with the driver (kill -9 -1, say)
            for proc in family:
                if MARK_VAR in " ".join(proc.cmdline()):
                    proc.kill()
        killed_at = time.time()
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
        old = attempts(effects)
        pids = {p.pid for p in family} | {
            pid for lives in old.values() for life in lives for pid in life.pids
        }
        # The re-run starts at once; every task of it is running before the gate opens.
        rerun = start_run(wf, env, engine)
        wait_for(
            lambda: (
                all(len(lives) >= 2 for lives in attempts(effects).values())
                or rerun.poll() is not None
            ),
            120,
            "all five tasks of the re-run to start",
        )
        deadline = killed_at + 5
        wait_for(lambda: not alive(pids, killed_at) or time.time() > deadline, 10, "5 s")
        left = alive(pids, killed_at)
        gate.touch()
        out, err = rerun.communicate(timeout=120)
        assert rerun.returncode == 0, out + err
    finally:
        gate.touch()
        for proc in (first, rerun):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert left_with(marker) == [], processes_with(marker)
    return Killed(attempts(effects), left, err)


@pytest.mark.parametrize("engine", ["pool", "dask"])
def test_tasks_die_with_a_killed_driver_and_never_run_twice_at_once(tmp_path, env, engine):
    killed = kill_and_rerun(tmp_path, env, engine, guardians=False)
    assert killed.left == [], "processes outlived their driver by 5 s"
    # They died with it: the re-run found none left to end.
    assert "still ran on this host" not in killed.stderr, killed.stderr
    assert overlaps(killed.attempts) == []
    for task, lives in killed.attempts.items():
        assert [life.ended for life in lives] == [False, True], (task, lives)


def test_a_rerun_ends_what_a_killed_run_left_before_it_starts_anything(tmp_path, env):
    """The driver and its guardian are killed together: the shell tasks run on (the
    Python tasks' workers die with the driver), until the re-run ends them, says so,
    and only then starts its own attempts."""
    killed = kill_and_rerun(tmp_path, env, "pool", guardians=True)
    assert overlaps(killed.attempts) == []
    assert killed.left == []
    assert "task process(es) still ran on this host" in killed.stderr, killed.stderr
    for task in ("sh[i=0]", "sh[i=1]", "mpi"):
        assert task in killed.stderr, killed.stderr
    for task, lives in killed.attempts.items():
        assert [life.ended for life in lives] == [False, True], (task, lives)


def kill_cluster_driver_and_rerun(
    tmp_path: Path,
    slurm_env: dict[str, str],
    mode_args: list[str],
    kill: Callable[[subprocess.Popen[str], Path, Callable[[], bool]], float],
) -> None:
    """The five tasks on the test SLURM cluster (``mode_args``): once they all run,
    ``kill(first, effects, ready)`` kills the run's driver and returns when; then no task
    process may live 5 s later, the re-run goes to the end, no two attempts of a task
    overlap, and each killed attempt never ends and wrote nothing 5 s after the kill.

    The tasks run in other PID namespaces, so what is alive is found by the marker each
    run's waiters carry (read from a file when they start: the first run's and the
    re-run's differ, the workflow does not)."""
    effects, gate, waiter = scene(tmp_path, "dwd_tasks", MODULE)
    marker_file = tmp_path / "marker"
    text = WORKFLOW.format(
        effects=effects, gate=gate, waiter=waiter, python=sys.executable,
        marker=f"$(cat {marker_file})",
    )  # fmt: skip
    text = text.replace(f"marker: $(cat {marker_file})", f"marker: '@{marker_file}'")
    wf = write_workflow(tmp_path, text)
    first_marker = f"hpcflow-dwd-cluster-{time.time_ns()}"
    marker_file.write_text(first_marker)
    args = [sys.executable, "-m", "hpcflow.cli.main", "run", str(wf), "-q",
            "--profile", "slurm-test", *mode_args]  # fmt: skip
    first = subprocess.Popen(
        args, env=slurm_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    rerun: subprocess.Popen[str] | None = None
    try:
        killed_at = kill(first, effects, lambda: all(attempts(effects).values()))
        assert left_with(first_marker, timeout=5) == [], "tasks outlived their driver by 5 s"
        marker_file.write_text(f"hpcflow-dwd-cluster-{time.time_ns()}")
        rerun = subprocess.Popen(
            args, env=slurm_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        wait_for(
            lambda: (
                all(len(lives) >= 2 for lives in attempts(effects).values())
                or rerun.poll() is not None
            ),
            240,
            "all five tasks of the re-run to start",
        )
        gate.touch()
        out, err = rerun.communicate(timeout=240)
        assert rerun.returncode == 0, out + err
    finally:
        gate.touch()
        for proc in (first, rerun):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL) if proc is first else proc.kill()
                proc.wait()
    found = attempts(effects)
    assert overlaps(found) == []
    for task, lives in found.items():
        # Ended by hpcflow, a task's process group at once: no shell went on to its
        # next line after its command was killed, and nothing of it wrote 5 s later.
        assert [life.ended for life in lives] == [False, True], (task, lives)
        assert lives[0].last < killed_at + 5, (task, lives[0].last - killed_at)


@pytest.mark.slurm
def test_tasks_die_with_a_killed_pilot_driver(tmp_path, slurm_env, slurm_cluster):
    """A 3-node pilot allocation; its driver rank gets SIGKILL. The allocation's head,
    seeing its driver killed, has every worker kill its tasks' process groups through
    the scheduler, then ends the allocation at once: this passes without the guardians
    too. It fails when the head leaves the tasks to SLURM after its 30 s grace (they
    write on, and SLURM's SIGTERM, one process at a time, let a shell run its next line)."""
    from tests.fault.test_driver_killed import kill_pilot_driver

    def kill(first: subprocess.Popen[str], effects: Path, ready: Callable[[], bool]) -> float:
        return kill_pilot_driver(
            first, tmp_path, slurm_cluster, ready, "all five tasks of the first run to start"
        )

    kill_cluster_driver_and_rerun(tmp_path, slurm_env, ["--nodes", "3"], kill)


@pytest.mark.slurm
def test_tasks_die_with_a_killed_elastic_driver(tmp_path, slurm_env, slurm_cluster):
    """Elastic mode (worker batch jobs; the scheduler lives in the driver's process); the
    driver gets SIGKILL. Each worker sees its scheduler connection break and closes; its
    teardown (``--preload hpcflow.worker.run_over``) kills its tasks before Dask waits for
    their threads, and ends the worker's process if a Python task still runs in one.
    Without it every task ran on past 5 s, and a Python task beside the re-run's."""

    def kill(first: subprocess.Popen[str], effects: Path, ready: Callable[[], bool]) -> float:
        wait_for(lambda: ready() or first.poll() is not None, 240, "all five tasks to start")
        assert first.poll() is None, first.communicate()
        os.kill(first.pid, signal.SIGKILL)  # the driver alone, not its process group
        killed_at = time.time()
        first.wait(timeout=30)
        return killed_at

    kill_cluster_driver_and_rerun(
        tmp_path, slurm_env, ["--mode", "elastic", "--transport", "tcp"], kill
    )


#: A Python task whose first execution starts a child and then kills its own worker.
DIES_ONCE = """
import os, random, signal, subprocess, sys, time


def _child_beats(log, attempt):
    # The beats of the attempt's child (its waiter writes a file of its own, LOG.*).
    folder, name = os.path.split(log)
    texts = [open(os.path.join(folder, f)).read() for f in os.listdir(folder)
             if f.startswith(name + ".")]
    return sum(t.count(" " + attempt + "c ") for t in texts)


def dies_once(effects, gate, waiter, marker):
    log = os.path.join(effects, "py-dies.log")
    attempt = f"{os.getpid()}.{random.getrandbits(32)}"
    with open(log, "a") as fh:
        fh.write(f"start {attempt} {time.time()} {os.getpid()}\\n")
    subprocess.Popen([sys.executable, waiter, log, attempt + "c", gate, marker])
    died = os.path.join(effects, "died")
    if not os.path.exists(died):
        while _child_beats(log, attempt) < 2:  # its child runs
            time.sleep(0.02)
        open(died, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    while not os.path.exists(gate):
        time.sleep(0.05)
    with open(log, "a") as fh:
        fh.write(f"end {attempt} {time.time()}\\n")
"""


def test_what_a_python_task_started_dies_with_its_worker(tmp_path, env):
    """Pool engine: a Python task starts a child, then its worker process is killed. The
    chunk runs again on a fresh worker, but only once the dead worker's task's child is
    gone: the two executions' lives do not overlap."""
    marker = f"hpcflow-dwd-worker-{time.time_ns()}"
    effects, gate, waiter = scene(tmp_path, "dwd_dies", DIES_ONCE)
    wf = write_workflow(
        tmp_path,
        f"""
name: dies-once
tasks:
  - name: py
    python: dwd_dies:dies_once
    params: {{effects: {effects}, gate: {gate}, waiter: {waiter}, marker: {marker}}}
""",
    )
    run = start_run(wf, env, "pool")
    log = effects / "py-dies.log"

    def second_runs() -> bool:
        """The second execution has started and its child has beaten a few times."""
        lines = log.read_text().splitlines() if log.exists() else []
        starts = [line.split()[1] for line in lines if line.startswith("start ")]
        if len(starts) < 2:
            return False
        child = "".join(p.read_text() for p in effects.glob("py-dies.log.*"))
        return child.count(f"beat {starts[1]}c ") >= 6

    try:
        wait_for(lambda: second_runs() or run.poll() is not None, 120, "the second execution")
        gate.touch()
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, out + err
    finally:
        gate.touch()
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    found = {"py-dies": attempts(effects, ("py-dies",))["py-dies"]}
    assert [life.ended for life in found["py-dies"]] == [False, True], found
    assert overlaps(found) == []
    assert left_with(marker) == [], processes_with(marker)
