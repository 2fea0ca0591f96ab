"""Property: a workflow value never becomes shell syntax, in any quoting context.

Hostile values (quotes, backslashes, ``$(…)``, backticks, newlines, a here-document's
delimiter, arithmetic subscripts, …) × commands that use a placeholder in each of bash's
quoting contexts. Each case is rendered by hpcflow's own code
(:class:`hpcflow.spec.shell_context.ShellTemplate`, the one ``run`` uses) and run by a
real ``bash`` the way hpcflow's shared shells run tasks (the script lines of
:func:`hpcflow.worker.shells.task_lines`: ``eval`` in a job-control subshell in the
task's folder); every 37th also as a ``bash -c`` of its own (execute.py's way); each
value also goes through a task's ``env:``. Every case either writes exactly the value's
bytes (``printf %s`` into a file, compared byte for byte) or is refused before anything
runs (by validation, or a NUL byte at rendering), and no case creates its canary file.
Deterministic (``derandomize``); a failure names the command, value and rendered text.
Over 10,000 cases run, in one bash process per batch of ~160.

A second property covers commands no one wrote by hand: a placeholder wrapped in random
nestings of bash's forms (quotes, substitutions, arithmetic, ``[[ ]]``, ``case``,
here-documents, comments, subscripts…), and random strings of syntax pieces. For every
command validation accepts, no attack value used in it runs a command (~9,000 runs).
"""

from __future__ import annotations

import os
import secrets
import subprocess
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from hpcflow.spec.placeholders import Template, value_text
from hpcflow.spec.shell_context import ShellTemplate, UnsafeValue, refusals
from hpcflow.worker.calls import TaskCall
from hpcflow.worker.shells import task_lines

#: (command, expected file content from the value ``v`` or None when refused).
#: Each command writes to ``out`` in its task's folder.
CONTEXTS: list[tuple[str, object]] = [
    ("printf %s {v} > out", lambda v: v),
    ('printf %s "x {v} y" > out', lambda v: f"x {v} y"),
    ("printf %s 'x {v} y' > out", lambda v: f"x {v} y"),
    ("printf %s $'x {v} y' > out", lambda v: f"x {v} y"),
    ("printf %s a{v}b > out", lambda v: f"a{v}b"),
    ('printf %s "$(printf %s. {v})" > out', lambda v: f"{v}."),
    ('printf %s "$(printf %s. "{v}")" > out', lambda v: f"{v}."),
    ("printf %s \"$(printf %s. '{v}')\" > out", lambda v: f"{v}."),
    ("printf %s \"$(printf %s. $'{v}')\" > out", lambda v: f"{v}."),
    ("printf %s $(printf %s {v} | od -An -tx1 | tr -d ' \\n') > hex", None),  # see below
    ('x={v}; printf %s "$x" > out', lambda v: v),
    ('export x="{v}"; printf %s "$x" > out', lambda v: v),
    ("printf %s \"{v}\"'{v}'{v}$'{v}' > out", lambda v: v * 4),
    ("(printf %s {v}) > out", lambda v: v),
    ('f() { printf %s "$1" > out; }; f {v}', lambda v: v),
    ("[[ {v} == {v} ]] && printf %s ok > out", lambda v: "ok"),
    ('[[ -n "{v}" || -z {v} ]] && printf %s ok > out', lambda v: "ok"),
    ("[[ x{v} =~ ^x{v}$ ]] && printf %s ok > out", lambda v: "ok"),
    ("case {v} in {v}) printf %s {v} > out;; *) printf no > out;; esac", lambda v: v),
    ("# {v}\nprintf %s done > out", lambda v: "done"),
    ("printf %s {v} > out # {v}", lambda v: v),
    ('printf %s "${HOME:+}{v}" > out', lambda v: v),
    ("printf %s ${NOPE}{v} > out", lambda v: v),
    ('printf %s "a\\\\{v}" > out', lambda v: "a\\" + v),
    ("cat > /dev/null <<EOF\nhi\nEOF\nprintf %s {v} > out", lambda v: v),
    ("printf %s {v} > out; cat > /dev/null <<'EOF'\n$(x)\nEOF", lambda v: v),
    # Refused: no quoting makes these safe.
    ("cat > out <<EOF\n{v}\nEOF", None),
    ("cat > out <<'EOF'\n{v}\nEOF", None),
    ("cat > /dev/null <<EOF\n\tEOF\nprintf %s {v} > out\nEOF", None),  # still the body
    ("cat > /dev/null <<EOF\na\\\nEOF\nprintf %s {v} > out\nEOF", None),  # joined lines
    ("printf %s `printf %s {v}` > out", None),
    ("printf %s $(( {v} )) > out", None),
    ("(( x = {v} )); printf %s $x > out", None),
    ("printf %s ${x:-{v}} > out", None),
    ('printf %s "${x:-{v}}" > out', None),
    ("printf %s \\{v} > out", None),
    ('printf %s "\\{v}" > out', None),
    ("printf %s ~{v} > out", None),
    ('printf %s "$(case a in a) printf %s {v};; esac)" > out', None),
    ("[[ {v} -eq 1 ]]; printf %s {v} > out", None),
    ("a[{v}]=1; printf %s {v} > out", None),
    ("a=([{v}]=1); printf %s {v} > out", None),
    ("a=([ {v} ]=1); printf %s {v} > out", None),  # an index may hold spaces
    ('a=({v}); printf %s "${a[0]}" > out', lambda v: v),
    ('[[ -v "{v}" ]]; printf %s {v} > out', None),
    ('printf %s ${x:-"a"} {v} > out', None),
]
# The hex case: the value through a pipe and a command substitution, compared as hex.
_HEX = 9
CONTEXTS[_HEX] = (CONTEXTS[_HEX][0], lambda v: v.encode().hex())
_EXPECTED = dict(CONTEXTS)
PATH = os.environ.get("PATH", "/usr/bin:/bin")
#: The value in a task's ``env:`` (rendered as CallFactory.env does, exported by the
#: shared shell's script lines), read by the command as a variable.
ENV_COMMAND = 'printf %s "$V" > out'
#: Every how-many-th case also runs as ``bash -c`` of its own (execute.py's way).
_OWN_BASH_EVERY = 37

