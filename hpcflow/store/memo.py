"""The memo of finished tasks, shared by all runs of one workflow: what lets a re-run resume.

A task is *up to date* when the memo holds its fingerprint (command, parameters, env,
working directory and outputs), and the sizes and modification times of its inputs and
outputs are the same as when it succeeded.

The memo has one writer at a time: the run of its workflow that holds the workflow's run
lock (its driver, wherever that runs). Its writes are batched; successes that a killed
driver had not committed yet are in the journals of the processes that ran them
(:mod:`hpcflow.worker.journal`), which :meth:`Memo.fold_journals` brings in before the
next run decides what to run.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from hpcflow.store import memo_repair
from hpcflow.store.damage import is_damage
from hpcflow.store.private import private_dir
from hpcflow.store.sqlite import BatchedWriter, connect_reader, connect_writer

log = logging.getLogger(__name__)

FileSig = dict[str, list[int]]

_decode = json.JSONDecoder().raw_decode


@dataclass(frozen=True)
class Settled:
    """The run after which every task of a workflow was up to date (:meth:`Memo.settle`).

    ``digest`` names the workflow text and hpcflow version it ran; ``entries`` and
    ``last_row`` are the count and the largest row id of the workflow's memo entries then:
    any later write to them (a success recorded, a journal folded, by any version of
    hpcflow) changes one of the two, and the settled run no longer holds.
    """

    run_dir: Path
    digest: str
    entries: int
    last_row: int


@dataclass(frozen=True, slots=True)
class MemoEntry:
    task_id: str
    fingerprint: str
    inputs: FileSig
    outputs: FileSig
    run_id: str


class Memo(BatchedWriter):
    """Read and write the memo table for one workflow key (batched: :meth:`flush_due`,
    :meth:`flush` and :meth:`close` commit)."""

    def __init__(self, path: Path, workflow_key: str) -> None:
        #: Where a damaged memo was set aside when this one was opened (else None).
        self.set_aside: Path | None = None
        if str(path) != ":memory:":
            private_dir(path.parent)  # the state root (.hpcflow), 0700
        try:
            conn = _open(path, check=str(path) != ":memory:")
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise
            conn = self._replace(path, str(exc))
        super().__init__(conn)
        self._key = workflow_key

    def _replace(self, path: Path, reason: str) -> sqlite3.Connection:
        """Set the damaged memo at ``path`` aside and open a new one holding the entries
        still readable in it (:mod:`hpcflow.store.memo_repair`)."""
        self.set_aside = memo_repair.set_aside(path)
        rows = memo_repair.salvage(self.set_aside, "memo")
        conn = _open(path, check=False)
        conn.executemany("INSERT OR REPLACE INTO memo VALUES (?, ?, ?, ?, ?, ?)", rows)
        log.warning(
            "the memo %s was damaged (%s): set aside as %s; a new memo starts with the %d "
            "entries still readable in it and the successes in the journals of runs that "
            "did not finish; tasks finished in neither run again",
            path, reason, self.set_aside.name, len(rows),
        )  # fmt: skip
        return conn

    @classmethod
    def preview(cls, path: Path, workflow_key: str, journals: Path) -> Memo:
        """The memo as a run would see it, for a dry run: the file's entries and the
        successes in ``journals``, held in memory. Writes nothing: the file is only read,
        the journals stay (a running run may still be writing them)."""
        memo = cls(Path(":memory:"), workflow_key)
        if path.exists():
            conn = connect_reader(path)
            try:
                rows = conn.execute("SELECT * FROM memo WHERE workflow = ?", (workflow_key,))
                memo.write("INSERT OR REPLACE INTO memo VALUES (?, ?, ?, ?, ?, ?)", list(rows))
            except sqlite3.DatabaseError as exc:
                if not is_damage(exc):
                    raise
                log.warning("the memo %s is damaged (%s): a run sets it aside", path, exc)
            finally:
                conn.close()
        try:
            files = sorted(p for p in journals.iterdir() if p.name.endswith(".jsonl"))
        except FileNotFoundError:
            files = []
        for journal in files:
            memo.record(read_journal(journal, journal.name.split(".", 1)[0]))
        memo.flush()
        return memo

    def load(self) -> dict[str, MemoEntry]:
        rows = self.read(
            "SELECT task_id, fingerprint, inputs, outputs, run_id FROM memo WHERE workflow = ?",
            (self._key,),
        )
        return {r[0]: MemoEntry(r[0], r[1], signatures(r[2]), signatures(r[3]), r[4]) for r in rows}

    def outputs_without_inputs(self) -> dict[str, str]:
        """The outputs' signatures as stored (JSON) of each task that had no inputs (the
        tasks of a settled run: :mod:`hpcflow.modes.settled`), by task id."""
        rows = self.read(
            "SELECT task_id, outputs FROM memo WHERE workflow = ? AND inputs = '{}'", (self._key,)
        )
        return dict(rows)  # type: ignore[arg-type]

    def _extent(self) -> tuple[int, int]:
        count, last = self.read(
            "SELECT count(*), coalesce(max(rowid), 0) FROM memo WHERE workflow = ?", (self._key,)
        )[0]
        return int(count), int(last)

    def settle(self, run_dir: Path, digest: str) -> None:
        """Note that after the run in ``run_dir`` every task of the workflow whose text and
        hpcflow version ``digest`` names is up to date, as the memo now says (committed
        with the memo's next commit)."""
        entries, last = self._extent()
        self.write(
            "INSERT OR REPLACE INTO settled VALUES (?, ?, ?, ?, ?)",
            [(self._key, str(run_dir), digest, entries, last)],
        )

    def settled(self) -> Settled | None:
        """The settled run (:meth:`settle`), if the memo's entries are as it left them."""
        rows = self.read(
            "SELECT run_dir, digest, entries, last_row FROM settled WHERE workflow = ?",
            (self._key,),
        )
        if not rows:
            return None
        run_dir, digest, entries, last = rows[0]
        if self._extent() != (entries, last):
            return None
        return Settled(Path(run_dir), digest, entries, last)

    def record(self, entries: Iterable[MemoEntry]) -> None:
        self.write(
            "INSERT OR REPLACE INTO memo VALUES (?, ?, ?, ?, ?, ?)",
            (
                (
                    self._key,
                    e.task_id,
                    e.fingerprint,
                    json.dumps(e.inputs),
                    json.dumps(e.outputs),
                    e.run_id,
                )
                for e in entries
            ),
        )

    def forget(self, task_ids: Iterable[str]) -> None:
        self.write(
            "DELETE FROM memo WHERE workflow = ? AND task_id = ?",
            ((self._key, t) for t in task_ids),
        )

    def fold_journals(self, folder: Path, keep_run: str | None = None) -> int:
        """Record the successes journaled in ``folder`` by runs that did not finish
        cleanly, commit them, and remove those journals (not ``keep_run``'s). Returns how
        many successes were brought in. Call it holding the workflow's run lock."""
        try:
            files = sorted(p for p in folder.iterdir() if p.name.endswith(".jsonl"))
        except FileNotFoundError:
            return 0
        entries: list[MemoEntry] = []
        done: list[Path] = []
        for path in files:
            run_id = path.name.split(".", 1)[0]
            if run_id == keep_run:
                continue
            entries.extend(read_journal(path, run_id))
            done.append(path)
        if entries:
            self.record(entries)
            log.info("brought in %d successes from %d journal(s)", len(entries), len(done))
        self.flush()
        for path in done:
            try:
                path.unlink()
            except FileNotFoundError:
                pass
        return len(entries)


def _open(path: Path, *, check: bool) -> sqlite3.Connection:
    """The memo's writer connection, its tables made; ``check``: raise
    :class:`sqlite3.DatabaseError` for a damaged file (:func:`memo_repair.check`)."""
    conn = connect_writer(path)
    try:
        if check:
            memo_repair.check(conn)
        conn.execute(
            "CREATE TABLE IF NOT EXISTS memo (workflow TEXT NOT NULL, task_id TEXT NOT NULL,"
            " fingerprint TEXT NOT NULL, inputs TEXT NOT NULL, outputs TEXT NOT NULL,"
            " run_id TEXT NOT NULL, PRIMARY KEY (workflow, task_id))"
        )
        conn.execute(
            "CREATE TABLE IF NOT EXISTS settled (workflow TEXT PRIMARY KEY, run_dir TEXT NOT NULL,"
            " digest TEXT NOT NULL, entries INTEGER NOT NULL, last_row INTEGER NOT NULL)"
        )
    except BaseException:
        conn.close()
        raise
    return conn


def signatures(text: str) -> FileSig:
    """File signatures as the memo stores them (JSON, as :meth:`Memo.record` wrote it);
    most tasks have no inputs. Decoded without :func:`json.loads`'s checks for leading
    and trailing space (a third of the time, read once per task on every resume)."""
    if text == "{}":
        return {}
    try:
        return _decode(text)[0]  # type: ignore[no-any-return]
    except ValueError:
        return json.loads(text)  # type: ignore[no-any-return]


def read_journal(path: Path, run_id: str) -> list[MemoEntry]:
    """The successes in one journal file; a line cut short by a kill is skipped."""
    entries: list[MemoEntry] = []
    try:
        data = path.read_bytes()
    except OSError as exc:
        log.warning("cannot read journal %s: %s", path, exc)
        return entries
    for raw in data.split(b"\n"):
        try:
            task_id, fingerprint, inputs, outputs = json.loads(raw)
        except ValueError:
            continue
        if isinstance(task_id, str) and isinstance(fingerprint, str):
            entries.append(MemoEntry(task_id, fingerprint, inputs, outputs, run_id))
    return entries


def read_run_journals(folder: Path, run_id: str) -> list[MemoEntry]:
    """The successes in every journal file of ``run_id`` (one per process that ran
    tasks for it), oldest file first."""
    try:
        files = sorted(p for p in folder.iterdir() if p.name.startswith(run_id + "."))
    except FileNotFoundError:
        return []
    return [entry for path in files if path.name.endswith(".jsonl")
            for entry in read_journal(path, run_id)]  # fmt: skip


def remove_journals(folder: Path, run_id: str) -> None:
    """Remove ``run_id``'s journal files (its successes are committed to the memo)."""
    try:
        files = [p for p in folder.iterdir() if p.name.startswith(run_id + ".")]
    except FileNotFoundError:
        return
    for path in files:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
