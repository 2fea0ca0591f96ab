"""Parsl peer: HighThroughputExecutor + LocalProvider, 2 workers, bash_app.

Run as a child process by bench/run.py (with the peers venv python) in the
work directory:  python child_parsl.py W1 1000  |  python child_parsl.py W2 50
DAG dependencies are passed as AppFutures in ``inputs=``.
W3 (python child_parsl.py W3 10000): python_app ``inc(x)``; the results'
sum is checked.
"""

import os
import sys

from workloads import Workload

SLOTS = 2


def htex_config(workdir: str):
    """HighThroughputExecutor on this machine: one block of SLOTS single-core workers,
    started in ``workdir`` (so relative output paths land there)."""
    from parsl.config import Config
    from parsl.executors import HighThroughputExecutor
    from parsl.providers import LocalProvider

    return Config(
        executors=[
            HighThroughputExecutor(
                label="htex_local",
                address="127.0.0.1",
                max_workers_per_node=SLOTS,
                cores_per_worker=1,
                provider=LocalProvider(
                    init_blocks=1, min_blocks=1, max_blocks=1, worker_init=f"cd {workdir}"
                ),
            )
        ],
        run_dir=os.path.join(workdir, "runinfo"),
    )


def main() -> int:
    key, n = sys.argv[1], int(sys.argv[2])
    tasks = Workload(key, n).tasks() if key != "W3" else []
    workdir = os.getcwd()

    import parsl
    from parsl.app.app import bash_app

    config = htex_config(workdir)

    @bash_app
    def shell(cmd, inputs=()):
        return cmd

    from parsl.app.app import python_app

    @python_app
    def inc(x):
        return x + 1

    dfk = parsl.load(config)
    failed = 0
    try:
        if key == "W3":
            from workloads import w3_expected_sum

            total = sum(f.result() for f in [inc(x) for x in range(n)])
            if total != w3_expected_sum(n):
                print(f"parsl: W3 sum {total} != {w3_expected_sum(n)}", file=sys.stderr)
                failed = 1
        futs: list = []
        for t in tasks:
            futs.append(shell(t.cmd, inputs=[futs[d] for d in t.deps]))
        for f in futs:
            try:
                f.result()
            except Exception as exc:  # noqa: BLE001 - report and count
                failed += 1
                if failed <= 3:
                    print(f"parsl task failed: {exc!r}", file=sys.stderr)
    finally:
        dfk.cleanup()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
