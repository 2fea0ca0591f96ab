"""Sweep values read from files, under ``foreach``: an instance per matching file, or per
row of a sample sheet.

::

    foreach:
      from_files: "data/{sample}_R{read}.fastq.gz"     # named captures from file names
      from_table: {path: samples.tsv, where: {condition: treated}, columns: [sample]}
      seed: [1, 2]                                      # combined with these as a product

``from_files`` is a pattern relative to the workflow's folder: each ``{name}`` matches one
or more characters other than ``/`` (the same name twice must match the same text), and
every other character itself; ``{glob: PATTERN, path: NAME}`` also passes the matched
path as parameter ``NAME``. Files come in sorted order. ``from_table`` reads a CSV
(``.csv``), TSV (``.tsv``, ``.tab``), JSON or YAML (``.json``, ``.yaml``, ``.yml``: a
list of mappings) file: its columns are the parameters (letters, digits and ``_``), a row
per instance, in the file's order; ``where`` keeps the rows whose column has the value
(or one of the values) given, ``columns`` keeps only those columns. Each source's
parameters advance together (one instance per file or row), and sources combine with the
other swept parameters as a product.

``after: TASK`` (in the mapping forms) reads the files a task makes: the source is read
only once that task is in ``ready`` (it has ended), and until then gives its parameter
names and no rows (:mod:`hpcflow.engine.fanout` plans it during the run).

What a source read is recorded (:attr:`SourceReader.read`) and kept in the run directory,
so that the run's allocations rebuild exactly the instances that were planned even if
files appear or change meanwhile (:func:`hpcflow.engine.prepare.load_run_graph`).
"""

from __future__ import annotations

import csv
import glob
import io
import re
from dataclasses import dataclass, replace
from pathlib import Path as FsPath
from typing import Any

from hpcflow.errors import SpecError, SpecProblem
from hpcflow.spec.limits import MAX_TABLE_BYTES, InputTooLarge, read_capped
from hpcflow.spec.yamlpos import Path, Positions, format_path, load_yaml

ScalarValue = str | int | float | bool
#: A source's parameter names and rows (None: not read yet, see ``after``).
Rows = tuple[tuple[str, ...], list[tuple[ScalarValue, ...]] | None]

