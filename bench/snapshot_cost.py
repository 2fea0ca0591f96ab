"""What publishing snapshots of ``state.sqlite`` costs the driver, at scale.

A driver's state file of ``--tasks`` tasks in ``FOLDER`` (put it on the shared file system
to measure that): every task gets a finished attempt, ``--batch`` tasks a commit, as a
driver records them; each commit is published at once (the worst case: what a commit
asked for at once costs) and the time of the commits and of the publishes is reported,
then how often the bounded publisher (:class:`~hpcflow.store.snapshot.SnapshotPublisher`,
its default ``cost_factor``) would publish batched commits.

``python -m bench.snapshot_cost FOLDER --tasks 20000``
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from hpcflow.store.snapshot import SnapshotPublisher
from hpcflow.store.statedb import AttemptRecord, StateDB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="snapshot-cost-", dir=args.folder))
    db = StateDB(folder / "state.sqlite")
    publisher = db._publisher
    assert publisher is not None
    db.add_tasks(
        (i, f"step[i={i}]", "step", f"step-{i}", [i - 1] if i else [], "pending")
        for i in range(args.tasks)
    )
    commit_s = publish_s = 0.0
    publishes = 0
    sizes = []
    for start in range(0, args.tasks, args.batch):
        now = time.time()
        records = [
            AttemptRecord(
                task_idx=i,
                attempt=1,
                state="succeeded",
                exit_code=0,
                started=now - 1,
                ended=now,
                peak_rss=50_000_000,
                host="n1",
                message=None,
            )
            for i in range(start, min(start + args.batch, args.tasks))
        ]
        db.record_attempts(records, {r.task_idx: "succeeded" for r in records})
        before = publisher.seconds
        began = time.monotonic()
        db.flush()  # committed and published at once
        took = time.monotonic() - began
        published = publisher.seconds - before
        commit_s += took - published
        publish_s += published
        publishes += 1
        sizes.append((folder / "state.snapshot").stat().st_size)
    db.close()
    commits = publishes
    each = publish_s / publishes
    print(
        f"{args.tasks} tasks, {commits} commits of {args.batch} attempts in {folder}: "
        f"commits {commit_s / commits * 1000:.1f} ms each, publishing {each * 1000:.1f} ms each "
        f"(snapshot {sizes[0] / 1e6:.2f} to {sizes[-1] / 1e6:.2f} MB); batched commits are "
        f"published at most every {SnapshotPublisher.cost_factor * each:.2f} s "
        f"(cost_factor {SnapshotPublisher.cost_factor:g}): at most "
        f"{1 / (1 + SnapshotPublisher.cost_factor):.0%} of the driver's time"
    )


if __name__ == "__main__":
    main()
