"""Per-worker task logs (``task_logs: per-worker``): the record format, and reading one
attempt's stream back out of them.

With per-task logs every attempt's stdout and stderr are files of their own,
``RUN_DIR/tasks/SLUG/ATTEMPT.out`` and ``.err`` (made on the first byte). On a shared file
system (Lustre, GPFS, GlusterFS) creating a file and its folder costs far more than
writing a line, so with ``per-worker`` each process that runs tasks appends its tasks'
output to one file of its own instead, ``RUN_DIR/logs/HOST-PID-TOKEN.log``, as records::

    \\0hpcflow-log SLUG/ATTEMPT.out LENGTH\\n<LENGTH bytes>

Each record names the per-task file it stands for (``SLUG/ATTEMPT.out`` or ``.err``, the
path below ``tasks/``), so a task's stream is the concatenation of its records, in order,
and every reader that knows a per-task path can read the same bytes
(:func:`read_attempt_log`). Each file has one writer (the process that made it, with a
random token in its name); a record is one ``write`` on an ``O_APPEND`` descriptor, so a
crash leaves every finished task's records whole and at most the last record cut short,
whose bytes so far are still read.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hpcflow.store.paths import RunPaths
from hpcflow.store.tail import tail_lines

log = logging.getLogger(__name__)

#: How every record's header starts.
MAGIC = b"\0hpcflow-log "
#: Longest header read (a slug is at most ~100 characters).
MAX_HEADER = 512
#: What a per-worker log file's name ends with.
SUFFIX = ".log"
#: A record's key: ``SLUG/ATTEMPT.out`` or ``SLUG/ATTEMPT.err`` (slugs are file-system safe).
_KEY = re.compile(rb"[A-Za-z0-9_.=-]+/[0-9]+\.(?:out|err)")


def record_key(per_task_path: str) -> str:
    """The key of the records that stand for ``per_task_path`` (``…/tasks/SLUG/N.out``)."""
    folder, name = os.path.split(per_task_path)
    return f"{os.path.basename(folder)}/{name}"


def encode_record(key: str, data: bytes) -> bytes:
    """One record: its header, then ``data``."""
    return MAGIC + key.encode("ascii") + b" " + str(len(data)).encode("ascii") + b"\n" + data


@dataclass(frozen=True, slots=True)
class Record:
    """Where one record's bytes are: its file, their offset and length."""

    path: Path
    offset: int
    length: int


def scan_records(
    path: Path, start: int = 0
) -> tuple[list[tuple[str, Record]], int, tuple[str, Record] | None]:
    """The whole records of ``path`` from offset ``start``: ``(records, end, partial)``.
    ``end`` is the offset after the last whole record; ``partial`` is the record that
    begins there but ends beyond the file (being written, or cut by a crash), with its
    bytes so far, or None."""
    records: list[tuple[str, Record]] = []
    partial: tuple[str, Record] | None = None
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        handle.seek(start)
        offset = start
        while offset < size:
            header = handle.readline(MAX_HEADER)
            if not header.endswith(b"\n"):
                break  # a header cut short: nothing of that record is readable yet
            parts = header[len(MAGIC) : -1].split(b" ")
            if (
                not header.startswith(MAGIC)
                or len(parts) != 2
                or not _KEY.fullmatch(parts[0])
                or not parts[1].isdigit()
            ):
                log.warning("%s: no log record at offset %d; the rest is skipped", path, offset)
                break
            length = int(parts[1])
            body = offset + len(header)
            key = parts[0].decode("ascii")
            if body + length > size:
                partial = (key, Record(path, body, size - body))
                break
            records.append((key, Record(path, body, length)))
            offset = body + length
            handle.seek(offset)
    return records, offset, partial


@dataclass
class _FileScan:
    end: int = 0
    size: int = -1
    tail: list[tuple[str, Record]] = field(default_factory=list)