#: The ``foreach`` keys that read values from files.
SOURCE_KEYS = ("from_files", "from_table")
_CAPTURE = re.compile(r"\{([^{}]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DELIMITERS = {".csv": ",", ".tsv": "\t", ".tab": "\t"}
_STRUCTURED = (".json", ".yaml", ".yml")
#: Most rows or files one source may give.
MAX_ROWS = 1_000_000


@dataclass(frozen=True)
class FilePattern:
    """A ``from_files`` pattern: its captures, the regular expression that reads them
    from a path, and the glob that finds candidate files."""

    pattern: str
    names: tuple[str, ...]
    path_param: str | None
    regex: re.Pattern[str]
    shell: str

    @property
    def parameters(self) -> tuple[str, ...]:
        """The parameters each file gives: the captures, then the path's (if named)."""
        return (*self.names, *([self.path_param] if self.path_param else []))


class SourceReader:
    """Reads the sources of one workflow's sweeps, relative to ``base_dir``; ``frozen``
    (what an earlier read recorded, by ``TASK/KEY``) is used instead of the files."""

    def __init__(
        self,
        base_dir: FsPath,
        positions: Positions,
        frozen: dict[str, Any] | None = None,
        ready: frozenset[str] = frozenset(),
    ) -> None:
        self.base_dir = base_dir
        self.positions = positions
        self.frozen = frozen or {}
        #: Tasks that have made their files: the sources read ``after`` them are read now.
        self.ready = ready
        #: What was read, by ``TASK/KEY``: ``{"names": [...], "rows": [[...], ...]}``.
        self.read: dict[str, dict[str, list[Any]]] = {}

    def rows(
        self, task: str, key: str, raw: Any, where: Path, problems: list[SpecProblem]
    ) -> Rows | None:
        """The parameter names and rows of source ``key`` of task ``task`` (None, with
        ``problems`` added, when it cannot be read). The rows are None when the source is
        read after a task (``after: TASK``) that has not made its files yet."""
        ident = f"{task}/{key}"
        after = self._after(raw, where, problems)
        if after is False:
            return None
        if ident in self.frozen:
            names = tuple(self.frozen[ident]["names"])
            rows = [tuple(row) for row in self.frozen[ident]["rows"]]
        elif after is not None and after not in self.ready:
            known = self._names(key, raw, where, problems)
            return None if known is None else (known, None)
        else:
            before = len(problems)
            read = self._files if key == "from_files" else self._table
            got = read(raw, where, problems)
            if got is None or len(problems) > before:
                return None
            names, found = got
            rows = found or []
            if not rows and after is None:
                # (What a task makes may be nothing: then the sweep has no instances.)
                what = "no file matches" if key == "from_files" else "no row is left in"
                problems.append(
                    self.positions.problem(
                        where,
                        f"{what} {self._describe(raw)}: the sweep would have no instances",
                        hint="check the pattern or the table (and its 'where')",
                    )
                )
                return None
            if len(rows) > MAX_ROWS:
                problems.append(
                    self.positions.problem(where, f"more than {MAX_ROWS:,} rows or files")
                )
                return None
        self.read[ident] = {"names": list(names), "rows": [list(row) for row in rows]}
        return names, rows

    def _after(self, raw: Any, where: Path, problems: list[SpecProblem]) -> str | None | bool:
        """The task a source is read after (None: read when planned; False: invalid)."""
        if not isinstance(raw, dict) or "after" not in raw:
            return None
        after = raw["after"]
        if not isinstance(after, str) or not after:
            problems.append(
                self.positions.problem(
                    (*where, "after"), "after names the task that makes the files",
                )
            )  # fmt: skip
            return False
        return after

    def _names(
        self, key: str, raw: Any, where: Path, problems: list[SpecProblem]
    ) -> tuple[str, ...] | None:
        """The parameters a source not read yet will give."""
        if key == "from_files":
            pattern = self._pattern(raw, where, problems)
            return None if pattern is None else pattern.parameters
        columns = raw.get("columns")
        if not isinstance(columns, list) or not columns:
            problems.append(
                self.positions.problem(
                    where, "a table read after a task must name its columns",
                    hint="add columns: [A, B]: the workflow is checked before the table "
                    "exists",
                )
            )  # fmt: skip
            return None
        if not all(isinstance(c, str) and _NAME.fullmatch(c) for c in columns):
            problems.append(
                self.positions.problem(
                    (*where, "columns"), "columns are parameter names: letters, digits and _"
                )
            )
            return None
        return tuple(columns)

    @staticmethod
    def _describe(raw: Any) -> str:
        if isinstance(raw, dict):
            return repr(raw.get("glob") or raw.get("path"))
        return repr(raw)

    # -- from_files ------------------------------------------------------------------------

    def _pattern(self, raw: Any, where: Path, problems: list[SpecProblem]) -> FilePattern | None:
        path_param = None
        pattern = raw
        if isinstance(raw, dict):
            unknown = sorted(set(raw) - {"glob", "path", "after"})
            for key in unknown:
                problems.append(
                    self.positions.problem(
                        (*where, key), f"unknown key {key!r}", hint="use glob, path and after",
                        key=True,
                    )
                )  # fmt: skip
            pattern, path_param = raw.get("glob"), raw.get("path")
            if path_param is not None and not (
                isinstance(path_param, str) and _NAME.fullmatch(path_param)
            ):
                problems.append(
                    self.positions.problem(
                        (*where, "path"), "path names the parameter that holds the file's path: "
                        "letters, digits and _",
                    )
                )  # fmt: skip
                return None
        if not isinstance(pattern, str) or not pattern.strip():
            problems.append(
                self.positions.problem(
                    where,
                    'from_files takes a file pattern, e.g. "data/{sample}.fastq"',
                    hint="or {glob: PATTERN, path: PARAMETER}",
                )
            )
            return None
        names: list[str] = []
        regex, shell = "", ""
        last = 0
        for match in _CAPTURE.finditer(pattern):
            literal = pattern[last : match.start()]
            regex += re.escape(literal)
            shell += glob.escape(literal)
            name = match.group(1)
            if not _NAME.fullmatch(name):
                problems.append(
                    self.positions.problem(
                        where, f"{{{name}}} in the pattern is not a parameter name",
                        hint="captures are {name}: letters, digits and _",
                    )
                )  # fmt: skip
                return None
            if name in names:
                regex += f"(?P={name})"
            else:
                names.append(name)
                regex += f"(?P<{name}>[^/]+)"
            shell += "*"
            last = match.end()
        regex += re.escape(pattern[last:])
        shell += glob.escape(pattern[last:])
        if not names:
            problems.append(
                self.positions.problem(
                    where, f"the pattern {pattern!r} captures nothing",
                    hint="name the parts that vary, e.g. data/{sample}.fastq",
                )
            )  # fmt: skip
            return None
        if path_param is not None and path_param in names:
            problems.append(
                self.positions.problem(
                    (*where, "path"), f"{path_param!r} is also a capture of the pattern"
                )
            )
            return None
        return FilePattern(pattern, tuple(names), path_param, re.compile(regex), shell)

    def _files(self, raw: Any, where: Path, problems: list[SpecProblem]) -> Rows | None:
        found = self._pattern(raw, where, problems)
        if found is None:
            return None
        absolute = FsPath(found.pattern).is_absolute()
        hits = sorted(glob.glob(found.shell if absolute else str(self.base_dir / found.shell)))
        rows: list[tuple[ScalarValue, ...]] = []
        for hit in hits:
            relative = hit if absolute else str(FsPath(hit).relative_to(self.base_dir))
            hit_match = found.regex.fullmatch(relative)
            if hit_match is None:  # e.g. a capture would have to span a '/'
                continue
            row: tuple[ScalarValue, ...] = tuple(hit_match.group(n) for n in found.names)
            rows.append((*row, relative) if found.path_param else row)
        return found.parameters, rows

    # -- from_table ------------------------------------------------------------------------

    def _table(self, raw: Any, where: Path, problems: list[SpecProblem]) -> Rows | None:
        spec: dict[str, Any] = {"path": raw} if isinstance(raw, str) else raw
        if not isinstance(spec, dict) or not isinstance(spec.get("path"), str):
            problems.append(
                self.positions.problem(
                    where, "from_table takes a file, e.g. samples.tsv",
                    hint="or {path: FILE, where: {COLUMN: VALUE}, columns: [A, B]}",
                )
            )  # fmt: skip
            return None
        for key in sorted(set(spec) - {"path", "where", "columns", "after"}):
            problems.append(
                self.positions.problem(
                    (*where, key), f"unknown key {key!r}", hint="use path, where, columns "
                    "and after",
                    key=True,
                )
            )  # fmt: skip
        file = FsPath(spec["path"])
        file = file if file.is_absolute() else self.base_dir / file
        at = (*where, "path") if isinstance(raw, dict) else where
        try:
            text = read_capped(file, "a sample sheet", MAX_TABLE_BYTES)
        except InputTooLarge as exc:
            problems.append(self.positions.problem(at, f"{file}: {exc}", hint=exc.hint))
            return None
        except (OSError, UnicodeDecodeError) as exc:
            reason = "no such file" if isinstance(exc, FileNotFoundError) else str(exc)
            problems.append(self.positions.problem(at, f"cannot read {file}: {reason}"))
            return None
        suffix = file.suffix.lower()
        before = len(problems)
        if suffix in _DELIMITERS:
            table = _delimited(text, str(file), _DELIMITERS[suffix], problems)
        elif suffix in _STRUCTURED:
            table = _structured(text, str(file), problems)
        else:
            problems.append(
                self.positions.problem(
                    at, f"cannot tell what kind of table {file.name} is",
                    hint="name it .csv, .tsv, .json or .yaml",
                )
            )  # fmt: skip
            return None
        if table is None:
            # Say which task reads the table, with its line in the workflow.
            line, _ = self.positions.locate(at)
            read_by = f"read by {format_path(where)} ({self.positions.file_for(at)}:{line})"
            problems[before:] = [
                replace(p, hint=f"{p.hint}; {read_by}" if p.hint else read_by)
                for p in problems[before:]
            ]
            return None
        names, rows = table
        keep = list(range(len(names)))
        wanted = spec.get("where") or {}
        if not isinstance(wanted, dict):
            problems.append(
                self.positions.problem((*where, "where"), "where maps columns to values")
            )
            return None
        for column, value in wanted.items():
            if column not in names:
                problems.append(
                    self.positions.problem(
                        (*where, "where", column), f"{file.name} has no column {column!r}",
                        hint=f"its columns: {', '.join(names)}", key=True,
                    )
                )  # fmt: skip
                return None
            accepted = {str(v) for v in (value if isinstance(value, list) else [value])}
            i = names.index(column)
            rows = [row for row in rows if str(row[i]) in accepted]
        columns = spec.get("columns")
        if columns is not None:
            if not isinstance(columns, list) or not columns:
                problems.append(
                    self.positions.problem((*where, "columns"), "columns is a list of columns")
                )
                return None
            for j, column in enumerate(columns):
                if column not in names:
                    problems.append(
                        self.positions.problem(
                            (*where, "columns", j), f"{file.name} has no column {column!r}",
                            hint=f"its columns: {', '.join(names)}",
                        )
                    )  # fmt: skip
                    return None
            keep = [names.index(column) for column in columns]
        return tuple(names[i] for i in keep), [tuple(row[i] for i in keep) for row in rows]


def literal_folder(pattern: str) -> str:
    """The folder a ``from_files`` pattern names before its first capture (``data/x_{s}``
    → ``data``; "" for the workflow's folder)."""
    return pattern[: pattern.find("{")].rpartition("/")[0] if "{" in pattern else pattern


def _header_names(names: list[str], file: str, line: int, problems: list[SpecProblem]) -> bool:
    """Whether every column name can be a parameter (and none repeats)."""
    ok = True
    for name in names:
        if not _NAME.fullmatch(name):
            problems.append(
                SpecProblem(
                    file=file,
                    line=line,
                    column=None,
                    where="header",
                    message=f"column {name!r} cannot be a parameter name",
                    hint="name columns with letters, digits and _",
                )
            )
            ok = False
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(SpecProblem(file, line, None, "header", f"column {name!r} twice"))
        ok = False
    return ok


def _delimited(
    text: str, file: str, delimiter: str, problems: list[SpecProblem]
) -> tuple[list[str], list[tuple[ScalarValue, ...]]] | None:
    """A CSV/TSV table: the header's names, then a row per non-empty record. Python's
    CSV parser reads the whole text, so that a quoted cell keeps its line breaks."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = next(reader)
    except StopIteration:
        problems.append(SpecProblem(file, 1, None, "header", "the table is empty"))
        return None
    except csv.Error as exc:
        problems.append(SpecProblem(file, 1, None, "header", f"cannot read the header: {exc}"))
        return None
    names = [name.strip() for name in header]
    if not _header_names(names, file, reader.line_num, problems):
        return None
    rows: list[tuple[ScalarValue, ...]] = []
    try:
        for fields in reader:
            if not any(field.strip() for field in fields):
                continue
            if len(fields) != len(names):
                problems.append(
                    SpecProblem(
                        file=file,
                        line=reader.line_num,
                        column=None,
                        where=f"row {len(rows) + 1}",
                        message=f"has {len(fields)} fields, the header has {len(names)}",
                        hint=f"the row: {delimiter.join(fields)[:120]!r}",
                    )
                )
                return None
            rows.append(tuple(fields))
    except csv.Error as exc:
        problems.append(SpecProblem(file, reader.line_num, None, "", str(exc)))
        return None
    return names, rows


def _structured(
    text: str, file: str, problems: list[SpecProblem]
) -> tuple[list[str], list[tuple[ScalarValue, ...]]] | None:
    """A JSON/YAML table: a list of mappings of scalars, each with the first one's keys."""
    try:
        data, positions = load_yaml(text, file)
    except SpecError as exc:
        problems.extend(exc.problems)
        return None
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        problems.append(positions.problem((), "a table file is a list of mappings, a row each"))
        return None
    names = [str(name) for name in data[0]]
    line = positions.locate((0,))[0] or 1
    if not _header_names(names, file, line, problems):
        return None
    rows: list[tuple[ScalarValue, ...]] = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or sorted(map(str, item)) != sorted(names):
            problems.append(
                positions.problem(
                    (i,), f"row {i + 1} does not have the columns of the first row",
                    hint=f"every row needs: {', '.join(names)}",
                )
            )  # fmt: skip
            return None
        for name in names:
            if not isinstance(item[name], str | int | float | bool):
                problems.append(
                    positions.problem((i, name), f"row {i + 1}: {name} must be text, a number "
                                      "or true/false")
                )  # fmt: skip
                return None
        rows.append(tuple(item[name] for name in names))
    return names, rows
