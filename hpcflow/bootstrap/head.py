"""``python -m hpcflow.bootstrap --role head RUN_DIR -- LAUNCH...``: the batch script's command.

It runs on the node that runs the batch script (SLURM's first node, PBS's mother superior;
in an allocation you already hold, the node of ``hpcflow run``) and starts three things:

* the Dask scheduler (pilot rank 0) and the driver (pilot rank 1), as processes of this node;
* ``LAUNCH``: the srun / mpirun launch of exactly the workers, ``workers_per_node`` on each
  node, so each worker's place on its node is its local rank (and its GPU follows from it).

Why not one launch for everything: a launch of ``nodes × workers + 2`` ranks is laid out
by the batch system's distribution (SLURM's block distribution put 3 of 6 ranks on each of
2 nodes: 3 GPU workers on a node with 2 GPUs), and a layout with two more ranks on one
node than on the others cannot be asked for with srun's or mpirun's ordinary options. A
per-node count can, on every launcher (``--ntasks-per-node``, ``--map-by ppr:N:node``,
PBS ``mpiprocs``), and the scheduler and driver are then where the batch script is.

The head waits for all three and leaves with the highest exit status among them (as srun
reported its ranks'). A dead worker does not end anything (the launch keeps its other
ranks: ``--kill-on-bad-exit=0``, ``--no-kill``). Once the driver has ended (the run in this
allocation is over) or the scheduler has failed, what is still running gets ``grace``
seconds to end by itself, then SIGTERM, then SIGKILL. A driver killed by a signal shuts
nothing down: its tasks are ended at once through the scheduler
(:mod:`hpcflow.bootstrap.abandoned`) and the others are stopped without the grace.
Signals to the head (scancel, qdel,
Ctrl-C of ``hpcflow run`` in your own allocation) are passed on to all three.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType

from hpcflow.bootstrap.abandoned import end_abandoned_tasks, warm_up
from hpcflow.store.atomic import write_json_atomic
from hpcflow.store.paths import RunPaths

log = logging.getLogger("hpcflow.bootstrap")

#: Seconds the others may run on after the driver ended (they normally follow within one
#: or two: the driver's shutdown stops the scheduler and every worker). Below the submit
#: host's own 60 s, after which it cancels the allocation.
GRACE = 30.0
#: Seconds the workers may take to end by themselves once the driver and the scheduler
#: have both ended cleanly: the run here is over and every result recorded, so nothing of
#: theirs is left to wait for (Dask's nanny alone holds a closed worker's process 2 s).
CLEAN_GRACE = 0.5
#: Seconds between SIGTERM and SIGKILL.
KILL_AFTER = 10.0
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


def exit_status(returncode: int) -> int:
    """A child's status as a shell reports it: 128 + N for death by signal N."""
    return 128 - returncode if returncode < 0 else returncode


#: When the allocation started (seconds since the epoch), as the head saw it.
STARTED_VARIABLE = "HPCFLOW_ALLOCATION_STARTED"


def process_started() -> float:
    """When this process started (the batch script's, when it exec'd the head)."""
    try:
        import psutil

        return float(psutil.Process().create_time())
    except Exception:  # noqa: BLE001 - no psutil, or no /proc: now is close enough
        return time.time()


def allocation_started(environ: Mapping[str, str], fallback: float) -> float:
    """When the allocation started: as the head marked it, else ``fallback`` (this
    process's start); never a time in the future."""
    try:
        marked = float(environ[STARTED_VARIABLE])
    except (KeyError, ValueError):
        return fallback
    return min(marked, fallback)


def children_argv(python: str, run_dir: Path, launch: Sequence[str]) -> dict[str, list[str]]:
    """What the head starts, in order: the scheduler first (the others wait for its
    address), then the workers' launch, then the driver."""
    role = [python, "-m", "hpcflow.bootstrap", "--role"]
    return {
        "scheduler": [*role, "scheduler", str(run_dir)],
        "workers": list(launch),
        "driver": [*role, "driver", str(run_dir)],
    }


