"""One pilot run as its own process, reporting what it asked the batch system.

``python -m tests.fault.load_run WORKFLOW REPORT``: runs WORKFLOW with the ``slurm-test``
profile (the cluster from ``$SLURM_CONF``, the home from ``$HPCFLOW_HOME``) and writes
REPORT (JSON): the run's totals, its wall time and the CommandRunner's call counts.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from hpcflow.backends._commands import CommandRunner
from hpcflow.backends.slurm.backend import SlurmBackend
from hpcflow.engine.prepare import RunOptions, prepare
from hpcflow.modes.pilot import run_pilot
from hpcflow.settings import resolve_profile


def main(argv: list[str]) -> int:
    workflow, report = Path(argv[0]), Path(argv[1])
    runner = CommandRunner()
    profile = resolve_profile("slurm-test", environ={}).profile
    options = RunOptions()
    started = time.monotonic()
    summary = run_pilot(prepare(workflow, options), options, profile, SlurmBackend(runner))
    wall = time.monotonic() - started
    report.write_text(
        json.dumps(
            {
                "ok": summary.ok,
                "totals": summary.totals,
                "wall_seconds": round(wall, 2),
                "poll_interval": profile.poll_interval,
                "calls": dict(runner.calls),
            }
        )
    )
    return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
