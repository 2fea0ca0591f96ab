"""W7 with HyperQueue: N tiny tasks in one allocation on the local test SLURM.

The same allocation as hpcflow's pilot (bench/pilot.py: the slurm-test profile's nodes and
CPUs per node) runs, instead of hpcflow, one HyperQueue server and one HQ worker per node,
and a client that submits the N tasks ``bash -c 'echo i > out/i.txt'`` as one HQ job,
waits for them and stops the server. bench/pilot.py measures it from the submit side as
it measures hpcflow: sbatch → job over, sbatch and squeue calls, and the outputs.

HyperQueue comes from PyPI as its Python API, whose extension module holds HQ's server
and worker but no ``hq`` command, so ``hq server start`` / ``hq worker start`` / ``hq
submit --array`` are not available. The same server and worker code runs through the
API's FFI instead (``hyperqueue.ffi.cluster.Cluster``): on the first node one process
runs the server and that node's worker. The FFI adds a worker only to a cluster it started
itself, and the worker connects to whichever server its cluster directory's
``hq-current`` link names; so on every other node a process starts a throwaway server
in the node's private /tmp, points that directory's ``hq-current`` at the real server's
(on the shared volume) and adds its worker, which then joins the real server. The client
submits a task graph of N program tasks (the Python API has no arrays).

Two halves in one file: the submit side (``render_script``, ``measure``; project python,
imports nothing of HyperQueue) and what runs in the allocation (``python pilot_hq.py node
...`` on every node through srun, ``python pilot_hq.py submit ...`` in the batch script;
the peers venv's python, which has ``hyperqueue``).
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: The python that has ``hyperqueue`` (bench/setup.sh installs it there).
PEERS_PYTHON = HERE / ".venv-peers" / "bin" / "python"
#: squeue states after which the job is over.
FINAL_STATES = frozenset(
    {
        "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
        "OUT_OF_MEMORY", "GONE",
    }
)  # fmt: skip
#: How long the node processes and the client wait for the server's access file, seconds.
SERVER_WAIT_S = 120.0


def task_command(i: int) -> str:
    """W7 task ``i``, as hpcflow's pilot runs it (bench/pilot.py)."""
    return f"echo {i} > out/{i}.txt"


def count_outputs(workdir: Path, n: int) -> int:
    """Tasks whose ``out/i.txt`` exists with the content ``i``."""
    done = 0
    for i in range(n):
        try:
            if (workdir / "out" / f"{i}.txt").read_text() == f"{i}\n":
                done += 1
        except OSError:
            pass
    return done


# ---------------------------------------------------------------------------
# Submit side
# ---------------------------------------------------------------------------


def render_script(
    workdir: Path,
    n: int,
    nodes: int,
    cpus: int,
    partition: str,
    python: Path = PEERS_PYTHON,
    time_limit_min: int = 30,
) -> str:
    """The batch script of one HQ allocation: every value quoted once, by shlex (its log
    path goes on sbatch's command line, where no quoting is needed)."""
    q = shlex.quote
    py, me = q(str(python)), q(str(Path(__file__).resolve()))
    server_dir = workdir / "hq-server"
    stop = workdir / "stop"
    return "\n".join(
        [
            "#!/bin/bash",
            "#SBATCH --job-name=hq-w7",
            f"#SBATCH --partition={partition}",
            f"#SBATCH --nodes={nodes}",
            "#SBATCH --ntasks-per-node=1",
            f"#SBATCH --cpus-per-task={cpus}",
            f"#SBATCH --time={time_limit_min}",
            "set -eo pipefail",
            f"cd {q(str(workdir))}",
            "date +%s.%N > t_start",
            "# One HQ process per node: the server and a worker on the first, a worker on",
            "# each other; they live until the client has stopped the server.",
            f"srun --mpi=none --ntasks-per-node=1 --kill-on-bad-exit=0 {py} {me} node "
            f"{q(str(server_dir))} {cpus} {q(str(stop))} &",
            "nodes_pid=$!",
            "# The client: submit the N tasks as one job, wait for them, stop the server.",
            f"{py} {me} submit {q(str(server_dir))} {n} {q(str(stop))} || rc=$?",
            "touch stop",
            "wait $nodes_pid || true",
            "exit ${rc:-0}",
            "",
        ]
    )


