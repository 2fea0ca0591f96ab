"""GPU check of values between tasks (issue 17): a 1 GiB CuPy array made by one task on
one worker and received by a second task on another, through hpcflow's own worker code
(``hpcflow.worker.made.run_made``, what the driver submits for a task with ``from:``),
over ucx and over tcp. Beside each figure: the raw transfer of the same buffer
(bench/gpu/transfer.py) on the same two workers, so the ratio is hpcflow's own cost.

Run on a machine with CUDA GPUs, in an environment with hpcflow, CuPy and (for ucx)
distributed-ucxx, e.g. ``.venv-ucx/bin/python bench/gpu/task_values.py``::

    python bench/gpu/task_values.py [--size-mib 1024] [--repeat 3] [--transports ucx,tcp]
    python bench/gpu/task_values.py --cpu --size-mib 64     # NumPy: the harness, no GPU

The producer's task is pinned to one worker and the consumer's to the other, so the value
must travel (in a run the scheduler puts a consumer next to its input when it can). The
consumer checks it received the whole array, on a GPU; its attempt's ``ValueStats`` must
count the bytes as fetched from the other worker. Without a GPU it prints why and exits
0. Writes ``--json`` and, with ``--results``, the ``gpu-values`` section of RESULTS.md.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parents[1])]

from transfer import main_with_section, make_buffer, receive, two_workers  # noqa: E402

from hpcflow.worker.calls import TaskCall  # noqa: E402
from hpcflow.worker.made import run_made  # noqa: E402

SECTION = "gpu-values"


def call(folder: Path, index: int, function: str, kwargs: dict[str, Any]) -> TaskCall:
    """A python task's call as the driver makes it, run in this folder (in-process on
    the worker, whose folder this is)."""
    logs = folder / "tasks" / str(index)
    return TaskCall(
        index=index, attempt=1, kind="python", command=None, argv=None,
        python=f"transfer:{function}", kwargs=kwargs, workdir=str(HERE), env=None,
        timeout=None, inputs=(), outputs=(), stdout=str(logs / "1.out"),
        stderr=str(logs / "1.err"), result=str(logs / "1.result.json"),
        quarantine_dir=str(folder / "quarantine"), received=index == 0,
    )  # fmt: skip


async def measure(transport: str, library: str, gpus: int, nbytes: int, repeat: int) -> dict:
    """The consumer's end-to-end seconds (the transfer its task caused, and hpcflow's
    work around the call) for each try, and the raw transfer of the same buffer."""
    from distributed import wait

    folder = Path(tempfile.mkdtemp(prefix="hpcflow-gpu-values-"))
    async with two_workers(transport, gpus) as (client, sender, taker):
        through, raw = [], []
        for k in range(repeat):
            made = client.submit(
                run_made, call(folder, 0, "make_buffer", {"library": library, "nbytes": nbytes}),
                {}, workers=[sender], pure=False,
            )  # fmt: skip
            await wait([made])
            consumer = call(folder, 1 + k, "receive", {})
            started = time.perf_counter()
            _, outcome = await client.submit(
                run_made, consumer, {"buf": ("value", [(None, made)])}, workers=[taker],
                pure=False,
            )  # fmt: skip
            through.append(time.perf_counter() - started)
            if outcome.state != "succeeded":
                raise RuntimeError(f"the consumer failed: {outcome.message}")
            size, device = json.loads(Path(consumer.result).read_text())
            if size != nbytes or outcome.values is None or outcome.values.moved < nbytes:
                raise RuntimeError(f"{size} bytes arrived ({outcome.values}), {nbytes} were sent")
            del made
            buf = client.submit(make_buffer, library, nbytes, workers=[sender], pure=False)
            await wait([buf])
            started = time.perf_counter()
            await client.submit(receive, buf, workers=[taker], pure=False)
            raw.append(time.perf_counter() - started)
            del buf
    best, best_raw = min(through), min(raw)
    return {
        "transport": transport,
        "library": library,
        "bytes": nbytes,
        "seconds": [round(t, 4) for t in through],
        "raw_seconds": [round(t, 4) for t in raw],
        "best_gib_per_s": round(nbytes / best / 2**30, 2),
        "raw_best_gib_per_s": round(nbytes / best_raw / 2**30, 2),
        "of_raw": round(best / best_raw, 2),
        "received_on": device,
        "workers": [sender, taker],
    }


def section(results: list[dict], gpu_name: str) -> str:
    rows = [
        f"| {r['transport']} | {r['library']} | {r['bytes'] / 2**30:.2f} | "
        f"{r['best_gib_per_s']:.2f} | {r['raw_best_gib_per_s']:.2f} | {r['of_raw']:.2f}x | "
        f"{r['received_on']} |"
        for r in results
    ]
    return "\n".join(
        [
            f"<!-- section:{SECTION} -->",
            "## GPU check: values between tasks (bench/gpu/task_values.py)",
            "",
            f"{gpu_name}: a task's return value made on one worker and received by a task on "
            "another, through hpcflow's worker code (`run_made`), against the raw transfer of "
            "the same buffer between the same workers. Best of the tries.",
            "",
            "| transport | library | GiB | through hpcflow GiB/s | raw GiB/s | time vs raw | "
            "received on |",
            "|---|---|---:|---:|---:|---:|---|",
            *rows,
            "",
            f"<!-- /section:{SECTION} -->",
            "",
        ]
    )


def main(argv: list[str]) -> int:
    os.chdir(HERE)  # the workers' folder: the tasks run in their process
    return main_with_section(
        argv,
        __doc__ or "",
        "gpu values check",
        measure,
        lambda r: (
            f"through hpcflow {r['best_gib_per_s']:.2f} GiB/s, raw "
            f"{r['raw_best_gib_per_s']:.2f} GiB/s ({r['of_raw']:.2f}x the raw time; received on "
            f"{r['received_on']})"
        ),
        SECTION,
        section,
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
