"""The fault campaign's faults on a cluster: the campaign's workflow (tests/fault/campaign.py)
plus one MPI task, run in pilot mode on the project's test SLURM cluster, with one fault
at a random instant, then re-run to the end and checked from the tasks' own lines.

The faults, each at the instant K attempts have ended:

* ``pilot-driver``: SIGKILL of the driver inside the allocation;
* ``worker``: SIGKILL of one worker rank of the allocation;
* ``launch``: SIGKILL of the srun that launched the workers (every worker goes with it);
* ``node``: one node of the allocation dies as a machine does (its PID namespace ends:
  slurmd, step daemons, GlusterFS client and every process on it), the head's or another;
  it is started again before the re-run;
* ``follower``: SIGKILL of the submit-side ``hpcflow run`` (the allocation goes on; the
  re-run comes once it has ended);
* ``cancel``: ``scancel`` of the allocation.

The MPI task runs as a job step of two ranks (``resources: {ranks: 2, nodes: 1}``); rank 0
writes its attempt's lines and the output, after an allreduce over both ranks.

``python -m tests.fault.campaign --cluster`` runs these (``--all``: these and the local
faults, drawn alike); ``tests/fault/test_campaign.py`` runs a short seeded version.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psutil

from tests.fault.campaign import (
    STEPS,
    TASKS,
    WORKFLOW,
    Iteration,
    expected_outputs,
    fault_and_rerun,
    hpcflow_env,
    rerun_verdict,
)

log = logging.getLogger("campaign")

FAULTS = ("pilot-driver", "worker", "launch", "node", "follower", "cancel")
#: Nodes of each allocation and CPUs per node of the test cluster: the slots in flight.
NODES = 2
CPUS = 2
SLOTS = NODES * CPUS

MPI_TASK = """
import os, secrets, sys, time
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
LOGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "attempts")


def line(what, attempt):
    os.makedirs(LOGS, exist_ok=True)
    path = os.path.join(LOGS, f"mpi.{attempt}")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{what} mpi {attempt} {time.time():.6f}\\n".encode())
    finally:
        os.close(fd)


attempt = comm.bcast(f"{os.getpid()}-{secrets.token_hex(4)}" if rank == 0 else None)
if rank == 0:
    line("start", attempt)
for _ in range(3):
    time.sleep(0.1)
    if rank == 0:
        line("beat", attempt)
total = comm.allreduce(rank + 1)
if rank == 0:
    with open("mpi.txt", "w") as f:
        f.write(f"{comm.Get_size()} {total}\\n")
    line("end", attempt)
"""

CLUSTER_WORKFLOW = (
    WORKFLOW
    + f"""  - name: mpi
    resources: {{ranks: 2, nodes: 1}}
    argv: [{sys.executable}, mpi_task.py]
    outputs: [mpi.txt]
"""
)

CLUSTER_TASKS = [*TASKS, "mpi"]


def cluster_outputs() -> dict[str, str]:
    """Every output of the cluster workflow and its exact text."""
    return {**expected_outputs(), "mpi.txt": "2 3\n"}


def _run_dir(folder: Path) -> Path | None:
    runs = folder / ".hpcflow" / "runs"
    found = sorted(runs.iterdir()) if runs.is_dir() else []
    return found[0] if found else None


def _rank_processes(run_dir: Path, role: str) -> list[int]:
    """This machine's pids of the pilot's ``role`` ranks (driver, worker) for ``run_dir``
    (Python processes: not the srun that launched the workers, whose arguments match too)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if (
            cmd
            and Path(cmd[0]).name.startswith("python")
            and "hpcflow.bootstrap" in cmd
            and role in cmd
            and str(run_dir) in cmd
        ):
            found.append(proc.pid)
    return sorted(found)


def worker_launch(run_dir: Path) -> psutil.Process | None:
    """The srun that launched the pilot's workers for ``run_dir``."""
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if cmd and Path(cmd[0]).name == "srun" and "worker" in cmd and str(run_dir) in cmd:
            return proc
    return None


