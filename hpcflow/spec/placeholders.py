"""``{name}`` placeholders in commands, argv and paths.

Rules, chosen so that ordinary shell text keeps working:

* ``{name}`` (a Python identifier in braces) is a placeholder;
* ``${...}`` is left alone, so ``${HOME}`` still reaches bash;
* ``{{name}}`` is the literal text ``{name}``;
* anything else in braces (``awk '{print $1}'``, ``{a,b}``) is literal text.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass

_TOKEN = re.compile(r"\{\{([A-Za-z_]\w*)\}\}|\$\{|\{([A-Za-z_]\w*)\}")

#: Placeholders every command may use besides the task's parameters.
BUILTINS = frozenset({"inputs", "outputs"})


@dataclass(frozen=True, slots=True)
class Template:
    """A string split into literal text and placeholder names (odd positions)."""

    parts: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> Template:
        parts: list[str] = []
        literal: list[str] = []
        pos = 0
        for match in _TOKEN.finditer(text):
            literal.append(text[pos : match.start()])
            escaped, name = match.group(1), match.group(2)
            if escaped is not None:
                literal.append("{" + escaped + "}")
            elif name is None:
                literal.append("${")
            else:
                parts.append("".join(literal))
                parts.append(name)
                literal = []
            pos = match.end()
        literal.append(text[pos:])
        parts.append("".join(literal))
        return cls(tuple(parts))

    @property
    def names(self) -> tuple[str, ...]:
        """The placeholder names, in order of appearance."""
        return self.parts[1::2]

    @property
    def is_constant(self) -> bool:
        return len(self.parts) == 1

    def render(self, values: Mapping[str, object], quote: Callable[[object], str] = str) -> str:
        """Substitute ``values``; ``quote`` turns each value into text (e.g. shell quoting)."""
        parts = self.parts
        if len(parts) == 1:
            return parts[0]
        if len(parts) == 3:  # one placeholder: the common case, rendered per instance
            return parts[0] + quote(values[parts[1]]) + parts[2]
        out = list(parts)
        for i in range(1, len(parts), 2):
            out[i] = quote(values[parts[i]])
        return "".join(out)


def value_text(value: object) -> str:
    """The text form of a parameter value (``True`` → ``true``, lists space-joined)."""
    kind = type(value)
    if kind is str:
        return value  # type: ignore[return-value]
    if kind is int:
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return " ".join(value_text(v) for v in value)
    return str(value)


def shell_quote(value: object) -> str:
    """Quote a value for unquoted bash text; lists become several quoted words. Safe only
    there: a ``command:`` quotes each placeholder for its own quoting context instead
    (:mod:`hpcflow.spec.shell_context`)."""
    if type(value) is int:
        return str(value)  # digits and a minus sign: what shlex.quote leaves as it is
    if isinstance(value, list | tuple):
        return " ".join(shlex.quote(value_text(v)) for v in value)
    return shlex.quote(value_text(value))
