"""The memo of finished tasks, shared by all runs of one workflow: what lets a re-run resume.

A task is *up to date* when the memo holds its fingerprint (command, parameters, env,
working directory and outputs), and the sizes and modification times of its inputs and
outputs are the same as when it succeeded.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

FileSig = dict[str, list[int]]


@dataclass(frozen=True, slots=True)
class MemoEntry:
    task_id: str
    fingerprint: str
    inputs: FileSig
    outputs: FileSig
    run_id: str


class Memo:
    """Read and write the memo table for one workflow key."""

    def __init__(self, path: Path, workflow_key: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, timeout=30)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS memo (workflow TEXT NOT NULL, task_id TEXT NOT NULL,"
            " fingerprint TEXT NOT NULL, inputs TEXT NOT NULL, outputs TEXT NOT NULL,"
            " run_id TEXT NOT NULL, PRIMARY KEY (workflow, task_id))"
        )
        self._key = workflow_key

    def close(self) -> None:
        self._conn.close()

    def load(self) -> dict[str, MemoEntry]:
        rows = self._conn.execute(
            "SELECT task_id, fingerprint, inputs, outputs, run_id FROM memo WHERE workflow = ?",
            (self._key,),
        )
        return {r[0]: MemoEntry(r[0], r[1], json.loads(r[2]), json.loads(r[3]), r[4]) for r in rows}

    def record(self, entries: Iterable[MemoEntry]) -> None:
        with self._conn:
            self._conn.executemany(
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
        with self._conn:
            self._conn.executemany(
                "DELETE FROM memo WHERE workflow = ? AND task_id = ?",
                ((self._key, t) for t in task_ids),
            )
