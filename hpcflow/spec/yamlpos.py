"""YAML loading that remembers where every key and value came from.

Pydantic validates plain data; to point a user at ``file:line:column`` we keep, for each
path into the document (a tuple of keys and list indices), the position of the key and of
the value.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import yaml

from hpcflow.errors import SpecError, SpecProblem

Path = tuple[str | int, ...]

log = logging.getLogger(__name__)


@dataclass
class Positions:
    """Where each path of a loaded document is, 1-based (line, column).

    A document assembled from several files (a workflow with includes) keeps, in
    ``links``, the parts copied from another document: the part at a path here is the
    part at a path there, whose positions (and file) that document knows. A link costs
    the same whatever the part's size, so that a file included many times is not copied
    position by position at each use.
    """

    file: str
    values: dict[Path, tuple[int, int]] = field(default_factory=dict)
    keys: dict[Path, tuple[int, int]] = field(default_factory=dict)
    #: Grafted parts: path here → (the document it came from, its path there).
    links: dict[Path, tuple[Positions, Path]] = field(default_factory=dict)

    def locate(self, path: Path, *, key: bool = False) -> tuple[int | None, int | None]:
        """The position of ``path`` (its key if ``key``), or of its nearest known parent."""
        return self._find(path, key)[1]

    def has(self, path: Path) -> bool:
        """Whether the document has a value at ``path``."""
        probe = tuple(path)
        for cut in range(len(probe), -1, -1):
            start = probe[:cut]
            if cut == len(probe) and start in self.values:
                return True
            link = self.links.get(start)
            if link is not None:
                other, their = link
                return other.has((*their, *probe[cut:]))
        return False

    def _find(self, path: Path, key: bool) -> tuple[str, tuple[int | None, int | None]]:
        """The file and position of ``path`` (or of its nearest known parent)."""
        table = self.keys if key else self.values
        probe = tuple(path)
        while probe:
            if probe in table:
                return self.file, table[probe]
            if probe in self.values:
                return self.file, self.values[probe]
            link = self._link_at(probe)
            if link is not None:
                other, their = link
                return other._find((*their, *path[len(probe) :]), key)
            probe = probe[:-1]
        return self.file, self.values.get((), (None, None))

    def _link_at(self, probe: Path) -> tuple[Positions, Path] | None:
        return self.links.get(probe) if self.links else None  # (most documents have none)

    def origin(self, path: Path) -> tuple[str, Path]:
        """The file ``path`` was read from, and its path in that file."""
        probe = tuple(path)
        while probe:
            link = self._link_at(probe)
            if link is not None:
                other, their = link
                return other.origin((*their, *path[len(probe) :]))
            probe = probe[:-1]
        return self.file, tuple(path)

    def file_for(self, path: Path) -> str:
        """The file ``path`` was read from."""
        return self.origin(path)[0]

    def graft(self, at: Path, other: Positions, their: Path) -> None:
        """Take ``other``'s positions of the part at ``their`` as those of ``at`` here
        (the part was copied there, e.g. an included file's task; ``other`` may be this
        document). Parts grafted below ``at`` later win over ``other``'s."""
        self.links[at] = (other, their)

    def problem(
        self, path: Path, message: str, *, hint: str | None = None, key: bool = False
    ) -> SpecProblem:
        file, (line, column) = self._find(path, key)
        _, shown = self.origin(path)
        return SpecProblem(
            file=file,
            line=line,
            column=column,
            where=format_path(shown),
            message=message,
            hint=hint,
        )


