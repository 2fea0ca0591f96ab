"""GPU check through hpcflow's own engine (issue 17): a workflow whose task ``make``
returns a 1 GiB CuPy array on one worker and whose task ``take`` receives it (``from:``)
on the other, run by hpcflow's driver (the workflow loaded and decided, a run directory,
``drive``) on a two-worker Dask cluster over ucx and over tcp.

The two workers offer one pool each (``pool-make``, ``pool-take``: the Dask resources a
pilot's pools use) and the driver is given the matching pool plan, so the consumer must
run on the other worker and the value must travel; without that Dask would run it beside
its input. Per transport and try it records the run's wall time, the transfer Dask made
for the consumer inside the run (the taking worker's log of incoming transfers), the bytes
hpcflow counted as moved (the report's figure), and the raw transfer of the same buffer
between the same workers (bench/gpu/transfer.py's). Values are ``persist: false`` (kept in
memory only): the check measures the transport, not a 1 GiB write to disk.

    python bench/gpu/engine_values.py [--size-mib 1024] [--repeat 3] [--transports ucx,tcp]
    python bench/gpu/engine_values.py --cpu --size-mib 64    # NumPy: the harness, no GPU

Without a GPU (and without ``--cpu``) it prints why and exits 0. Writes ``--json`` and,
with ``--results``, the ``gpu-engine`` section of RESULTS.md (the raw figures already
recorded there, in the ``gpu`` section, give the ratio).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(HERE), str(HERE.parent), str(REPO)]

from transfer import main_with_section, make_buffer, receive  # noqa: E402

SECTION = "gpu-engine"

#: The raw worker-to-worker figures of bench/gpu/transfer.py on an H200 (RESULTS.md,
#: section gpu; bench/gpu/results-h200.json), GiB/s.
RECORDED_RAW = {"ucx": 64.6, "tcp": 0.97}

WORKFLOW = """\
name: engine-values
tasks:
  - name: make
    params: {{library: {library}, nbytes: {nbytes}}}
    resources: {{gpus: {gpus}}}
    persist: false
    python: transfer:make_buffer
  - name: take
    resources: {{gpus: {gpus}}}
    persist: false
    python: transfer:receive
    from: {{buf: make}}
"""


def cluster(transport: str, gpus: int, cpu: bool) -> Any:
    """A scheduler and two one-thread workers over ``transport``, each offering one of the
    two pools (and a GPU of its own where there are two or more)."""
    from distributed import Nanny, Scheduler, SpecCluster

    from hpcflow.engine.pools import pool_resource

    workers = {}
    for i, pool in enumerate(("make", "take")):
        resources = {"cpus": 1.0, pool_resource(pool): 1.0}
        if not cpu:
            resources["GPU"] = 1.0
        env = {} if cpu else {"CUDA_VISIBLE_DEVICES": str(i % gpus)}
        workers[f"engine-{pool}"] = {
            "cls": Nanny,
            "options": {"nthreads": 1, "protocol": transport, "resources": resources, "env": env},
        }
    scheduler = {
        "cls": Scheduler,
        "options": {"protocol": transport, "dashboard_address": ":0", "port": 0},
    }
    return SpecCluster(workers=workers, scheduler=scheduler, asynchronous=False)


def one_run(workflow: Path, client: Any) -> dict:
    """Run the workflow once (every task again) through hpcflow's driver on ``client``:
    the run's seconds, its directory, what ``take`` returned and the bytes it moved."""
    from hpcflow import load_result
    from hpcflow.engine.drive import drive
    from hpcflow.engine.driver import PoolPlan
    from hpcflow.engine.lifecycle import RunLife
    from hpcflow.engine.prepare import RunOptions, prepare

    options = RunOptions(force=True, engine="dask")
    prepared = prepare(workflow, options)
    of_template = {i: t.spec.name for i, t in enumerate(prepared.graph.templates)}
    pools = PoolPlan(of_template, {"make": 1, "take": 1})
    with RunLife(prepared, options, extra={"slots": 2, "engine": "dask"}) as life:
        prepared = life.create()
        started = time.perf_counter()
        summary = drive(prepared, life.db, life.run_id, client, 2, pools=pools)
        seconds = time.perf_counter() - started
        rows = life.db.value_rows()
        run_dir = life.paths.run_dir
    if not summary.ok:
        raise RuntimeError(f"the run failed: {summary.totals} (its folder: {run_dir})")
    take = next(i for i, t in enumerate(prepared.graph.templates) if t.spec.name == "take")
    moved = sum(r.moved for r in rows if r.task_idx == take)
    size, device = load_result(run_dir, "take")
    return {"seconds": seconds, "size": size, "device": device, "moved": moved}


def transfer_in_run(client: Any, taker: str) -> tuple[int, float]:
    """(bytes, seconds) of the value transfers the taking worker made (its incoming
    transfers of ``hpcflow-made-*`` keys), the latest one."""

    def log(dask_worker: Any) -> list[dict]:
        return [dict(e, keys=dict(e.get("keys", {}))) for e in dask_worker.transfer_incoming_log]

    entries = client.run(log, workers=[taker])[taker]
    for entry in reversed(entries):
        made = {k: n for k, n in entry["keys"].items() if str(k).startswith("hpcflow-made-")}
        if made:
            return int(sum(made.values())), float(entry["duration"])
    raise RuntimeError(f"the taking worker {taker} logged no transfer of a task's value")


