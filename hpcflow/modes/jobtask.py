"""Jobs mode, inside the batch job: ``python -m hpcflow.modes.jobtask RUN_DIR N [ELEMENT]``.

Runs ONE task instance — element ``ELEMENT`` of job ``N`` (default: the array index the
batch system gives, see :mod:`hpcflow.backends.arrays`, or 0) — with the same worker
code as the other modes (:func:`hpcflow.worker.execute.run_call`), retrying as the
task's retry policy says. It writes two small files and never the state database (the
submit host is its single writer):

* ``jobs/N/ELEMENT.started.json`` when it starts: the id the batch system knows this
  job or element by (so the submit host can ask about it), host and time;
* ``jobs/N/ELEMENT.outcome.json`` when it ends: every attempt's outcome.

Its exit status is 0 only when the task succeeded, so ``afterok`` dependencies hold.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from hpcflow.backends.arrays import element_index, element_label, element_native_id
from hpcflow.dag.instances import TaskInstance
from hpcflow.engine.calls_factory import CallFactory, TaskLaunch
from hpcflow.engine.prepare import load_run_graph
from hpcflow.envs.environments import Environments
from hpcflow.envs.site import SiteEnvironment
from hpcflow.errors import RunError
from hpcflow.store.atomic import write_json_atomic
from hpcflow.store.paths import RunPaths, StateRoot
from hpcflow.store.states import TaskState
from hpcflow.worker.calls import Outcome
from hpcflow.worker.execute import run_call
from hpcflow.worker.groups import LIVE

log = logging.getLogger("hpcflow.modes.jobtask")


def run_attempts(
    factory: CallFactory,
    inst: TaskInstance,
    first_attempt: int,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Outcome]:
    """Run attempts of ``inst`` from ``first_attempt`` until one succeeds or the retry
    policy is spent (attempt numbers count across the run, as the driver counts them)."""
    policy = factory.graph.template(inst).retries
    outcomes: list[Outcome] = []
    attempt = first_attempt
    while True:
        outcome = run_call(factory.call(inst, attempt))
        outcomes.append(outcome)
        if outcome.state != TaskState.FAILED or not policy.allows_another(attempt):
            return outcomes
        delay = policy.delay(attempt)
        log.info("retrying %s in %.1fs (%s)", inst.id, delay, outcome.message)
        sleep(delay)
        attempt += 1


def _stop(signum: int, frame: FrameType | None) -> None:
    # scancel/qdel or the walltime: kill the task's process groups, leave no outcome (the
    # submit host then reports the batch system's own verdict: TIMEOUT, CANCELLED...).
    LIVE.kill_all(grace=1.0)
    os._exit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if len(args) not in (2, 3):
        log.error("usage: python -m hpcflow.modes.jobtask RUN_DIR N [ELEMENT]")
        return 2
    signal.signal(signal.SIGTERM, _stop)
    paths = RunPaths(Path(args[0]).resolve())
    number = int(args[1])
    element = int(args[2]) if len(args) == 3 else element_index(os.environ)
    manifest = json.loads(paths.job_manifest(number).read_text(encoding="utf-8"))
    index = int(manifest["indices"][element])
    write_json_atomic(
        paths.job_started(number, element),
        {
            "native_id": element_native_id(os.environ),
            "label": element_label(os.environ),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started": time.time(),
        },
    )
    graph, info = load_run_graph(paths)
    inst = graph.instances[index]
    if inst.id != manifest["ids"][element]:
        raise RunError(
            f"job {number} element {element} expected task {manifest['ids'][element]!r} "
            f"but the workflow copy has {inst.id!r} at index {index}",
            hint="the run directory was changed after submission; start a new run",
        )
    factory = CallFactory(
        graph,
        paths,
        launch=TaskLaunch(
            mpi_launcher=manifest.get("mpi_launcher"), mpi=manifest.get("mpi", "pmix")
        ),
        environments=Environments(
            SiteEnvironment.from_dict(manifest.get("software")),
            images=StateRoot.beside(Path(str(info["workflow"]))).images,
        ),
    )
    outcomes = run_attempts(factory, inst, int(manifest["attempts"][element]))
    write_json_atomic(
        paths.job_outcome(number, element),
        {"index": index, "id": inst.id, "outcomes": [dataclasses.asdict(o) for o in outcomes]},
    )
    final = outcomes[-1]
    log.info("%s: %s (attempt %d)", inst.id, final.state, final.attempt)
    return 0 if final.state == TaskState.SUCCEEDED else 1


if __name__ == "__main__":
    sys.exit(main())