def supervise(
    run_dir: Path,
    launch: Sequence[str],
    *,
    python: str | None = None,
    grace: float = GRACE,
    kill_after: float = KILL_AFTER,
    poll: float = 0.2,
) -> int:
    """Start the scheduler, the workers' launch and the driver; wait for all of them."""
    if not launch:
        sys.stderr.write("hpcflow bootstrap --role head: no worker launch after `--`\n")
        return 2
    # An address left by an earlier allocation of the same batch job (a second run in
    # your own allocation) must not be taken for this scheduler's.
    paths = RunPaths(run_dir)
    paths.scheduler_address.unlink(missing_ok=True)
    paths.worker_launch_end.unlink(missing_ok=True)
    children: dict[str, subprocess.Popen[bytes]] = {}
    received: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        for child in children.values():
            if child.poll() is None:
                try:
                    child.send_signal(signum)
                except ProcessLookupError:
                    pass

    for signum in FORWARDED:
        signal.signal(signum, forward)
    warm_up()  # a killed driver's tasks are then ended within a second
    # The driver's walltime deadline counts from the allocation's start, which this
    # process (the batch script, exec'd) marks, not from its own start seconds later.
    os.environ.setdefault(STARTED_VARIABLE, f"{process_started():.3f}")
    try:
        for name, argv in children_argv(python or sys.executable, run_dir, launch).items():
            try:
                children[name] = subprocess.Popen(argv)
            except OSError as exc:
                sys.stderr.write(f"hpcflow bootstrap: cannot start the {name} ({argv[0]}): {exc}\n")
                _stop(children, kill_after)
                return 127
            log.info("%s started (pid %d): %s", name, children[name].pid, " ".join(argv))
        return _wait(children, received, grace, kill_after, poll, paths)
    finally:
        for signum in FORWARDED:
            signal.signal(signum, signal.SIG_DFL)


def _wait(
    children: dict[str, subprocess.Popen[bytes]],
    received: list[int],
    grace: float,
    kill_after: float,
    poll: float,
    paths: RunPaths,
) -> int:
    codes: dict[str, int] = {}
    over_at: float | None = None  # when the run in this allocation was over
    stopped: set[str] = set()  # ended by us after the grace period
    abandoned = False  # the driver was killed: the others are stopped at once
    while len(codes) < len(children):
        for name, child in children.items():
            if name in codes:
                continue
            code = child.poll()
            if code is None:
                continue
            codes[name] = exit_status(code)
            level = logging.INFO if code == 0 else logging.WARNING
            log.log(level, "%s ended with exit status %d", name, codes[name])
            if name == "workers" and "driver" not in codes:
                log.log(level, "the worker launch has ended; the driver goes on without it")
                write_json_atomic(
                    paths.worker_launch_end, {"exit_status": codes[name], "ended": time.time()}
                )
            if name == "driver" and code < 0 and "scheduler" not in codes:
                # Killed: no shutdown of its own will stop the workers, and nothing
                # records what its tasks do. They end now, not after the grace.
                log.warning("the driver was killed by signal %d: ending its tasks", -code)
                end_abandoned_tasks(paths)
                abandoned = True
            if over_at is None and (name == "driver" or (name == "scheduler" and code != 0)):
                over_at = time.monotonic()
        if over_at is not None and len(codes) < len(children):
            late = time.monotonic() - over_at
            clean = codes.get("driver") == 0 and codes.get("scheduler") == 0
            allowed = 0.0 if abandoned else min(grace, CLEAN_GRACE) if clean else grace
            if late > allowed:
                for name, child in children.items():
                    if name not in codes and name not in stopped:
                        log.log(
                            logging.INFO if clean else logging.WARNING,
                            "%s still runs %.1fs after the run here ended%s: stopping it",
                            name,
                            allowed,
                            " cleanly" if clean else "",
                        )
                        stopped.add(name)
                        _signal(child, signal.SIGTERM)
            if late > allowed + kill_after:
                for name, child in children.items():
                    if name not in codes:
                        _signal(child, signal.SIGKILL)
        time.sleep(poll)
    counted = [code for name, code in codes.items() if name not in stopped]
    worst = max(counted, default=0)
    if received and worst == 0:
        worst = 128 + received[0]
    return worst


def _signal(child: subprocess.Popen[bytes], signum: int) -> None:
    try:
        child.send_signal(signum)
    except ProcessLookupError:
        pass


def _stop(children: dict[str, subprocess.Popen[bytes]], kill_after: float) -> None:
    for child in children.values():
        _signal(child, signal.SIGTERM)
    deadline = time.monotonic() + kill_after
    for child in children.values():
        try:
            child.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