_PAYLOADS = [
    "'",
    '"',
    "\\",
    "$",
    "`",
    "\n",
    "\r",
    "\t",
    " ",
    "$(touch CANARY)",
    "`touch CANARY`",
    "'; touch CANARY; '",
    '"; touch CANARY; "',
    "'$(touch CANARY)'",
    "\ntouch CANARY\n",
    "\nEOF\ntouch CANARY\n",
    "EOF",
    "a[$(touch CANARY)]",
    "x[`touch CANARY`]",
    "${IFS}touch${IFS}CANARY",
    "$'\\x27'",
    "\\x27",
    "\\n",
    "!",
    "#",
    ";",
    "&",
    "|",
    "(",
    ")",
    "{",
    "}",
    ",",
    "*",
    "?",
    "[a]",
    "~",
    "~root",
    "-e",
    "%s",
    "=",
    "é",
    "🙂",
    "1",
    "--",
    "$HOME",
    "${HOME}",
    "\\\n",
    "esac",
    ";;",
    "]]",
    "))",
]

_values = st.lists(
    st.one_of(
        st.sampled_from(_PAYLOADS),
        st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=4),
    ),
    min_size=1,
    max_size=6,
).map("".join)
# One value in ten carries a NUL byte: no command can receive it, so it must be refused.
_value = st.tuples(_values, st.integers(0, 9)).map(lambda t: t[0] + "\0" * (t[1] == 0))

#: A failure is reported as found (its message names the case): shrinking would rerun
#: batches of bash for minutes.
_NO_SHRINKING = (Phase.explicit, Phase.reuse, Phase.generate)
#: Values per example: each is tried in every context.
_PER_EXAMPLE = 8
_EXAMPLES = 72


def test_refused_contexts_are_exactly_the_unsafe_ones() -> None:
    for command, expected in CONTEXTS:
        assert bool(refusals(command)) == (expected is None), command


