"""No-tool floor: ThreadPool(2) of subprocess.run(["bash", "-c", cmd]).

Run as a child process by bench/run.py in the work directory:
    python child_floor.py W1 1000     |     python child_floor.py W2 50
For the DAG a task is submitted as soon as all its dependencies are done.
"""

import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from workloads import Workload

SLOTS = 2


def main() -> int:
    key, n = sys.argv[1], int(sys.argv[2])
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
