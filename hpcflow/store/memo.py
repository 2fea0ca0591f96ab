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
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from hpcflow.store.sqlite import BatchedWriter, connect_reader, connect_writer

log = logging.getLogger(__name__)

FileSig = dict[str, list[int]]

_decode = json.JSONDecoder().raw_decode


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
        if str(path) != ":memory:":
            path.parent.mkdir(parents=True, exist_ok=True)
        conn = connect_writer(path)
        conn.execute(
            "CREATE TABLE IF NOT EXISTS memo (workflow TEXT NOT NULL, task_id TEXT NOT NULL,"
            " fingerprint TEXT NOT NULL, inputs TEXT NOT NULL, outputs TEXT NOT NULL,"
            " run_id TEXT NOT NULL, PRIMARY KEY (workflow, task_id))"
        )
        super().__init__(conn)
        self._key = workflow_key

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
        return {
            r[0]: MemoEntry(r[0], r[1], _signatures(r[2]), _signatures(r[3]), r[4]) for r in rows
        }

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


def _signatures(text: str) -> FileSig:
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
