"""Where each ``{name}`` placeholder of a ``command:`` sits in bash's quoting, and how a
value is written there so that bash reads back exactly its bytes and never code.

A value is data. :func:`classify` reads a command template the way bash reads it,
far enough to tell each placeholder's context:

* **unquoted** (also in ``$(…)``, ``(…)``, ``<(…)``, a comment, a case word or
  pattern): one word per value (a list: one per item), bare when it is only letters,
  digits and ``_@%+=:./-``, else single-quoted with a newline as ``$'\\n'``, so the
  rendered text holds no newline a comment could end at;
* **unquoted in [[ … ]]**: always quoted, so never a pattern or a regular expression;
* **inside "…"** (also ``"$(… "…" …)"`` nesting): ``\\``, ``$``, `````, ``"`` are
  backslash-escaped;
* **inside '…'**: each ``'`` becomes ``'\\''``;
* **inside $'…'**: the quote is closed, the value written as an unquoted word, reopened.

Where no quoting is safe, the placeholder is **refused** (:class:`Refusal`, reported by
``hpcflow validate`` and ``run`` at the command's file:line): in backticks, ``$((…))``,
``((…))``, ``$[…]``, ``${…}``, an array subscript (``a[{i}]=…``, ``a=([{i}]=…)``: bash
evaluates it as arithmetic), a here-document's body, right after
``\\``, ``$`` or ``~``, inside a ``[[ … ]]`` that compares numbers or tests ``-v``/``-R``
(bash evaluates those operands as arithmetic, which runs ``$(…)`` in array subscripts),
and anywhere after text this lexer cannot follow (quotes inside ``${…}``, a ``case`` in
``$(…)``, …). A value holding a NUL byte cannot be a shell word: :class:`UnsafeValue`.

Not covered, by nature: a command that itself runs its arguments as code (``eval``,
``bash -c``, ``let``, ``declare -i``, ``test -v``, ``source``, ``ssh``…).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum

from hpcflow.errors import HpcflowError
from hpcflow.spec.placeholders import Template, value_text

#: Stands for a placeholder while the lexer reads the command (a NUL is never in one).
MARK = "\0"


class Context(Enum):
    """How bash reads the text at a placeholder."""

    UNQUOTED = "unquoted"
    #: Unquoted inside [[ … ]], where a bare word may be a pattern: always quoted.
    WORD = "word"
    DOUBLE = "double"
    SINGLE = "single"
    ANSI = "ansi"


@dataclass(frozen=True, slots=True)
class Refusal:
    """A placeholder bash would read as code whatever its quoting: why, and what to do."""

    name: str
    reason: str
    hint: str = "use an unquoted placeholder (bash gets the value as one word) or 'argv:'"


class UnsafeValue(HpcflowError):
    """A value no shell word can carry (a NUL byte). Validation refuses the values it
    knows; one read later (a sweep over a task's files) is refused at rendering."""


_ARITH_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-v", "-R"})
_WORD_END = " \t\n;&|()<>"
_NAME_SUBSCRIPT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\[")
_COMPOUND = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=\(")


class _Lost(Exception):
    """The lexer cannot tell how bash reads what follows."""


class _Lexer:
    """One pass over a command with :data:`MARK` for each placeholder."""

    def __init__(self, text: str, names: tuple[str, ...]) -> None:
        self.text = text
        self.names = names
        self.i = 0
        self.k = 0  # placeholders seen
        self.found: list[Context | Refusal] = []
        #: (delimiter, <<- strips tabs, unquoted: a backslash joins lines) of the
        #: here-documents whose bodies start at the next newline
        self.heredocs: list[tuple[str, bool, bool]] = []
        self.escaped = -1  # where the last backslash-escaped character is

    def escape(self) -> None:
        """At a backslash: skip it and the character it escapes (a placeholder's mark
        stays, to be refused)."""
        self.escaped = self.i + 1
        self.i += 1 if self.peek(1) == MARK else 2

    # -- placeholders ----------------------------------------------------------------
    def mark(self, context: Context | str) -> None:
        """Record the placeholder at ``self.i`` (``context``: a refusal's reason)."""
        name = self.names[self.k]
        self.k += 1
        before = self.text[self.i - 1] if self.i else ""
        if isinstance(context, str):
            self.found.append(Refusal(name, context))
        elif self.escaped == self.i:
            self.found.append(Refusal(name, "it follows a backslash, which would escape it"))
        elif before == "$" and context in (Context.UNQUOTED, Context.DOUBLE):
            self.found.append(Refusal(name, "it follows '$', which would make it an expansion"))
        elif before == "~" and context is Context.UNQUOTED:
            self.found.append(Refusal(name, "it follows '~', which would make it a home folder"))
        else:
            self.found.append(context)
        self.i += 1

    def refuse_rest(self, reason: str) -> None:
        for name in self.names[self.k :]:
            self.found.append(Refusal(name, reason))
        self.k = len(self.names)

    # -- reading ---------------------------------------------------------------------
    def peek(self, n: int = 0) -> str:
        j = self.i + n
        return self.text[j] if j < len(self.text) else ""

    def startswith(self, s: str) -> bool:
        return self.text.startswith(s, self.i)

    def run(self) -> list[Context | Refusal]:
        try:
            self.command(until="")
            if self.heredocs:
                raise _Lost
        except _Lost:
            self.refuse_rest("hpcflow cannot tell how bash reads the command from here")
        return self.found

    def command(self, until: str, in_subst: bool = False, compound: bool = False) -> None:
        """Unquoted text up to ``until`` (")" or "]]"; "": the end), nested constructs
        read recursively. ``in_subst``: inside $(…), where a ``case`` would misplace
        the closing ")". ``compound``: inside ``name=(…)``, where a word that starts with
        ``[`` is an index up to its ``]``, spaces and all (arithmetic)."""
        word_start = True
        text = self.text
        first_in_brackets = len(self.found)
        brackets_arith = False
        while self.i < len(text):
            c = text[self.i]
            if c == MARK:
                self.mark(Context.WORD if until == "]]" else Context.UNQUOTED)
                word_start = False
                continue
            if word_start and until == "]]" and self.startswith("]]"):
                self.i += 2
                if brackets_arith:
                    self.refuse_arithmetic_brackets(first_in_brackets)
                return
            if c == ")" and until == ")":
                self.i += 1
                return
            if word_start:
                word = self.word_ahead()
                if until == "]]" and word in _ARITH_TESTS:
                    brackets_arith = True
                started = self.word_construct(word, in_subst, compound)
                if started is not None:
                    word_start = started
                    continue
            word_start = self.unquoted_step(c, in_subst)
        if until:
            raise _Lost

    def word_ahead(self) -> str:
        """The unquoted word that starts at ``self.i``, up to a word's end or a mark."""
        text = self.text
        end = self.i
        while end < len(text) and text[end] not in _WORD_END and text[end] != MARK:
            end += 1
        return text[self.i : end]

    def word_construct(self, word: str, in_subst: bool, compound: bool) -> bool | None:
        """At the start of ``word``: read the construct it starts, if any (a comment, an
        index or compound value of an assignment, ``[[ … ]]``, ``((…))``). Returns
        whether a word starts after what was read; None where ``word`` starts none."""
        text = self.text
        c = text[self.i]
        if c == "#":
            self.comment()
            return True
        if compound and c == "[":
            self.i += 1
            self.subscript()
            return False
        m = _COMPOUND.match(text, self.i)
        if m:
            self.i = m.end()
            self.command(until=")", in_subst=in_subst, compound=True)
            return False
        if word == "case" and in_subst:
            raise _Lost
        end = self.i + len(word)
        if word == "[[" and (end >= len(text) or text[end] in " \t\n"):
            self.i = end
            self.command(until="]]", in_subst=in_subst)
            return False
        if self.startswith("(("):
            self.i += 2
            self.arith("))")
            return False
        m = _NAME_SUBSCRIPT.match(text, self.i)
        if m or (c == "[" and self.peek(1) not in ("", " ", "\t", "\n", "[")):
            # a[i]=… or, in a compound assignment a=([i]=…), an arithmetic index
            self.i = m.end() if m else self.i + 1
            self.subscript()
            return False
        return None

    def unquoted_step(self, c: str, in_subst: bool) -> bool:
        """Read the character ``c`` at ``self.i`` of unquoted text, or the quoted text,
        expansion, subshell or here-document it starts. Returns whether a word starts
        after it."""
        if c == "\\":
            self.escape()
            return False
        if c in "'\"`":
            self.i += 1
            {"'": self.single, '"': self.double, "`": self.backticks}[c]()
            return False
        if c == "$":
            self.dollar()
            return False
        if c == "(":
            self.i += 1
            self.command(until=")", in_subst=in_subst)
            return True
        if c == ")":
            self.i += 1  # a case pattern's end
            return True
        if c == "<" and self.startswith("<<") and not self.startswith("<<<"):
            self.heredoc_start()
            return True
        if c == "\n":
            self.i += 1
            if self.heredocs:
                self.heredoc_bodies()
            return True
        self.i += 1
        return c in _WORD_END

    def refuse_arithmetic_brackets(self, first: int) -> None:
        """Refuse the placeholders from the ``first``-th on, read inside a ``[[ … ]]``
        that turned out to compare numbers or test ``-v``/``-R``."""
        for j in range(first, len(self.found)):
            if isinstance(self.found[j], Context):
                self.found[j] = Refusal(
                    self.names[j],
                    "it is inside a [[ … ]] that compares numbers or tests -v, "
                    "where bash evaluates it as arithmetic",
                    hint="compare with [ … ] or test, or pass it through 'env:'",
                )

    def comment(self) -> None:
        text = self.text
        while self.i < len(text) and text[self.i] != "\n":
            if text[self.i] == MARK:
                self.mark(Context.UNQUOTED)  # rendered without a newline: stays a comment
            else:
                self.i += 1

    def single(self, context: Context = Context.SINGLE) -> None:
        """Inside '…' (or $'…', ``Context.ANSI``, where a backslash escapes), up to its
        closing quote."""
        text = self.text
        backslashes = context is Context.ANSI
        while self.i < len(text):
            c = text[self.i]
            if c == "\\" and backslashes:
                self.escape()
            elif c == "'":
                self.i += 1
                return
            elif c == MARK:
                self.mark(context)
            else:
                self.i += 1
        raise _Lost

    def double(self) -> None:
        text = self.text
        while self.i < len(text):
            c = text[self.i]
            if c == '"':
                self.i += 1
                return
            if c == MARK:
                self.mark(Context.DOUBLE)
            elif c == "\\":
                self.escape()
            elif c == "`":
                self.i += 1
                self.backticks()
            elif c == "$":
                self.dollar(quoted=True)
            else:
                self.i += 1
        raise _Lost

    def dollar(self, quoted: bool = False) -> None:
        """At a ``$``: what it starts."""
        if self.startswith("$(("):
            self.i += 3
            self.arith("))")
        elif self.startswith("$("):
            self.i += 2
            self.command(until=")", in_subst=True)
        elif self.startswith("$["):
            self.i += 2
            self.arith("]")
        elif self.startswith("${"):
            self.i += 2
            self.parameter()
        elif self.startswith("$'") and not quoted:
            self.i += 2
            self.single(Context.ANSI)
        elif self.startswith('$"') and not quoted:
            self.i += 2
            self.double()
        else:
            self.i += 1

    def opaque(self, close: str, reason: str, opens: str = "") -> None:
        """Text up to ``close`` where every placeholder is refused; quotes and nested
        expansions in it are more than this lexer follows."""
        text = self.text
        depth = 0
        while self.i < len(text):
            if depth == 0 and self.startswith(close):
                self.i += len(close)
                return
            c = text[self.i]
            if c == MARK:
                self.mark(reason)
                continue
            if c in "'\"`" or (c == "$" and self.peek(1) in "({['\""):
                raise _Lost
            if c == "\\":
                self.escape()
                continue
            if opens and c == opens:
                depth += 1
            elif opens and c == close[0] and depth:
                depth -= 1
            self.i += 1
        raise _Lost

    def arith(self, close: str) -> None:
        self.opaque(
            close,
            "it is inside an arithmetic expression, where bash runs $(…) in array subscripts",
            opens="(" if close == "))" else "[",
        )

    def parameter(self) -> None:
        self.opaque("}", "it is inside ${…}, whose quoting rules differ", opens="{")

    def subscript(self) -> None:
        self.opaque("]", "it is in an array subscript, which bash evaluates as arithmetic", "[")

    def backticks(self) -> None:
        text = self.text
        while self.i < len(text):
            c = text[self.i]
            if c == "`":
                self.i += 1
                return
            if c == MARK:
                self.mark("it is inside backticks, where quoting is read twice")
                continue
            if c in "'\"":
                raise _Lost
            if c == "\\":
                self.escape()
            else:
                self.i += 1
        raise _Lost

    def heredoc_start(self) -> None:
        """At ``<<``: note the here-document's delimiter (its body follows the line)."""
        self.i += 2
        strip_tabs = self.peek() == "-"
        if strip_tabs:
            self.i += 1
        while self.peek() in (" ", "\t"):
            self.i += 1
        start = self.i
        text = self.text
        while self.i < len(text) and text[self.i] not in _WORD_END:
            if text[self.i] in "$`\\" + MARK:
                raise _Lost
            self.i += 1
        word = text[start : self.i]
        delimiter = word.replace("'", "").replace('"', "")
        if not delimiter or word.count("'") % 2 or word.count('"') % 2:
            raise _Lost
        self.heredocs.append((delimiter, strip_tabs, delimiter == word))

    def heredoc_bodies(self) -> None:
        """The bodies of the here-documents noted on the line that just ended."""
        text = self.text
        for delimiter, strip_tabs, continues in self.heredocs:
            while True:
                if self.i >= len(text):
                    raise _Lost
                end = text.find("\n", self.i)
                end = len(text) if end < 0 else end
                line = text[self.i : end]
                for _ in range(line.count(MARK)):
                    self.found.append(
                        Refusal(
                            self.names[self.k],
                            "it is inside a here-document, whose body can end early or be code",
                            hint="pass it through 'env:' and use the variable in the "
                            "here-document, or use an unquoted placeholder",
                        )
                    )
                    self.k += 1
                self.i = end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
                if continues and line.endswith("\\"):
                    raise _Lost  # (unquoted delimiter: the next line joins this one)
        self.heredocs = []


def classify(template: Template) -> list[Context | Refusal]:
    """Each placeholder's context in ``template`` (a command), or why it is refused."""
    if template.is_constant:
        return []
    text = MARK.join(template.parts[0::2])
    if MARK in "".join(template.parts[0::2]):
        return [Refusal(n, "the command holds a NUL byte") for n in template.names]
    return _Lexer(text, template.names).run()


def refusals(command: str) -> list[Refusal]:
    """The placeholders of ``command`` that cannot be quoted safely."""
    return [c for c in classify(Template.parse(command)) if isinstance(c, Refusal)]


# -- rendering -------------------------------------------------------------------------

_BARE = re.compile(r"[A-Za-z0-9_@%+=:./-]+")
_bare = _BARE.fullmatch


def _text(value: object) -> str:
    text = value if type(value) is str else value_text(value)
    if MARK in text:  # type: ignore[operator]
        raise UnsafeValue(
            f"a value holds a NUL byte, which no command can receive: {text!r}",
            hint="remove the NUL byte from the value",
        )
    return text  # type: ignore[return-value]


def _quoted(text: str) -> str:
    """``text`` (no NUL) single-quoted, with a newline as ``$'\\n'``: one word, no
    newline in it."""
    quoted = "'" + text.replace("'", "'\\''") + "'"
    if "\n" in text:
        quoted = quoted.replace("\n", "'$'\\n''")
    return quoted


def _word(text: str) -> str:
    """``text`` (no NUL) as one unquoted shell word with no newline in it."""
    return text if _bare(text) else _quoted(text)


def quote_unquoted(value: object) -> str:
    """Words for an unquoted placeholder (a list: one word per item)."""
    kind = type(value)
    if kind is str:
        if _bare(value):  # type: ignore[call-overload]
            return value  # type: ignore[return-value]
        return _quoted(_text(value))
    if kind is int:
        return str(value)
    if isinstance(value, list | tuple):
        return " ".join(_word(_text(v)) for v in value)
    return _word(_text(value))


def quote_word(value: object) -> str:
    """One quoted word, even where a bare one would do (a pattern's place)."""
    return _quoted(_text(value))


_DOUBLE_SPECIAL = re.compile(r'([\\$`"])')
_double_special = _DOUBLE_SPECIAL.search


def quote_double(value: object) -> str:
    """The value's bytes inside "…"."""
    text = _text(value)
    return _DOUBLE_SPECIAL.sub(r"\\\1", text) if _double_special(text) else text


def quote_single(value: object) -> str:
    """The value's bytes inside '…'."""
    return _text(value).replace("'", "'\\''")


def quote_ansi(value: object) -> str:
    """The value's bytes inside $'…': the quote closed, one word, reopened."""
    return "'" + _word(_text(value)) + "$'"


_QUOTERS: dict[Context, Callable[[object], str]] = {
    Context.UNQUOTED: quote_unquoted,
    Context.WORD: quote_word,
    Context.DOUBLE: quote_double,
    Context.SINGLE: quote_single,
    Context.ANSI: quote_ansi,
}


class UnsafeCommand(HpcflowError):
    """A command with a placeholder no quoting makes safe (validation refuses these)."""


@dataclass(frozen=True, slots=True)
class ShellTemplate:
    """A command template with each placeholder's quoting decided once."""

    parts: tuple[str, ...]
    quoters: tuple[Callable[[object], str], ...]

    @classmethod
    def parse(cls, command: str) -> ShellTemplate:
        template = Template.parse(command)
        contexts = classify(template)
        bad = [c for c in contexts if isinstance(c, Refusal)]
        if bad:
            raise UnsafeCommand(f"placeholder {{{bad[0].name}}}: {bad[0].reason}", hint=bad[0].hint)
        return cls(template.parts, tuple(_QUOTERS[c] for c in contexts))  # type: ignore[index]

    @property
    def names(self) -> tuple[str, ...]:
        return self.parts[1::2]

    def render(self, values: Mapping[str, object]) -> str:
        parts = self.parts
        if len(parts) == 1:
            return parts[0]
        if len(parts) == 3:  # one placeholder: the common case, rendered per instance
            return parts[0] + self.quoters[0](values[parts[1]]) + parts[2]
        out = list(parts)
        for k, i in enumerate(range(1, len(parts), 2)):
            out[i] = self.quoters[k](values[parts[i]])
        return "".join(out)
