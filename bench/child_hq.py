"""HyperQueue peer: its Python API, a server and one worker of 2 cores in this process.

Run as a child process by bench/run.py (with the peers venv python) in the work
directory:  python child_hq.py W1 1000  |  python child_hq.py W2 50  |  python child_hq.py W3 500

W1/W2: one HQ job of program tasks ``bash -c CMD`` (each asks for 1 CPU, HQ's default, so
2 run at a time); W2's edges are the job's task dependencies. Standard output and error
are not kept (``stdout=None``), as the other tools keep none: HQ's default would write two
files per task. W3: ``job.function(inc, args=(x,))``. HQ starts a fresh Python interpreter
per function task and keeps no return value, so ``inc`` prints its result, HQ captures each
task's stdout in a file (its way of handing output back) and the sum of those is checked.

The wheel from PyPI has HQ's server and worker compiled in but no ``hq`` command;
``LocalCluster`` runs both in this process, the same code ``hq server start`` and
``hq worker start`` run.
"""

from __future__ import annotations

import os
import sys

from workloads import Task, Workload, w3_expected_sum

SLOTS = 2
#: Where W3's tasks' stdout goes, one file per task: ``TASK_ID.out``.
W3_OUT = "hq-w3-out"


def inc(x: int) -> int:
    """The W3 task (bench/workloads.py's W3_SOURCE), printing its result: HQ keeps no return
    value of a function task, only what it writes."""
    result = x + 1
    print(result)
    return result


def build_shell_job(job, tasks: list[Task]) -> None:
    """Add ``tasks`` to the HQ ``job`` as ``bash -c`` programs, dependencies as its edges."""
    made: list = []
    for t in tasks:
        deps = [made[d] for d in t.deps]
        made.append(job.program(["bash", "-c", t.cmd], stdout=None, stderr=None, deps=deps))


def w3_sum(directory: str, n: int) -> tuple[int, int]:
    """(sum of the integers in the W3 stdout files, how many files there were)."""
    total = found = 0
    for tid in range(n):
        try:
            with open(os.path.join(directory, f"{tid}.out")) as fh:
                total += int(fh.read().split()[-1])
            found += 1
        except (OSError, ValueError, IndexError):
            pass
    return total, found


def main() -> int:
    key, n = sys.argv[1], int(sys.argv[2])
    workdir = os.getcwd()

    from hyperqueue import Client, Job
    from hyperqueue.cluster import LocalCluster, WorkerConfig
    from hyperqueue.task.function import PythonEnv

    server_dir = os.path.join(workdir, "hq-server")
    os.makedirs(server_dir)
    job = Job(default_workdir=workdir)
    if key == "W3":
        out_dir = os.path.join(workdir, W3_OUT)
        os.makedirs(out_dir)
        for x in range(n):
            job.function(
                inc, args=(x,), stdout=os.path.join(out_dir, "%{TASK_ID}.out"), stderr=None
            )
    else:
        build_shell_job(job, Workload(key, n).tasks())

    with LocalCluster(server_dir=server_dir, worker_config=WorkerConfig(cores=SLOTS)) as cluster:
        # Function tasks run `python -c ...` on the worker: this interpreter (it has
        # hyperqueue and cloudpickle), not whichever python3 is first on PATH.
        client = Client(cluster.cluster.server_dir, python_env=PythonEnv(sys.executable))
        submitted = client.submit(job)
        ok = client.wait_for_jobs([submitted], raise_on_error=False)
        failed = {} if ok else client.get_failed_tasks(submitted)
    if failed:
        print(f"hyperqueue: {len(failed)} task(s) failed", file=sys.stderr)
        for tid, ctx in list(failed.items())[:3]:
            print(f"  task {tid}: {ctx.error}", file=sys.stderr)
        return 1
    if key == "W3":
        total, found = w3_sum(os.path.join(workdir, W3_OUT), n)
        if total != w3_expected_sum(n):
            print(
                f"hyperqueue: W3 sum {total} != {w3_expected_sum(n)} ({found}/{n} results)",
                file=sys.stderr,
            )
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