class LogIndex:
    """Which records of a run's per-worker log files hold which per-task stream.

    Built by reading only the records' headers; :meth:`refresh` reads what the files
    gained since (a running run), so one index serves many look-ups.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._records: dict[str, list[Record]] = {}
        self._files: dict[Path, _FileScan] = {}

    def refresh(self) -> None:
        """Read the headers of records written since the last refresh."""
        try:
            names = sorted(n for n in os.listdir(self.folder) if n.endswith(SUFFIX))
        except FileNotFoundError:
            return
        for name in names:
            path = self.folder / name
            scan = self._files.setdefault(path, _FileScan())
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            if size == scan.size:
                continue
            try:
                records, end, partial = scan_records(path, scan.end)
            except OSError as exc:
                log.warning("cannot read %s: %s", path, exc)
                continue
            for key, record in records:
                self._records.setdefault(key, []).append(record)
            scan.tail = [partial] if partial is not None else []
            scan.end, scan.size = end, size

    def records(self, key: str) -> list[Record]:
        """The records of ``key``, a last one still being written (or cut) included."""
        found = list(self._records.get(key, ()))
        for scan in self._files.values():
            found += [record for k, record in scan.tail if k == key]
        return found

    def read(self, key: str) -> bytes | None:
        """What the per-task file ``key`` would hold; None when no record names it."""
        records = self.records(key)
        if not records:
            return None
        return b"".join(_read(record) for record in records)

    def files(self, key: str) -> list[Path]:
        """The per-worker files that hold records of ``key``."""
        return sorted({record.path for record in self.records(key)})


def _read(record: Record) -> bytes:
    with open(record.path, "rb") as handle:
        handle.seek(record.offset)
        return handle.read(record.length)


def logs_folder_of(per_task_path: Path) -> Path:
    """The per-worker logs folder of the run that ``per_task_path`` (``RUN/tasks/SLUG/N.out``)
    belongs to."""
    return RunPaths(per_task_path.parent.parent.parent).logs_dir


def read_attempt_log(per_task_path: Path, index: LogIndex | None = None) -> bytes | None:
    """One attempt's stream: its per-task file, else its records in the run's per-worker
    logs (``index``, or one made for this call); None when it wrote nothing there."""
    try:
        return per_task_path.read_bytes()
    except FileNotFoundError:
        pass
    if index is None:
        folder = logs_folder_of(per_task_path)
        if not folder.is_dir():
            return None
        index = LogIndex(folder)
    index.refresh()
    return index.read(record_key(str(per_task_path)))


def attempt_log_tail(
    per_task_path: Path,
    lines: int = 5,
    max_bytes: int = 64 * 1024,
    index: LogIndex | None = None,
) -> list[str] | None:
    """The last ``lines`` lines of one attempt's stream (None when it wrote nothing);
    ``index``: one kept for many look-ups, as for :func:`read_attempt_log`."""
    found = tail_lines(per_task_path, lines, max_bytes)
    if found is not None:
        return found
    data = read_attempt_log(per_task_path, index)
    if data is None:
        return None
    return data[-max_bytes:].decode("utf-8", "replace").splitlines()[-lines:]


@dataclass(frozen=True)
class LogLocation:
    """Where to find one attempt's stream, to tell a user (``hpcflow status``, the run's
    summary, the report): its own file, or with per-worker logs the records that hold it
    and the ``hpcflow logs`` command that prints it."""

    #: The per-task file (``RUN_DIR/tasks/SLUG/N.err``); with per-worker logs it never
    #: exists.
    path: Path
    #: Per-worker logs: the records holding the stream, in order (none yet: it wrote
    #: nothing there so far).
    records: tuple[Record, ...] = ()
    #: Per-worker logs: the command that prints the stream; None with per-task logs.
    command: str | None = None

    @property
    def files(self) -> list[Path]:
        """The per-worker files that hold its records."""
        return sorted({record.path for record in self.records})

    def describe(self) -> str:
        """One line: the per-task file, or the command and the file(s) of its records."""
        if self.command is None:
            return str(self.path)
        files = ", ".join(str(f) for f in self.files)
        return self.command + (f"  (in {files})" if files else "")

    def as_json(self, key: str) -> dict[str, object]:
        """``{key: per-task file}``; with per-worker logs ``{key: None, key_records:
        [{file, offset, length}], "log_command": …}``."""
        if self.command is None:
            return {key: str(self.path)}
        return {
            key: None,
            f"{key}_records": [
                {"file": str(r.path), "offset": r.offset, "length": r.length} for r in self.records
            ],
            "log_command": self.command,
        }


def locate_attempt_log(
    paths: RunPaths,
    run: str,
    task_id: str,
    per_task_path: Path,
    index: LogIndex | None = None,
    attempt: int | None = None,
) -> LogLocation:
    """Where the stream of ``per_task_path`` (``…/tasks/SLUG/N.out`` or ``.err``) of task
    ``task_id`` in run ``run`` (its id, as ``hpcflow logs`` takes it) is: the file itself
    where it exists or the run has no per-worker logs (a per-task stream that wrote
    nothing has no file either); else its records (``index``: one kept for many
    look-ups) and the command that prints it, with ``--attempt attempt`` when given (not
    the task's latest)."""
    if not paths.logs_dir.is_dir() or per_task_path.exists():
        return LogLocation(per_task_path)
    if index is None:
        index = LogIndex(paths.logs_dir)
    index.refresh()
    stream = "stderr" if per_task_path.suffix == ".err" else "stdout"
    words = ["hpcflow", "logs", run, task_id, "--stream", stream]
    if attempt is not None:
        words += ["--attempt", str(attempt)]
    records = tuple(index.records(record_key(str(per_task_path))))
    return LogLocation(per_task_path, records, shlex.join(words))


def iter_log_files(folder: Path) -> Iterator[Path]:
    """The per-worker log files in ``folder``."""
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return
    for name in names:
        if name.endswith(SUFFIX):
            yield folder / name