def measure(
    n: int,
    runner,
    workdir: Path,
    nodes: int,
    cpus: int,
    partition: str,
    poll_s: float = 0.5,
    timeout: float = 600.0,
) -> dict[str, object]:
    """Submit one HQ allocation of ``n`` tasks with ``runner`` (hpcflow's CommandRunner,
    which counts the calls) and poll every ``poll_s`` until the client in the allocation
    has written its result (as hpcflow's submit side follows its driver's state on the
    shared volume) or squeue says the job is over; its row."""
    workdir.mkdir(parents=True)
    (workdir / "out").mkdir()
    script = workdir / "hq-w7.sbatch"
    script.write_text(render_script(workdir, n, nodes, cpus, partition))
    row: dict[str, object] = {"tool": "hyperqueue", "tasks": n}
    t_submit = time.time()
    t0 = time.monotonic()
    log = workdir / "slurm-%j.out"
    res = runner.run(["sbatch", "--parsable", f"--output={log}", str(script)])
    if not res.ok:
        return {**row, "ok": False, "error": f"sbatch failed: {res.stderr.strip()[-300:]}"}
    job_id = res.stdout.strip().split(";")[0]
    result = workdir / "result.json"
    state, wall = "?", None
    while time.monotonic() - t0 < timeout:
        time.sleep(poll_s)
        if result.exists():
            wall = time.monotonic() - t0
            break
        state = _job_state(runner, job_id)
        if state in FINAL_STATES:
            break
    calls = dict(runner.calls)
    wall = time.monotonic() - t0 if wall is None else wall
    # Then let the allocation end (the server stops, the nodes' processes exit) before
    # the next measurement; not part of the figures.
    while state not in FINAL_STATES and time.monotonic() - t0 < timeout:
        time.sleep(poll_s)
        state = _job_state(runner, job_id)
    if state not in FINAL_STATES:
        runner.run(["scancel", job_id])
        state = "TIMEOUT (bench)"
    done = count_outputs(workdir, n)
    inside = _read_json(result)
    mtimes = [p.stat().st_mtime for p in (workdir / "out").iterdir()]
    row.update(
        {
            "ok": state in ("COMPLETED", "GONE") and done == n and bool(inside.get("ok")),
            "state": state,
            "done": done,
            "wall_s": round(wall, 2),
            "tasks_per_s": round(n / wall, 1),
            "sbatch_calls": calls.get("sbatch", 0),
            "squeue_calls": calls.get("squeue", 0),
            "sacct_calls": calls.get("sacct", 0),
            "poll_interval_s": poll_s,
            # HQ records no task start times the submit side can read: the first output
            # file's mtime stands for the first task (they take a millisecond).
            "submit_to_first_task_s": round(min(mtimes) - t_submit, 2) if mtimes else -1,
            "submit_to_last_task_s": round(max(mtimes) - t_submit, 2) if mtimes else -1,
            "workers": len(list((workdir / "workers").glob("*.json"))),
        }
    )
    cpu = _read_json(workdir / "server_cpu.json").get("server_cpu_s")
    if cpu is not None:
        row["server_cpu_s"] = cpu
        row["scheduler_cpu_us_per_task"] = round(1e6 * float(cpu) / n, 1)
        if "client_cpu_s" in inside:
            row["client_cpu_s"] = inside["client_cpu_s"]
            row["driver_cpu_us_per_task"] = round(1e6 * float(inside["client_cpu_s"]) / n, 1)
        row["central_cpu_us_per_task"] = round(
            1e6 * (float(cpu) + float(inside.get("client_cpu_s") or 0)) / n, 1
        )
    t_start = _read_float(workdir / "t_start")
    if t_start is not None:
        row["submit_to_allocation_s"] = round(t_start - t_submit, 2)
        for key in ("server_up", "submitted", "done"):
            if key in inside:
                row[f"allocation_to_{key}_s"] = round(float(inside[key]) - t_start, 2)
    if not row["ok"]:
        row["error"] = inside.get("error") or f"job {state}, {done}/{n} outputs"
    return row