def _jobs(cluster: Any) -> list[tuple[str, str]]:
    """(job id, node list) of every job in the test cluster's queue."""
    out = cluster.run(["squeue", "-h", "-o", "%i %N"], check=False).stdout
    rows = [line.split() for line in out.splitlines() if line.strip()]
    return [(row[0], row[1] if len(row) > 1 else "") for row in rows]


def _nodes_of(nodelist: str, cluster: Any) -> list[str]:
    """``n[1-2]`` or ``n1,n3`` as node names."""
    return cluster.run(["scontrol", "show", "hostnames", nodelist], check=False).stdout.split()


def _drain(cluster: Any, timeout: float) -> list[tuple[str, str]]:
    deadline = time.monotonic() + timeout
    while _jobs(cluster) and time.monotonic() < deadline:
        time.sleep(0.3)
    return _jobs(cluster)


def _strike(
    fault: str, rng: random.Random, folder: Path, first: subprocess.Popen, cluster: Any
) -> str:
    """Do ``fault`` now; what was struck (for the log), or why nothing was."""
    run_dir = _run_dir(folder)
    if fault == "follower":
        os.kill(first.pid, signal.SIGKILL)
        return f"follower {first.pid}"
    if fault == "cancel":
        jobs = [job for job, _ in _jobs(cluster)]
        for job in jobs:
            cluster.run(["scancel", job], check=False)
        return f"scancel {' '.join(jobs) or '(no job)'}"
    if fault == "node":
        queued = _jobs(cluster)
        nodes = [n for _, nodelist in queued for n in _nodes_of(nodelist, cluster)]
        if not nodes:
            return "no node in use"
        node = rng.choice(sorted(set(nodes)))
        cluster.kill_node(node)
        return f"node {node}"
    if run_dir is None:
        return "no run folder yet"
    if fault == "launch":
        launch = worker_launch(run_dir)
        if launch is None:
            return "no worker launch"
        with contextlib.suppress(psutil.Error):
            launch.kill()
        return f"srun {launch.pid}"
    role = "driver" if fault == "pilot-driver" else "worker"
    pids = _rank_processes(run_dir, role)
    if not pids:
        return f"no {role} process"
    pid = rng.choice(pids)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return f"{role} {pid}"


def run_cluster_iteration(
    number: int, rng: random.Random, base: Path, cluster: Any, fault: str
) -> Iteration:
    """One pilot run on ``cluster``, ``fault`` at a random instant, one re-run; checked."""
    began = time.monotonic()
    after_ends = rng.randint(1, len(CLUSTER_TASKS) - 6)
    folder = base / f"it{number:04d}"
    folder.mkdir(parents=True)
    (folder / "steps.py").write_text(textwrap.dedent(STEPS))
    (folder / "mpi_task.py").write_text(textwrap.dedent(MPI_TASK))
    (folder / "workflow.yaml").write_text(CLUSTER_WORKFLOW)
    env = {**hpcflow_env(base / "home"), **cluster.extra_env}
    argv = [sys.executable, "-m", "hpcflow.cli.main", "run", "workflow.yaml", "-q",
            "--profile", "slurm-test", "--nodes", str(NODES)]  # fmt: skip

    def restore(struck: str) -> list[str]:
        if struck.startswith("node "):
            cluster.start_node(struck.split()[1])
        left = _drain(cluster, 300)
        return [f"jobs still queued 300 s after the faulted run: {left}"] if left else []

    faulted = fault_and_rerun(
        argv, folder, env, after_ends,
        lambda first: _strike(fault, rng, folder, first, cluster), restore,
        wait_s=300, hang_s=400, rerun_s=900,
    )  # fmt: skip
    verdict = rerun_verdict(faulted, folder, tasks=CLUSTER_TASKS, expected=cluster_outputs(),
                            bound=SLOTS)  # fmt: skip
    if fault != "follower" and "Traceback" in faulted.first_err:
        verdict.add(f"the faulted run printed a traceback: {faulted.first_err[-1500:]}")
    if _drain(cluster, 120):
        verdict.add("jobs still queued 120 s after the re-run")
    struck = faulted.struck
    log.info("iteration %d: %s struck %s", number, fault, struck or "nothing (the run had ended)")
    return Iteration(
        number, "pilot", fault, after_ends, verdict, time.monotonic() - began, struck, SLOTS
    )
