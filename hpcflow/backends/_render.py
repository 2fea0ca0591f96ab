"""Render batch scripts from the templates shipped inside each backend package.

One Jinja2 set-up for every backend: undefined variables are errors, nothing is
HTML-escaped (these are shell scripts), and exactly ONE quoting filter, ``sh``, is used
for every value that reaches a shell line. Scheduler directive lines (``#SBATCH``,
``#PBS``) are not shell: backends compute those values in Python, quoted the way their
scheduler parses them, and the template prints them as they are.

This module also validates the two kinds of raw text a profile may pass through:
extra directives and environment variable names, and makes the labels (run and task names
in comments, job names) that every template prints.
"""

from __future__ import annotations

import importlib.resources
import re
import shlex
from collections.abc import Mapping
from typing import Any

import jinja2

from hpcflow.errors import ProfileError

#: Folder, inside a backend's package, that holds its templates.
TEMPLATE_FOLDER = "templates"

#: One option per extra directive: ``--name``, ``--name=value`` or a short option with
#: its value attached (``-xVALUE``). Values hold no whitespace, quotes or backslashes,
#: so the scheduler's own directive parser cannot split or unquote them differently.
_EXTRA_DIRECTIVE = re.compile(r"--[A-Za-z][A-Za-z0-9_-]*(=[^\s\"'\\]+)?|-[A-Za-z]([^\s\"'\\]*)")

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UNSAFE_LABEL = re.compile(r"[^A-Za-z0-9_.-]+")

_CONTROL = ("\n", "\r", "\x00")


def sh(value: object) -> str:
    """Quote ``value`` (as ``str``) as one shell word: the only shell quoting in hpcflow."""
    return shlex.quote(str(value))


class Renderer:
    """Templates of one backend package, e.g. ``Renderer("hpcflow.backends.slurm")``.

    Templates are read with :mod:`importlib.resources` from
    ``<package>/templates/<name>``, so they work from a wheel or a zip as well as from a
    source tree. Building a renderer reads nothing; templates load on first use.
    """

    def __init__(self, package: str) -> None:
        self.package = package
        # autoescape is off on purpose: the output is a shell script, not HTML;
        # quoting is the explicit job of the ``sh`` filter.
        self._env = jinja2.Environment(
            loader=jinja2.FunctionLoader(self._load),
            undefined=jinja2.StrictUndefined,
            autoescape=False,  # noqa: S701 - shell output, quoted by the sh filter
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
        )
        self._env.filters["sh"] = sh

    def _load(self, name: str) -> str:
        resource = importlib.resources.files(self.package) / TEMPLATE_FOLDER / name
        try:
            return resource.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise jinja2.TemplateNotFound(f"{self.package}/{TEMPLATE_FOLDER}/{name}") from None

    def render(self, name: str, context: Mapping[str, Any]) -> str:
        """Render template ``name`` with ``context``; a missing variable raises."""
        return self._env.get_template(name).render(**context)


def label(text: str) -> str:
    """``text`` with every run of characters outside ``[A-Za-z0-9_.-]`` replaced by ``_``.

    Safe in a comment line and as a job name; never empty (``"hpcflow"`` stands in).
    """
    return _UNSAFE_LABEL.sub("_", text).strip("_") or "hpcflow"


def refuse_line_breaks(text: str, setting: str) -> None:
    """Raise ProfileError if the ``setting`` entry ``text`` would start another script line
    (it holds a newline, carriage return or NUL)."""
    if any(c in text for c in _CONTROL):
        raise ProfileError(
            f"{setting} entry {text!r} contains a line break or NUL character",
            hint=f"give each option as its own {setting} entry, on one line",
        )


def validate_extra_directive(text: str, *, setting: str = "extra_directives") -> str:
    """Return ``text`` if it is one scheduler option (``--foo`` or ``--foo=bar``).

    Raises
    ------
    ProfileError
        ``text`` holds a newline, carriage return or NUL (which would inject another
        script line), or is not a single option.
    """
    refuse_line_breaks(text, setting)
    if not _EXTRA_DIRECTIVE.fullmatch(text):
        raise ProfileError(
            f"{setting} entry {text!r} is not a single option like '--foo=bar'",
            hint=(
                "write one option per entry as --name=value, with no spaces, quotes or "
                "backslashes in the value; use the profile's typed settings (partition, "
                "account, qos, ...) where one exists"
            ),
        )
    return text


def validate_env_name(name: str) -> str:
    """Return ``name`` if it can be ``export``-ed (a shell identifier), else raise ProfileError."""
    if not _ENV_NAME.fullmatch(name):
        raise ProfileError(
            f"environment variable name {name!r} is not a valid shell identifier",
            hint="use letters, digits and underscores only, not starting with a digit",
        )
    return name
