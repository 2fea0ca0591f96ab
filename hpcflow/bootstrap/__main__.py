"""``python -m hpcflow.bootstrap [--role ROLE] RUN_DIR``: start this process's part of a pilot.

``--role head RUN_DIR -- LAUNCH...`` is the batch script's command: it starts the scheduler
(``--role scheduler``) and the driver (``--role driver``) on its own node and the workers'
launch, ``LAUNCH`` (srun / mpirun of ``--role worker``), exactly ``workers_per_node`` per
node; see :mod:`hpcflow.bootstrap.head`. Without ``--role``, every rank of one launch
takes its role from its rank (0 scheduler, 1 driver, 2.. workers).

This module only reads the arguments: the head imports nothing of Dask or of the engine
(it is on the way to every other process's start), the other roles import
:mod:`hpcflow.bootstrap.ranks`.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

USAGE = (
    "usage: python -m hpcflow.bootstrap [--role scheduler|driver|worker] RUN_DIR\n"
    "       python -m hpcflow.bootstrap --role head RUN_DIR -- LAUNCHER ARGS...\n"
)
ROLES = ("head", "scheduler", "driver", "worker")


def parse_args(argv: list[str]) -> tuple[str | None, Path, list[str]] | None:
    """(role or None, run directory, the head's worker launch), or None when malformed."""
    role = None
    if argv[:1] == ["--role"]:
        if len(argv) < 3 or argv[1] not in ROLES:
            return None
        role, argv = argv[1], argv[2:]
    if not argv:
        return None
    run_dir, rest = Path(argv[0]), argv[1:]
    if role == "head":
        if rest[:1] != ["--"] or len(rest) < 2:
            return None
        return role, run_dir, rest[1:]
    if rest:
        return None
    return role, run_dir, []


def main(argv: list[str]) -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s rank-%(rank)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("distributed").setLevel(logging.WARNING)
    parsed = parse_args(argv)
    if parsed is None:
        sys.stderr.write(USAGE)
        return 2
    given, run_dir, launch = parsed
    run_dir = run_dir.resolve()
    if given == "head":
        from hpcflow.bootstrap.head import supervise
        from hpcflow.bootstrap.logs import tag_logs

        tag_logs("head")
        return supervise(run_dir, launch)
    from hpcflow.bootstrap.ranks import run_rank

    return run_rank(given, run_dir)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