def _call(k: int, command: str, folder: Path, env: dict[str, str] | None) -> TaskCall:
    return TaskCall(
        index=k, attempt=1, kind="shell", command=command, argv=None, python=None,
        kwargs=None, workdir=str(folder), env=env, timeout=None, inputs=(), outputs=(),
        stdout="", stderr="", result="", quarantine_dir="",
    )  # fmt: skip


#: (command template, value, rendered command, task environment)
Case = tuple[str, str, str, "dict[str, str] | None"]


def _run_batch(root: Path, cases: list[Case]) -> None:
    """Run each case in its own folder, as the shared shells do, in one bash process;
    every :data:`_OWN_BASH_EVERY`-th also as a ``bash -c`` of its own in a second folder."""
    lines = []
    for k, (_, _, rendered, env) in enumerate(cases):
        folder = root / str(k)
        folder.mkdir()
        lines.append(task_lines(k, _call(k, rendered, folder, env), "."))
        if k % _OWN_BASH_EVERY == 0:
            (root / f"own{k}").mkdir()
            subprocess.run(
                ["bash", "-c", rendered], cwd=root / f"own{k}", env={**(env or {}), "PATH": PATH},
                stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
            )  # fmt: skip
    script = root / "chunk.sh"
    script.write_text("".join(lines))
    boot = (
        "set -m\nexec {__hpcflow_s}>/dev/null {__hpcflow_e}>/dev/null {__hpcflow_c}</dev/null"
        f' >/dev/null 2>&1 </dev/null\n. "{script}"\n'
    )
    subprocess.run(["bash", "-c", boot], check=True, timeout=300)


def test_hostile_values_in_every_context_are_data(tmp_path: Path) -> None:
    ran: list[int] = []

    @settings(
        max_examples=_EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=_NO_SHRINKING,
        print_blob=True,
    )
    @given(st.lists(_value, min_size=_PER_EXAMPLE, max_size=_PER_EXAMPLE))
    def check(values: list[str]) -> None:
        root = tmp_path / secrets.token_hex(6)
        root.mkdir()
        cases: list[Case] = []
        for value in values:
            if "\0" not in value:  # (validation refuses a NUL in any value: test_hostile.py)
                env = {"V": Template.parse("{v}").render({"v": value}, value_text)}
                cases.append((ENV_COMMAND, value, ENV_COMMAND, env))
            for command, expected in CONTEXTS:
                if expected is None:
                    assert refusals(command), f"not refused: {command!r}"
                    continue
                try:
                    rendered = ShellTemplate.parse(command).render({"v": value})
                except UnsafeValue:
                    assert "\0" in value, f"refused {value!r} in {command!r}"
                    continue
                assert "\0" not in value, f"rendered a NUL: {value!r} in {command!r}"
                cases.append((command, value, rendered, None))
        _run_batch(root, cases)
        for k, (command, value, rendered, env) in enumerate(cases):
            where = f"command {command!r}, value {value!r}, rendered {rendered!r}, env {env!r}"
            expect = (lambda v: v) if command == ENV_COMMAND else _EXPECTED[command]
            expected = expect(value).encode()  # type: ignore[operator]
            name = "hex" if command == CONTEXTS[_HEX][0] else "out"
            folders = [root / str(k)] + ([root / f"own{k}"] if k % _OWN_BASH_EVERY == 0 else [])
            for folder in folders:
                assert not (folder / "CANARY").exists(), f"injected in {folder.name}: {where}"
                got = (folder / name).read_bytes() if (folder / name).exists() else None
                assert got == expected, f"wrong bytes {got!r} in {folder.name}: {where}"
        assert list(root.rglob("CANARY")) == []
        ran.append(len(cases))

    check()
    print(f"{sum(ran)} cases in {len(ran)} batches")
    assert sum(ran) >= 10_000, (len(ran), sum(ran))