def _job_state(runner, job_id: str) -> str:
    """The job's state from squeue (``GONE`` once SLURM has forgotten it)."""
    res = runner.run(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"])
    states = res.stdout.split()
    if states:
        return states[0]
    return "GONE" if res.ok else "?"


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _read_float(path: Path) -> float | None:
    try:
        return float(path.read_text().strip())
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------------------
# In the allocation (the peers venv's python)
# ---------------------------------------------------------------------------


def _access_file(server_dir: Path) -> Path:
    return server_dir / "hq-current" / "access.json"


def _wait_for(path: Path, timeout: float = SERVER_WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout:g} s")
        time.sleep(0.05)


def node_main(server_dir: Path, cores: int, stop: Path) -> int:
    """One node's HQ process: on node 0 the server (and, as a child process of its own,
    that node's worker, so the server's CPU time is the server's alone: written to
    ``server_cpu.json`` when the run is over), on every other node a worker."""
    node_id = int(os.environ.get("SLURM_NODEID", "0"))
    if node_id != 0:
        return worker_main(server_dir, cores, stop)
    import resource
    import subprocess

    from hyperqueue.ffi.cluster import Cluster

    server_dir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(str(server_dir))  # noqa: F841 - the server lives while it does
    worker = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "worker", str(server_dir),
         str(cores), str(stop)]
    )  # fmt: skip
    while not stop.exists():
        time.sleep(0.2)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    (stop.parent / "server_cpu.json").write_text(
        json.dumps({"server_cpu_s": round(usage.ru_utime + usage.ru_stime, 3)})
    )
    try:
        worker.wait(timeout=30)
    except subprocess.TimeoutExpired:
        worker.kill()
    sys.stdout.flush()
    os._exit(0)


def worker_main(server_dir: Path, cores: int, stop: Path) -> int:
    """One HQ worker of ``cores`` that joins the server in ``server_dir``."""
    from hyperqueue.ffi.cluster import Cluster

    node_id = int(os.environ.get("SLURM_NODEID", "0"))
    _wait_for(_access_file(server_dir))
    # A throwaway server, only so that the FFI will add a worker; then the worker is
    # pointed at the real server by the hq-current link it reads.
    own = Path(tempfile.mkdtemp(prefix="hq-node-"))
    cluster = Cluster(str(own))
    link = own / "hq-current"
    link.unlink()
    link.symlink_to(os.path.realpath(server_dir / "hq-current"))
    cluster.add_worker(cores)
    workers = stop.parent / "workers"
    workers.mkdir(exist_ok=True)
    host = socket.gethostname()
    (workers / f"{host}.json").write_text(json.dumps({"node": node_id, "up": time.time()}))
    while not stop.exists():
        time.sleep(0.2)
    # The server is stopped by the client; the FFI's threads need not be joined.
    sys.stdout.flush()
    os._exit(0)


def submit_main(server_dir: Path, n: int, stop: Path) -> int:
    """The client: one job of ``n`` program tasks; wait; stop the server; result.json."""
    from hyperqueue import Client, Job

    workdir = stop.parent
    result: dict[str, object] = {"ok": False}
    try:
        _wait_for(_access_file(server_dir))
        result["server_up"] = time.time()
        client = Client(str(server_dir))
        job = Job(default_workdir=workdir)
        for i in range(n):
            job.program(["bash", "-c", task_command(i)], stdout=None, stderr=None)
        submitted = client.submit(job)
        result["submitted"] = time.time()
        ok = client.wait_for_jobs([submitted], raise_on_error=False)
        result["done"] = time.time()
        if not ok:
            failed = client.get_failed_tasks(submitted)
            result["error"] = f"{len(failed)} task(s) failed: " + "; ".join(
                f"{tid}: {ctx.error}" for tid, ctx in list(failed.items())[:3]
            )
        result["ok"] = ok
        client.connection.stop_server()
    except Exception as exc:  # noqa: BLE001 - reported to the submit side
        result["error"] = f"{type(exc).__name__}: {exc}"
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    result["client_cpu_s"] = round(usage.ru_utime + usage.ru_stime, 3)
    (workdir / "result.json").write_text(json.dumps(result))
    return 0 if result["ok"] else 1


def main(argv: list[str]) -> int:
    what = argv[0]
    if what == "node":
        return node_main(Path(argv[1]), int(argv[2]), Path(argv[3]))
    if what == "worker":
        return worker_main(Path(argv[1]), int(argv[2]), Path(argv[3]))
    if what == "submit":
        return submit_main(Path(argv[1]), int(argv[2]), Path(argv[3]))
    print(f"pilot_hq.py: node|worker|submit, not {what!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
