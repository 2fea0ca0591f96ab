"""Torn reads of a run's state through a second client of the shared file system.

A writer on node ``n2`` of the test SLURM cluster commits a state file of ``TASKS`` tasks
as fast as it can: commit ``n`` gives every task a state and a message drawn from
``random.Random(n)`` and records ``commits = n`` in the run's meta, in the same commit,
and publishes it (:mod:`hpcflow.store.snapshot`) at once. A reader on the submit side
(another GlusterFS client) takes views as ``hpcflow status`` does, a fresh
:class:`~hpcflow.store.statedb.StateDB` each, and checks each view is of one commit
(:func:`check_view`): the meta's ``commits`` says which, and every row, the counts and
the task order must be that commit's; the commits it sees never go back.

Run it as a script for a recorded run (``python -m tests.fault.torn_reads --reads
1000000``: it starts its own test cluster); ``--plain`` reads ``state.sqlite`` itself, as
readers did before snapshots (the defect). ``tests/integration/slurm/
test_shared_state.py`` runs a short one in the suite.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import logging
import multiprocessing
import os
import queue as queue_module
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path

from hpcflow.store.snapshot import Snapshot, SnapshotReader
from hpcflow.store.statedb import StateDB

log = logging.getLogger(__name__)

TASKS = 400
STATES = ("running", "succeeded", "failed")
#: Messages up to this long: row sizes change with every commit, so SQLite rebalances
#: its tree (the condition the torn read of the plain file was seen in).
MESSAGE = 2000


def expected(commit: int, longest: int = MESSAGE) -> tuple[list[str], int]:
    """What commit ``commit`` wrote: each task's state, and the length of its message
    (below ``longest``)."""
    import random

    rng = random.Random(commit)  # noqa: S311 - a reproducible workload, not a secret
    return rng.choices(STATES, k=TASKS), rng.randrange(longest)


#: The writer, run on a node: commits until the stop file appears or SECONDS pass, then
#: ends the run (status succeeded: its last snapshot is sealed) and prints its commits.
WRITER = """
import sys, time
from pathlib import Path
from hpcflow.store.snapshot import SnapshotPublisher
from hpcflow.store.sqlite import BatchedWriter
from hpcflow.store.statedb import StateDB
from tests.fault.torn_reads import TASKS, expected

SnapshotPublisher.cost_factor = 0.0  # every commit published: as fast as it can
BatchedWriter.commit_interval = 1e9  # states and meta of a round in one commit, never split
path, stop, seconds = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
longest = int(sys.argv[4])
db = StateDB(path)
db.add_tasks((i, f"t[i={i}]", "t", f"t-{i}", [], "pending") for i in range(TASKS))
db.set_meta(status="running", commits=0)
Path(str(path) + ".ready").touch()
n = 0
end = time.monotonic() + seconds
while time.monotonic() < end and not stop.exists():
    n += 1
    states, length = expected(n, longest)
    db.set_states(enumerate(states), message="x" * length)
    db.set_meta(commits=n)  # the same commit; at once: committed and published now