#: Pieces of bash syntax that commands are made of, for commands no one wrote by hand.
_SYNTAX = [
    "{v}", "{v}", "{v}", " ", " ", "echo ", "printf %s ", "'", '"', "$'", "$(", ")", "(",
    "`", "$((", "))", "((", "${", "}", "${x:-", "#", "\n", "\\", "<<EOF\n", "<<'EOF'\n",
    "<<-EOF\n", "EOF\n", "\tEOF\n", ";", "|", "&&", "[[ ", " ]]", " -eq ", " == ", "case ",
    " in ", "x) ", ";; esac", "a=", "a[", "]", "~", "$", "x", "=", "<(", "> /dev/null ",
]  # fmt: skip
#: Values that run ``touch CANARY`` if they become syntax in some context. None starts
#: with a command's name: a command such as ``$(printf %s {v})`` runs its value's words
#: as a command by design (as ``eval`` would), which is not the value becoming syntax.
_ATTACKS = [
    "$(touch CANARY)",
    "`touch CANARY`",
    "'$(touch CANARY)'",
    '"$(touch CANARY)"',
    "a[$(touch CANARY)]",
    "\nx=1 touch CANARY\n",
    "'\ntouch CANARY\n'",
    "\nEOF\ntouch CANARY\nEOF\n",
    ")$(touch CANARY)(",
    "\"'\n touch CANARY #",
    "x' ; touch CANARY ; '",
    "\\'$(touch CANARY)\\'",
]
_junk = st.lists(st.sampled_from(_SYNTAX), min_size=1, max_size=14).map("".join)
#: Each form wraps a smaller command or word; forms nest.
_FORMS = [
    "'{}'", '"{}"', "$'{}'", "$({})", "`{}`", "$(( {} ))", "(( {} ))", "${{x:-{}}}",
    "[[ {} ]]", "[[ {} -eq 1 ]]", "[[ {} =~ ^x ]]", "case {0} in {0}) {0};; esac",
    "cat <<EOF\n{}\nEOF\n", "cat <<'EOF'\n{}\nEOF\n", "cat <<-EOF\n\t{}\n\tEOF\n",
    "# {}\n", "a[{}]=1", "a=([{}]=1)", "({})", "{0}; {0}", "{} | cat", "echo {}",
    "printf %s {}", "<({})", "\\{}", "a=({})", "x={}", "{0}{0}", "{0} {0}", "{0}\n{0}",
    "f() {{ {}; }}", "a=([ {} ]=1)", "x{}", "{}x", "~{}", "${{x}}{}", "$x{}", "{}'", "'{}",
    '"{}', '{}"',
]  # fmt: skip


@st.composite
def _structured(draw: st.DrawFn) -> str:
    """A placeholder wrapped in one to five forms, inside out."""
    text = "{v}"
    for form in draw(st.lists(st.sampled_from(_FORMS), min_size=1, max_size=5)):
        text = form.format(text)
    return text


_commands = st.one_of(_structured(), _structured(), _structured(), _junk)


def test_no_command_hpcflow_accepts_runs_a_value(tmp_path: Path) -> None:
    """Commands made of random pieces of bash syntax (mostly nonsense, some valid): for
    each that validation accepts, no attack value used in it ever runs a command — the
    lexer never thinks a placeholder is somewhere it is not."""
    ran: list[int] = []

    @settings(
        max_examples=40, derandomize=True, deadline=None, database=None,
        suppress_health_check=list(HealthCheck),
        phases=_NO_SHRINKING, print_blob=True,
    )  # fmt: skip
    @given(st.lists(_commands, min_size=40, max_size=40))
    def check(commands: list[str]) -> None:
        root = tmp_path / secrets.token_hex(6)
        root.mkdir()
        cases: list[Case] = []
        for command in commands:
            if "{v}" not in command or refusals(command):
                continue
            template = ShellTemplate.parse(command)
            cases += [(command, v, template.render({"v": v}), None) for v in _ATTACKS]
        _run_batch(root, cases)
        for k, (command, value, rendered, _) in enumerate(cases):
            where = f"command {command!r}, value {value!r}, rendered {rendered!r}"
            for folder in (root / str(k), root / f"own{k}"):
                assert not (folder / "CANARY").exists(), f"injected in {folder.name}: {where}"
        assert list(root.rglob("CANARY")) == []
        ran.append(len(cases))

    check()
    print(f"{sum(ran)} runs of accepted commands")
    assert sum(ran) >= 2_000, sum(ran)