async def measure(transport: str, library: str, gpus: int, nbytes: int, repeat: int) -> dict:
    """Runs in a thread (the cluster and the driver are synchronous)."""
    return await asyncio.to_thread(_measure, transport, library, gpus, nbytes, repeat)


def _measure(transport: str, library: str, gpus: int, nbytes: int, repeat: int) -> dict:
    from distributed import Client, wait

    cpu = library == "numpy"
    folder = Path(tempfile.mkdtemp(prefix="hpcflow-engine-values-"))
    workflow = folder / "workflow.yaml"
    workflow.write_text(
        WORKFLOW.format(library=library, nbytes=nbytes, gpus=0 if cpu else 1), encoding="utf-8"
    )
    # The workers run the tasks in their own process: their folder is the workflow's,
    # and the tasks' module (transfer.py) is on their path.
    os.chdir(folder)
    path = [str(HERE), str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    os.environ["PYTHONPATH"] = os.pathsep.join(path)
    runs, transfers, raw = [], [], []
    with cluster(transport, gpus, cpu) as spec, Client(spec) as client:
        client.wait_for_workers(2)
        by_name = {w["name"]: a for a, w in client.scheduler_info(n_workers=-1)["workers"].items()}
        sender, taker = by_name["engine-make"], by_name["engine-take"]
        for _ in range(repeat):
            run = one_run(workflow, client)
            if run["size"] != nbytes or run["moved"] < nbytes:
                raise RuntimeError(f"take received {run['size']} bytes, {run['moved']} moved")
            moved, seconds = transfer_in_run(client, taker)
            runs.append(run)
            transfers.append((moved, seconds))
            buf = client.submit(make_buffer, library, nbytes, workers=[sender], pure=False)
            wait([buf])
            started = time.perf_counter()
            size, _ = client.submit(receive, buf, workers=[taker], pure=False).result()
            raw.append(time.perf_counter() - started)
            if size != nbytes:
                raise RuntimeError(f"the raw transfer brought {size} bytes of {nbytes}")
            del buf
    best = min(range(repeat), key=lambda k: transfers[k][1])
    moved, seconds = transfers[best]
    best_raw = min(raw)
    return {
        "transport": transport,
        "library": library,
        "bytes": nbytes,
        "run_seconds": [round(r["seconds"], 4) for r in runs],
        "transfer_seconds": [round(s, 4) for _, s in transfers],
        "raw_seconds": [round(t, 4) for t in raw],
        "transfer_gib_per_s": round(moved / seconds / 2**30, 2),
        "run_gib_per_s": round(nbytes / min(r["seconds"] for r in runs) / 2**30, 2),
        "raw_best_gib_per_s": round(nbytes / best_raw / 2**30, 2),
        "moved": runs[best]["moved"],
        "received_on": runs[best]["device"],
        "workers": [sender, taker],
    }


def section(results: list[dict], described: str) -> str:
    rows = []
    for r in results:
        # The recorded figures are a GPU's: none beside host memory (--cpu).
        recorded = RECORDED_RAW.get(r["transport"]) if r["library"] != "numpy" else None
        recorded_s = r["bytes"] / (recorded * 2**30) if recorded else None
        run = min(r["run_seconds"])
        rows.append(
            f"| {r['transport']} | {r['library']} | {r['bytes'] / 2**30:.2f} | {run:.4f} | "
            f"{', '.join(f'{t:.4f}' for t in r['run_seconds'])} | "
            f"{min(r['transfer_seconds']):.4f} | {min(r['raw_seconds']):.4f} | "
            f"{f'{recorded_s:.4f}' if recorded_s else '–'} | "
            f"{f'{run / recorded_s:.2f}x' if recorded_s else '–'} | {r['received_on']} |"
        )
    return "\n".join(
        [
            f"<!-- section:{SECTION} -->",
            "## GPU check through hpcflow's engine (bench/gpu/engine_values.py)",
            "",
            f"{described}: a workflow whose task `make` returns the array on one worker and "
            "whose task `take` receives it (`from:`) on the other, run by hpcflow's driver on "
            "a two-worker Dask cluster (each worker offers one pool, so the value must "
            "travel; values `persist: false`). *Run*: the whole run (the driver submits "
            "`make`, `make` fills the array, Dask moves it, `take` checks it), best and every "
            "try (the first includes the first CUDA/UCX use of each worker); *move in the "
            "run*: the receiving side of the transfer, from the taking worker's log; "
            "*raw now*: the same buffer between the same workers outside hpcflow, from "
            "submitting the receiver to its answer, in the same session; *raw recorded*: the "
            "`gpu` section's figure as a time; the last ratio is the whole run's time over it.",
            "",
            "| transport | library | GiB | run s | every run s | move in the run s | raw now "
            "s | raw recorded s | run ÷ raw recorded | received on |",
            "|---|---|---:|---:|---|---:|---:|---:|---:|---|",
            *rows,
            "",
            f"<!-- /section:{SECTION} -->",
            "",
        ]
    )


def main(argv: list[str]) -> int:
    # Dask's INFO lines of four processes would bury the figures.
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
    return main_with_section(
        argv,
        __doc__ or "",
        "gpu engine check",
        measure,
        lambda r: (
            f"run {min(r['run_seconds']):.3f} s; value moved {r['moved']} bytes in "
            f"{min(r['transfer_seconds']):.4f} s ({r['transfer_gib_per_s']:.2f} GiB/s; raw "
            f"{r['raw_best_gib_per_s']:.2f} GiB/s; received on {r['received_on']})"
        ),
        SECTION,
        section,
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