db.set_meta(status="succeeded")
db.close()
print(n)
"""


class PlainReader(SnapshotReader):
    """No snapshot ever: readers read ``state.sqlite`` itself, query by query, as before
    snapshots (the defect, for showing that :func:`check_view` catches it)."""

    def read(self, path: Path) -> Snapshot | None:
        return None


@dataclass
class Tally:
    """What a reader saw: views, wrong ones (with the first few described), the commits
    it saw, and the reads its snapshot reader tried again."""

    views: int = 0
    wrong: int = 0
    examples: list[str] = field(default_factory=list)
    first_commit: int | None = None
    last_commit: int = -1
    errors: collections.Counter[str] = field(default_factory=collections.Counter)

    def wrong_view(self, why: str) -> None:
        self.wrong += 1
        if len(self.examples) < 5:
            self.examples.append(why)


def check_view(db: StateDB, tally: Tally, longest: int = MESSAGE, lean: bool = False) -> None:
    """One view (meta, counts, rows and order, as status shows them), checked to be of one
    commit, and of no commit older than one seen before. ``lean``: the rows are read as
    (state, message length) by one query on the same reader, not as
    :class:`~hpcflow.store.statedb.TaskRow` objects (a third of the time: for the long
    recorded run)."""
    meta = db.meta()
    counts = db.counts()
    if lean:
        rows = db._rows("SELECT state, length(message) FROM tasks ORDER BY idx")
        seen = [state for state, _ in rows]
        lengths = [size or 0 for _, size in rows]
        order = ["t"]
    else:
        tasks = db.tasks()
        seen = [r.state for r in tasks]
        lengths = [len(r.message or "") for r in tasks]
        order = db.names_in_order()
    tally.views += 1
    commit = int(meta.get("commits", -1))
    if commit < tally.last_commit:
        tally.wrong_view(f"commit {commit} after commit {tally.last_commit}")
    if commit <= 0:  # the tasks as added: all pending
        states, length = ["pending"] * TASKS, -1
    else:
        states, length = expected(commit, longest)
    if seen != states:
        differ = sum(a != b for a, b in zip(seen, states, strict=False))
        tally.wrong_view(f"commit {commit}: {len(seen)} rows, {differ} states not of that commit")
    elif length >= 0 and any(size != length for size in lengths):
        tally.wrong_view(f"commit {commit}: messages not of that commit")
    elif counts != {"t": dict(collections.Counter(states))} or order != ["t"]:
        tally.wrong_view(f"commit {commit}: counts {counts} are not its rows'")
    if tally.first_commit is None:
        tally.first_commit = commit
    tally.last_commit = max(tally.last_commit, commit)


@contextlib.contextmanager
def writer_on_node(
    env: dict[str, str], folder: Path, seconds: float, longest: int = MESSAGE, node: str = "n2"
) -> Iterator[tuple[subprocess.Popen[str], Path, Path]]:
    """The writer running on ``node`` (started, and ready: its tasks added), its
    messages shorter than ``longest``; yields the process, the state file and the stop
    file. Killed if still running at the end."""
    state = folder / "state.sqlite"
    stop = folder / "stop"
    script = folder / "writer.py"
    script.write_text(textwrap.dedent(WRITER))
    root = Path(__file__).resolve().parents[2]
    writer = subprocess.Popen(
        ["srun", "-N1", "-n1", "-w", node, sys.executable, str(script), str(state), str(stop),
         str(seconds), str(longest)],
        env={**env, "PYTHONPATH": str(root)}, cwd=folder, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        ready = folder / "state.sqlite.ready"
        deadline = time.monotonic() + 120
        while not ready.exists():
            if writer.poll() is not None:
                raise RuntimeError(f"the writer ended before it was ready: {writer.communicate()}")
            if time.monotonic() > deadline:
                raise RuntimeError("the writer was not ready (its tasks added) within 120 s")
            time.sleep(0.1)
        yield writer, state, stop
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.communicate()


def read_while_writing(
    state: Path,
    writing: Callable[[], bool],
    enough: Callable[[Tally], bool],
    snapshots: SnapshotReader,
    progress: float = 0.0,
    longest: int = MESSAGE,
    lean: bool = False,
) -> Tally:
    """Views of ``state`` while ``writing()`` and until the tally is ``enough``: a fresh
    reader each, as ``hpcflow status`` and ``read_run`` take them. ``progress``: log a
    line every so many seconds."""
    tally = Tally()
    started = last_log = time.monotonic()
    while writing() and not enough(tally):
        try:
            with StateDB(state, readonly=True, snapshots=snapshots) as db:
                check_view(db, tally, longest, lean)
        except Exception as exc:  # noqa: BLE001 - counted: a read that failed for good
            tally.errors[f"{type(exc).__name__}: {exc}"[:200]] += 1
        if progress and time.monotonic() - last_log >= progress:
            last_log = time.monotonic()
            rate = tally.views / (last_log - started)
            log.info(
                "%d views (%.0f/s), %d wrong, snapshot reads retried: %d torn, %d stale, "
                "%d missing; commit %s, load %s, errors %s",
                tally.views, rate, tally.wrong, snapshots.torn, snapshots.stale, snapshots.missing,
                tally.last_commit, os.getloadavg(), dict(tally.errors),
            )  # fmt: skip
    return tally


def _reader(
    state: Path, quota: int, args: argparse.Namespace, writing: Event, results: Queue[dict]
) -> None:
    """One reader process of the recorded run: ``quota`` views, then its tally."""
    snapshots = PlainReader() if args.plain else SnapshotReader()
    tally = read_while_writing(
        state, writing.is_set, lambda t: t.views >= quota, snapshots, args.progress,
        args.message, args.lean,
    )  # fmt: skip
    results.put(
        {"tally": tally, "torn": snapshots.torn, "stale": snapshots.stale,
         "missing": snapshots.missing}
    )  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=1_000_000)
    parser.add_argument("--readers", type=int, default=1, help="reader processes")
    parser.add_argument("--plain", action="store_true", help="read state.sqlite itself")
    parser.add_argument("--progress", type=float, default=30.0, help="seconds between logs")
    parser.add_argument("--lean", action="store_true", help="rows as (state, length) tuples")
    parser.add_argument(
        "--message", type=int, default=MESSAGE, help="messages shorter than this (bytes)"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(processName)s %(message)s")
    from tests.slurm_cluster import start_cluster

    context = multiprocessing.get_context("fork")
    started = time.monotonic()
    results: list[dict] = []
    with start_cluster() as cluster:
        folder = cluster.mkdtemp(prefix="torn-reads-")
        log.info("cluster up; writer on n2, %d readers here; folder %s", args.readers, folder)
        with writer_on_node(cluster.env, folder, seconds=10 * 24 * 3600, longest=args.message) as (
            writer,
            state,
            stop,
        ):
            writing = context.Event()
            writing.set()
            queue: Queue[dict] = context.Queue()
            quota = -(-args.reads // args.readers)
            readers = [
                context.Process(target=_reader, args=(state, quota, args, writing, queue))
                for _ in range(args.readers)
            ]
            for reader in readers:
                reader.start()
            while len(results) < len(readers):
                if writer.poll() is not None:
                    writing.clear()
                with contextlib.suppress(queue_module.Empty):
                    results.append(queue.get(timeout=1.0))
            for reader in readers:
                reader.join()
            stop.touch()
            out, err = writer.communicate(timeout=120)
    seconds = time.monotonic() - started
    tallies = [r["tally"] for r in results]
    views = sum(t.views for t in tallies)
    wrong = sum(t.wrong for t in tallies)
    errors: collections.Counter[str] = sum((t.errors for t in tallies), collections.Counter())
    firsts = [t.first_commit for t in tallies if t.first_commit is not None]
    print(
        f"reader: {'plain state.sqlite' if args.plain else 'snapshots'}; {TASKS} tasks, "
        f"messages < {args.message} bytes; {args.readers} reader processes; "
        f"{'lean ' if args.lean else ''}views {views}; wrong views {wrong}; snapshot reads "
        f"retried: torn {sum(r['torn'] for r in results)}, stale "
        f"{sum(r['stale'] for r in results)}, missing {sum(r['missing'] for r in results)}; "
        f"commits seen {min(firsts, default=None)}..{max(t.last_commit for t in tallies)}; "
        f"writer commits {out.strip()}; failed reads {sum(errors.values())} {dict(errors)}; "
        f"{seconds:.0f} s; load {os.getloadavg()}"
    )
    for tally in tallies:
        for example in tally.examples:
            print("  wrong:", example)
    if writer.returncode != 0:
        print("writer failed:", err[-2000:])
    return 1 if wrong or writer.returncode != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
