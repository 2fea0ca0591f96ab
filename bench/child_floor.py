"""No-tool floor: ThreadPool(2) of subprocess.run(["bash", "-c", cmd]).

Run as a child process by bench/run.py in the work directory:
    python child_floor.py W1 1000     |     python child_floor.py W2 50
For the DAG a task is submitted as soon as all its dependencies are done.

W3 (Python calls): ProcessPoolExecutor(2), one submit per call (a warm pool of
two processes, no batching: the floor for one-call-one-task).
W4 (resume): os.path.exists over the N outputs, nothing to run.
"""

import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from workloads import Workload

SLOTS = 2


def inc(x: int) -> int:
    """The W3 task (same body as bench/workloads.py's W3_SOURCE)."""
    return x + 1


def w3(n: int) -> int:
    from concurrent.futures import ProcessPoolExecutor

    from workloads import w3_expected_sum

    with ProcessPoolExecutor(SLOTS) as ex:
        total = sum(f.result() for f in [ex.submit(inc, x) for x in range(n)])
    if total != w3_expected_sum(n):
        print(f"floor: W3 sum {total} != {w3_expected_sum(n)}", file=sys.stderr)
        return 1
    return 0


def w4(n: int) -> int:
    import os

    missing = [t.output for t in Workload("W1", n).tasks() if not os.path.exists(t.output)]
    if missing:  # all exist: nothing to do
        print(f"floor: {len(missing)} outputs missing", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    key, n = sys.argv[1], int(sys.argv[2])
    if key == "W3":
        return w3(n)
    if key == "W4":
        return w4(n)
    tasks = Workload(key, n).tasks()
    waiting = [len(t.deps) for t in tasks]
    dependents: list[list[int]] = [[] for _ in tasks]
    for i, t in enumerate(tasks):
        for d in t.deps:
            dependents[d].append(i)

    lock = threading.Lock()
    all_done = threading.Event()
    state = {"left": len(tasks), "failed": 0}
    pool = ThreadPoolExecutor(SLOTS)

    def run(i):
        rc = subprocess.run(["bash", "-c", tasks[i].cmd]).returncode
        ready = []
        with lock:
            if rc != 0:
                state["failed"] += 1
            for k in dependents[i]:
                waiting[k] -= 1
                if waiting[k] == 0:
                    ready.append(k)
            state["left"] -= 1
            if state["left"] == 0:
                all_done.set()
        for k in ready:
            pool.submit(run, k)

    if not tasks:
        return 0
    for i in range(len(tasks)):
        if waiting[i] == 0:
            pool.submit(run, i)
    all_done.wait()
    pool.shutdown()
    if state["failed"]:
        print(f"floor: {state['failed']} task(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
