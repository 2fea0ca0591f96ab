"""The W8 peers, run as a child process by bench/values.py in the work directory:

    python child_values.py files chain     # np.save / np.load, ProcessPoolExecutor(2)
    python child_values.py dask gather     # plain Dask futures, LocalCluster(2 x 1 thread)
    python child_values.py parsl chain     # Parsl python_app futures, HTEX, 2 workers
    python child_values.py inline chain    # the same calls in this one process

Every form hands the same arrays (bench/w8_tasks.py) from task to task with two slots
and prints the last task's value; bench/values.py checks it. ``inline`` hands nothing over
and uses one slot: the floor under every form, the work itself plus one interpreter start.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ProcessPoolExecutor

import w8_tasks as t

SLOTS = 2


def through_files(workload: str) -> float:
    """Each task reads its inputs from .npy files in the work directory and writes its
    result as one, in a pool of two worker processes."""
    os.makedirs("data", exist_ok=True)
    with ProcessPoolExecutor(SLOTS) as pool:
        if workload == "chain":
            pool.submit(t.start_file, "data/c0.npy").result()
            for k in range(1, t.CHAIN_TASKS - 1):
                pool.submit(t.step_file, f"data/c{k - 1}.npy", f"data/c{k}.npy").result()
            return pool.submit(t.finish_file, f"data/c{t.CHAIN_TASKS - 2}.npy").result()
        paths = [f"data/p{i}.npy" for i in range(t.GATHER_N)]
        for done in [pool.submit(t.part_file, i, p) for i, p in enumerate(paths)]:
            done.result()
        return pool.submit(t.reduce_file, paths).result()


def in_one_process(workload: str) -> float:
    """The task bodies called one after another in this process: values pass by
    reference, nothing is copied, serialised or started; the floor of every form."""
    if workload == "chain":
        x = t.start()
        for _ in range(t.CHAIN_TASKS - 2):
            x = t.step(x)
        return t.finish(x)
    return t.reduce([t.part(i) for i in range(t.GATHER_N)])


def dask_futures(workload: str) -> float:
    """Futures handed to the next ``submit``: Dask moves each value worker to worker."""
    from child_dask import local_cluster
    from distributed import Client

    with local_cluster() as cluster, Client(cluster) as client:
        if workload == "chain":
            x = client.submit(t.start, pure=False)
            for _ in range(t.CHAIN_TASKS - 2):
                x = client.submit(t.step, x, pure=False)
            return client.submit(t.finish, x).result()
        parts = client.map(t.part, range(t.GATHER_N), pure=False)
        return client.submit(t.reduce, parts).result()


def parsl_futures(workload: str) -> float:
    """AppFutures handed to the next app: Parsl resolves them in the submitting process
    and sends the values to the worker that runs the next task."""
    import parsl
    from child_parsl import htex_config
    from parsl.app.app import python_app

    config = htex_config(os.getcwd())
    start, step, finish = python_app(t.start), python_app(t.step), python_app(t.finish)
    part, reduce = python_app(t.part), python_app(_reduce_futures)
    with parsl.load(config):
        if workload == "chain":
            x = start()
            for _ in range(t.CHAIN_TASKS - 2):
                x = step(x)
            return finish(x).result()
        return reduce(*[part(i) for i in range(t.GATHER_N)]).result()


def _reduce_futures(*parts):  # Parsl resolves futures given as positional arguments
    import w8_tasks

    return w8_tasks.reduce(list(parts))


FORMS = {
    "files": through_files,
    "dask": dask_futures,
    "parsl": parsl_futures,
    "inline": in_one_process,
}


def main() -> int:
    form, workload = sys.argv[1], sys.argv[2]
    value = FORMS[form](workload)
    print(f"W8 value {value!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