def format_path(path: Path) -> str:
    """``('tasks', 0, 'resources')`` → ``tasks[0].resources``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


class _Loader(yaml.SafeLoader):
    """SafeLoader whose scalars we construct one at a time."""

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:  # noqa: N803
        # PyYAML's scanner slows down quadratically with the depth of [ and {; stop early.
        if self.flow_level >= _MAX_DEPTH:
            raise yaml.scanner.ScannerError(
                None, None, f"[...] and {{...}} nested more than {_MAX_DEPTH} deep", self.get_mark()
            )
        super().fetch_flow_collection_start(TokenClass)


#: Deepest nesting of lists and mappings a document may have.
_MAX_DEPTH = 64


#: Most values (after expanding aliases) one document may hold; stops "billion laughs".
_MAX_VALUES = 1_000_000


#: libyaml's parser, when PyYAML was built with it: about 4x faster on large files.
_FAST_LOADER: Any = getattr(yaml, "CSafeLoader", None)


def load_yaml(text: str, file: str) -> tuple[Any, Positions]:
    """Parse ``text``; return plain data and the positions of everything in it.

    libyaml parses when it is there; a document it refuses, one with any problem, or one
    with characters PyYAML does not allow is parsed by the pure-Python loader, whose
    messages (and limits) are the ones users see.

    Raises
    ------
    SpecError
        For YAML syntax errors, non-string mapping keys and duplicate keys.
    """
    if _FAST_LOADER is not None and not yaml.reader.Reader.NON_PRINTABLE.search(text):
        try:
            return _load(text, file, _FAST_LOADER)
        except Exception:  # noqa: BLE001 - any refusal is explained by the slow path below
            log.debug("libyaml could not load %s; using the pure-Python loader", file)
    return _load(text, file, _Loader)


def _load(text: str, file: str, loader_class: Any) -> tuple[Any, Positions]:
    positions = Positions(file)
    try:
        loader = loader_class(text)
    except yaml.reader.ReaderError as exc:
        # A control character (or a lone surrogate) anywhere in the text.
        index = max(0, min(exc.position, len(text)))
        bad_line = text.count("\n", 0, index) + 1
        bad_col = index - (text.rfind("\n", 0, index) + 1) + 1
        code = exc.character if isinstance(exc.character, int) else None
        raise SpecError(
            [
                SpecProblem(
                    file=file,
                    line=bad_line,
                    column=bad_col,
                    where="",
                    message=f"character U+{code:04X} is not allowed in a YAML file"
                    if code is not None
                    else f"cannot read YAML: {exc.reason}",
                    hint="remove it, or write it as an escape inside double quotes"
                    f' ("\\x{code:02x}")'
                    if code is not None and code < 256
                    else "remove it",
                )
            ]
        ) from None
    try:
        try:
            root = loader.get_single_node()
        except RecursionError:
            raise SpecError(
                [SpecProblem(file, None, None, "", "document nested too deeply")]
            ) from None
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark else None
            col = mark.column + 1 if mark else None
            problem = exc.problem or str(exc)
            hint = None
            near = (mark.buffer or "")[max(0, mark.index - 40) : mark.index + 1] if mark else ""
            if "{" in near and "nested" not in problem:
                hint = (
                    "quote values that contain {placeholders} inside [...] or {...}, "
                    'e.g. ["out_{i}.txt"]'
                )
            raise SpecError(
                [
                    SpecProblem(
                        file=file,
                        line=line,
                        column=col,
                        where="",
                        message=f"YAML syntax error: {problem}",
                        hint=hint,
                    )
                ]
            ) from None
        except yaml.YAMLError as exc:
            raise SpecError(
                [SpecProblem(file, None, None, "", f"cannot read YAML: {exc}")]
            ) from None
        if root is None:
            return None, positions
        converter = _Converter(loader, positions, budget=_MAX_VALUES)
        data = converter.convert(root, (), depth=0)
        if converter.problems:
            raise SpecError(converter.problems)
        return data, positions
    finally:
        loader.dispose()


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


@dataclass
class _Converter:
    """One document's nodes into plain data, each value's and key's position noted in
    ``positions``; what cannot be read becomes a problem in ``problems`` (and None),
    so that one load reports them all."""

    loader: Any
    positions: Positions
    #: How many more values may be made (aliases expanded) before the document is
    #: refused as too large.
    budget: int
    problems: list[SpecProblem] = field(default_factory=list)

    def convert(self, node: yaml.Node, path: Path, depth: int) -> Any:
        """The data of ``node``, found at ``path``, ``depth`` levels down."""
        if not self._within_limits(node, path, depth):
            return None
        self.positions.values[path] = _mark(node)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            return [self.convert(item, (*path, i), depth + 1) for i, item in enumerate(node.value)]
        return self._scalar(node, path)

    def _within_limits(self, node: yaml.Node, path: Path, depth: int) -> bool:
        """Whether ``node`` is within the depth and size limits (one more value counted);
        a problem noted the first time it is not."""
        if depth > _MAX_DEPTH:
            self.problems.append(
                self.positions.problem(
                    path, f"document nested too deeply (over {_MAX_DEPTH} levels)"
                )
            )
            return False
        self.budget -= 1
        if self.budget >= 0:
            return True
        if self.budget == -1:
            self._problem(
                node,
                path,
                message=f"document too large (over {_MAX_VALUES:,} values once aliases are"
                " expanded)",
                hint="avoid repeating large anchors (*alias) inside each other",
            )
        return False

    def _mapping(self, node: yaml.MappingNode, path: Path, depth: int) -> dict[str, Any]:
        """A mapping's keys as written, each key's position noted; keys that are not
        plain text, merge keys and duplicates are problems."""
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                self._problem(key_node, path, message="keys must be plain text")
                continue
            if key_node.tag == "tag:yaml.org,2002:merge":
                self._problem(
                    key_node,
                    path,
                    message="YAML merge keys ('<<') are not supported",
                    hint="write the keys out, or use 'defaults:'",
                )
                continue
            # The key as written: `ON:` or `1.0:` stay "ON" and "1.0" (not True and 1.0).
            key = str(key_node.value)
            child = (*path, key)
            if key in result:
                self._problem(
                    key_node,
                    child,
                    message=f"duplicate key {key!r}",
                    hint=f"first defined on line {self.positions.keys[child][0]}",
                )
                continue
            self.positions.keys[child] = _mark(key_node)
            result[key] = self.convert(value_node, child, depth + 1)
        return result

    def _scalar(self, node: yaml.Node, path: Path) -> Any:
        """A scalar as its tag reads it; an unknown tag's text as it is."""
        try:
            return self.loader.construct_object(node, deep=True)
        except yaml.YAMLError:
            # An unknown tag such as `!foo bar`: keep the text.
            return node.value
        except Exception:  # noqa: BLE001 - PyYAML's constructors raise ValueError, KeyError...
            # A standard tag on text it cannot read, e.g. `!!int abc` or `!!timestamp x`.
            tag = str(node.tag).replace("tag:yaml.org,2002:", "!!")
            self._problem(
                node,
                path,
                message=f"cannot read {node.value!r} as {tag}",
                hint="remove the tag, or quote the value to keep it as text",
            )
            return None

    def _problem(
        self, node: yaml.Node, path: Path, *, message: str, hint: str | None = None
    ) -> None:
        """Note a problem at ``node``'s position, about ``path``."""
        line, col = _mark(node)
        self.problems.append(
            SpecProblem(
                file=self.positions.file,
                line=line,
                column=col,
                where=format_path(path),
                message=message,
                hint=hint,
            )
        )
