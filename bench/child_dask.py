"""Plain Dask peer for W3: ``client.map(inc, range(N))`` on a LocalCluster.

Run as a child process by bench/run.py (project python, which has dask) in
the work directory:  python child_dask.py W3 10000
Two worker processes with one thread each (2 slots, like every other tool);
the results are gathered and their sum is checked.
"""

import sys

SLOTS = 2


def inc(x):
    """The W3 task (same body as bench/workloads.py's W3_SOURCE); pickled by value."""
    return x + 1


def local_cluster():
    """Plain Dask on this machine: SLOTS worker processes of one thread each."""
    from distributed import LocalCluster

    return LocalCluster(
        n_workers=SLOTS, threads_per_worker=1, processes=True, dashboard_address=None,
        host="127.0.0.1",
    )  # fmt: skip


def main() -> int:
    key, n = sys.argv[1], int(sys.argv[2])
    if key != "W3":
        print(f"child_dask: only W3, not {key}", file=sys.stderr)
        return 2

    from distributed import Client
    from workloads import w3_expected_sum

    with local_cluster() as cluster, Client(cluster) as client:
        futures = client.map(inc, range(n))
        total = sum(client.gather(futures))
    if total != w3_expected_sum(n):
        print(f"dask: W3 sum {total} != {w3_expected_sum(n)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
