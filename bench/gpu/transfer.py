"""GPU check: worker-to-worker transfer of a 1 GiB device buffer, over ucx and over tcp.

Run on a machine with CUDA GPUs (in an environment with distributed-ucxx for the ucx
leg, e.g. ``.venv-ucx/bin/python bench/gpu/transfer.py``)::

    python bench/gpu/transfer.py [--size-mib 1024] [--repeat 3] [--transports ucx,tcp]

For each transport it starts a scheduler and two workers (on different GPUs when there
are two or more), makes the buffer on one worker with CuPy or PyTorch, has the other
worker take it, and prints the bandwidth. Without a CUDA GPU (or without CuPy/PyTorch)
it prints why and exits 0; a transport that cannot start here is reported and skipped.
The whole check stops itself after 280 s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

DEADLINE_S = 280


def gpu_library() -> tuple[str | None, int, str]:
    """(library, GPU count, why not) for the first of CuPy/PyTorch that sees a GPU."""
    reasons = []
    try:
        import cupy

        count = int(cupy.cuda.runtime.getDeviceCount())
        if count:
            return "cupy", count, ""
        reasons.append("cupy sees no GPU")
    except Exception as exc:  # ImportError, or CUDARuntimeError without a driver
        reasons.append(f"cupy: {type(exc).__name__}: {exc}".splitlines()[0])
    try:
        import torch

        if torch.cuda.is_available():
            return "torch", int(torch.cuda.device_count()), ""
        reasons.append("torch.cuda.is_available() is False")
    except Exception as exc:
        reasons.append(f"torch: {type(exc).__name__}: {exc}".splitlines()[0])
    return None, 0, "; ".join(reasons)


def make_buffer(library: str, nbytes: int) -> Any:
    """Runs on the sending worker: a device buffer of ``nbytes`` (filled, not lazy)."""
    if library == "numpy":  # --cpu: host memory, to check the harness without a GPU
        import numpy

        return numpy.ones(nbytes // 4, dtype="float32")
    if library == "cupy":
        import cupy

        buf = cupy.ones(nbytes // 4, dtype="float32")
        cupy.cuda.runtime.deviceSynchronize()
        return buf
    import torch

    buf = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    return buf


def receive(buf: Any) -> tuple[int, str]:
    """Runs on the receiving worker: proves the buffer arrived, on a GPU."""
    device = getattr(buf, "device", None)
    size = int(getattr(buf, "nbytes", 0) or buf.numel() * buf.element_size())
    return size, str(device)


@contextlib.asynccontextmanager
async def two_workers(transport: str, gpus: int) -> AsyncIterator[tuple[Any, str, str]]:
    """A scheduler and two one-thread workers over ``transport`` (on different GPUs when
    there are two or more, started in this folder): (client, sender, taker)."""
    from distributed import Client, Nanny, Scheduler

    async with Scheduler(protocol=transport, dashboard_address=":0", port=0) as scheduler:
        nannies = [
            Nanny(
                scheduler.address,
                nthreads=1,
                protocol=transport,
                env={"CUDA_VISIBLE_DEVICES": str(i % gpus)},
                name=f"gpu-{i}",
            )
            for i in range(2)
        ]
        await asyncio.gather(*nannies)
        try:
            async with Client(scheduler.address, asynchronous=True) as client:
                await client.wait_for_workers(2)
                sender, taker = sorted(client.scheduler_info()["workers"])
                yield client, sender, taker
        finally:
            await asyncio.gather(*(n.close() for n in nannies), return_exceptions=True)


async def measure(transport: str, library: str, gpus: int, nbytes: int, repeat: int) -> dict:
    from distributed import wait

    async with two_workers(transport, gpus) as (client, sender, taker):
        times = []
        for _ in range(repeat):
            buf = client.submit(make_buffer, library, nbytes, workers=[sender], pure=False)
            await wait([buf])
            started = time.perf_counter()
            size, device = await client.submit(receive, buf, workers=[taker], pure=False)
            times.append(time.perf_counter() - started)
            if size != nbytes:
                raise RuntimeError(f"{size} bytes arrived, {nbytes} were sent")
            del buf
        best = min(times)
        return {
            "transport": transport,
            "library": library,
            "bytes": nbytes,
            "seconds": [round(t, 4) for t in times],
            "best_gib_per_s": round(nbytes / best / 2**30, 2),
            "received_on": device,
            "workers": [sender, taker],
        }


def parser_for(doc: str) -> argparse.ArgumentParser:
    """The options both GPU checks take."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--transports", default="ucx,tcp")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument(
        "--cpu", action="store_true", help="host buffers (NumPy): check the harness, no GPU"
    )
    return parser


def run_check(
    name: str,
    args: argparse.Namespace,
    measure_one: Callable[..., Awaitable[dict]],
    line: Callable[[dict], str],
) -> tuple[list[dict], str] | None:
    """Measure each transport with ``measure_one`` (printing ``line`` of each result);
    None, with the reason printed, where there is no GPU. The check gives up after
    DEADLINE_S. Returns the results and the GPU's description."""
    signal.signal(signal.SIGALRM, lambda *_: sys.exit(f"{name}: gave up after {DEADLINE_S} s"))
    signal.alarm(DEADLINE_S)
    library, gpus, why = ("numpy", 1, "") if args.cpu else gpu_library()
    if library is None:
        print(f"{name} skipped: no usable CUDA GPU ({why})")  # noqa: T201
        return None
    print(f"{gpus} GPU(s) through {library}; {args.size_mib} MiB, {args.repeat} tries")
    os.environ.setdefault("UCX_WARN_UNUSED_ENV_VARS", "n")
    results = []
    for transport in [t.strip() for t in args.transports.split(",") if t.strip()]:
        if transport == "ucx":
            try:
                import distributed_ucxx  # noqa: F401
            except ImportError:
                print("ucx: skipped, distributed-ucxx is not installed (pip install hpcflow[ucx])")
                continue
        try:
            result = asyncio.run(
                measure_one(transport, library, gpus, args.size_mib * 2**20, args.repeat)
            )
        except Exception as exc:
            print(f"{transport}: failed: {type(exc).__name__}: {exc}")
            continue
        results.append(result)
        print(f"{transport:>4}: {line(result)}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=2)
    described = "host memory (--cpu)" if args.cpu else f"{gpus} GPU(s), {library}"
    return results, described


def main_with_section(
    argv: list[str],
    doc: str,
    name: str,
    measure_one: Callable[..., Awaitable[dict]],
    line: Callable[[dict], str],
    section_name: str,
    section: Callable[[list[dict], str], str],
) -> int:
    """The command line of a check that can also write its section of RESULTS.md
    (``--results``): run it, write the section, exit 0 unless no transport worked."""
    from pathlib import Path

    from sections import write_section  # bench/, on the path of the checks that call this

    parser = parser_for(doc)
    parser.add_argument("--results", help=f"write the {section_name} section of this RESULTS.md")
    args = parser.parse_args(argv)
    done = run_check(name, args, measure_one, line)
    if done is None:
        return 0
    results, described = done
    if args.results and results:
        write_section(Path(args.results), section(results, described), section_name)
    return 0 if results else 1


def main(argv: list[str]) -> int:
    args = parser_for(__doc__ or "").parse_args(argv)
    done = run_check(
        "gpu check",
        args,
        measure,
        lambda r: (
            f"best {r['best_gib_per_s']:.2f} GiB/s (tries {r['seconds']} s; received "
            f"on {r['received_on']})"
        ),
    )
    if done is None:
        return 0
    return 0 if done[0] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
