"""Layered settings: a :class:`Profile` built from several sources, remembering which
source gave each value.

Layers, lowest first::

    built-in defaults < profile file < workflow defaults < environment < command line

Each layer holds values *as written* (``"4GB"``, ``"1h"``, ``"4"``): they are validated
once, after merging, so a memory of ``"4GB"`` is never read twice (a parsed number of
bytes read again would be taken as megabytes). A profile file is also validated on its
own, so a broken file is reported even when a higher layer hides the broken value.

Every error names its source: ``file:line:column`` for files, the variable for the
environment (``env HPCFLOW_NODES``), the flag for the command line.
"""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic
import yaml

from hpcflow.errors import ProfileError, SpecError, SpecProblem
from hpcflow.settings.lookup import ProfileRef, default_profile_name, find_profile
from hpcflow.settings.profile import CrossFieldError, Pool, Profile, field_kind
from hpcflow.spec.yamlpos import Path, Positions, format_path, load_yaml

logger = logging.getLogger(__name__)

BUILTIN_DEFAULT = "built-in default"
ENV_PREFIX = "HPCFLOW_"
#: Fields the environment and the command line may set (a profile's name is its file's).
SETTABLE_FIELDS: tuple[str, ...] = tuple(name for name in Profile.model_fields if name != "name")
#: Fields a workflow's ``defaults:`` may set. None yet: where a run goes belongs to the
#: profile; the layer exists so that adding one is a one-line change here.
WORKFLOW_FIELDS: frozenset[str] = frozenset()

#: A readable message for fields whose type is a union (pydantic reports each member).
_UNION_MESSAGES = {"workers_per_node": "expected a positive whole number or 'per-gpu'"}


@dataclass(frozen=True)
class Layer:
    """Settings from one source.

    ``values`` are as written (validated later, all layers together); ``sources`` says,
    per field, where its value came from. File layers carry ``positions`` (and the
    ``prefix`` of their settings inside the document) so errors can give file:line.
    """

    values: Mapping[str, Any]
    sources: Mapping[str, str]
    positions: Positions | None = None
    prefix: Path = ()


@dataclass(frozen=True)
class ResolvedProfile:
    """A validated profile, and for every field where its value came from."""

    profile: Profile
    sources: dict[str, str]
    ref: ProfileRef | None = None

    def source(self, name: str) -> str:
        """Where field ``name`` got its value (``"built-in default"`` if nowhere else)."""
        return self.sources.get(name, BUILTIN_DEFAULT)


def env_var(name: str) -> str:
    """The environment variable that sets field ``name``: ``nodes`` → ``HPCFLOW_NODES``."""
    return ENV_PREFIX + name.upper()


def resolve_profile(
    name_or_path: str | None = None,
    *,
    workflow: Layer | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    flags: Mapping[str, str] | None = None,
) -> ResolvedProfile:
    """The profile ``name_or_path`` (default ``$HPCFLOW_PROFILE`` or ``local``) with the
    workflow's defaults, the environment and command-line ``overrides`` on top.

    ``environ`` defaults to :data:`os.environ`; ``overrides`` and ``flags`` are as for
    :func:`override_layer`.

    Raises
    ------
    ProfileError
        Unknown profile, a broken profile file, or a bad value in any layer; the message
        names where each problem is.
    """
    env = os.environ if environ is None else environ
    ref = find_profile(name_or_path or default_profile_name(env), env)
    layers = [profile_layer(ref)]
    if workflow is not None:
        layers.append(workflow)
    layers.append(environment_layer(env))
    if overrides:
        layers.append(override_layer(overrides, flags))
    return merge_layers(layers, ref=ref)


def load_profile(ref: ProfileRef) -> Profile:
    """The profile file ``ref`` on its own (no environment, no overrides)."""
    return merge_layers([profile_layer(ref)], ref=ref).profile


def merge_layers(layers: Sequence[Layer], *, ref: ProfileRef | None = None) -> ResolvedProfile:
    """Later layers win, field by field; the result is validated once, as a whole."""
    values: dict[str, Any] = {}
    sources = {name: BUILTIN_DEFAULT for name in Profile.model_fields}
    origin: dict[str, Layer] = {}
    for layer in layers:
        for name, value in layer.values.items():
            values[name] = value
            sources[name] = layer.sources[name]
            origin[name] = layer
    try:
        profile = Profile.model_validate(values)
    except pydantic.ValidationError as exc:
        raise ProfileError(_render(_problems(exc, origin, sources))) from None
    return ResolvedProfile(profile, sources, ref)


# -- the layers --------------------------------------------------------------------------------


def profile_layer(ref: ProfileRef) -> Layer:
    """The settings of profile file ``ref``, checked on their own.

    Raises
    ------
    ProfileError
        YAML errors, unknown keys (with a "did you mean"), bad values; each with
        file:line:column.
    """
    text = ref.read_text()
    try:
        data, positions = load_yaml(text, ref.location)
    except SpecError as exc:
        raise ProfileError(str(exc)) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ProfileError(
            _render([positions.problem((), "a profile must be a mapping of settings")])
        )
    if "name" in data and data["name"] != ref.name:
        raise ProfileError(
            _render(
                [
                    positions.problem(
                        ("name",),
                        f"name {data['name']!r} differs from the file's name {ref.name!r}",
                        hint="a profile is called by its file name; remove 'name:' "
                        "or rename the file",
                    )
                ]
            )
        )
    values = {"name": ref.name, **data}
    sources = {"name": f"profile {ref.location} (file name)"}
    for key in data:
        line = positions.keys.get((key,), (None, None))[0]
        sources[key] = f"profile {ref.location}" + (f":{line}" if line is not None else "")
    layer = Layer(values, sources, positions)
    # On its own first: a broken file is reported even where a higher layer would hide it.
    merge_layers([layer], ref=ref)
    return layer


def environment_layer(environ: Mapping[str, str] | None = None) -> Layer:
    """``HPCFLOW_<FIELD>`` variables: ``HPCFLOW_PARTITION=debug``, ``HPCFLOW_NODES=4``.

    Values are text, read by the field's type (``"4"`` → 4, ``"no"`` → false, ``"2h"``
    → 7200 s). Lists are ``a,b,c`` or a YAML list ``["a, b", c]``; mappings are a YAML
    mapping ``{OMP_NUM_THREADS: "1"}``. An empty variable counts as unset.

    Raises
    ------
    ProfileError
        A value that cannot be read as its field's shape, naming the variable.
    """
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name in SETTABLE_FIELDS:
        var = env_var(name)
        text = env.get(var)
        if text is None or not text.strip():
            continue
        try:
            values[name] = parse_setting_text(name, text)
        except ValueError as exc:
            raise ProfileError(f"env {var}={text!r}: {exc}") from None
        sources[name] = f"env {var}"
    _warn_about_misspelt_variables(env)
    return Layer(values, sources)


def override_layer(overrides: Mapping[str, Any], flags: Mapping[str, str] | None = None) -> Layer:
    """Command-line settings: ``{"nodes": 4, "partition": "debug"}``.

    ``None`` values are skipped (an option that was not given). Text values of list and
    mapping fields are read as in :func:`environment_layer`; other values are validated
    with the rest. ``flags`` names the option each field came from (default
    ``--field-name``), for sources and errors.

    Raises
    ------
    ProfileError
        An unknown setting (with a "did you mean"), or text that is not a list/mapping.
    """
    flags = flags or {}
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, value in overrides.items():
        if value is None:
            continue
        flag = flags.get(name, "--" + name.replace("_", "-"))
        if name not in SETTABLE_FIELDS:
            raise ProfileError(f"command line {flag}: {_unknown_setting(name)}")
        if isinstance(value, str):
            try:
                value = parse_setting_text(name, value)
            except ValueError as exc:
                raise ProfileError(f"command line {flag}: {exc}") from None
        values[name] = value
        sources[name] = f"command line {flag}"
    return Layer(values, sources)


def workflow_layer(
    values: Mapping[str, Any],
    *,
    file: str,
    positions: Positions | None = None,
    prefix: Path = ("defaults",),
) -> Layer:
    """Settings from a workflow file's ``defaults:`` (at ``prefix`` in ``positions``).

    Only :data:`WORKFLOW_FIELDS` may be set there.

    Raises
    ------
    ProfileError
        A setting that does not belong in a workflow, at its file:line.
    """
    sources: dict[str, str] = {}
    for name in values:
        line = positions.keys.get((*prefix, name), (None, None))[0] if positions else None
        where = f"{file}:{line}" if line is not None else file
        if name not in WORKFLOW_FIELDS:
            message = (
                f"{name!r} is a profile setting and cannot be set in a workflow"
                if name in Profile.model_fields
                else _unknown_setting(name)
            )
            problem = (
                positions.problem((*prefix, name), message, key=True)
                if positions
                else SpecProblem(where, None, None, format_path((*prefix, name)), message)
            )
            raise ProfileError(
                _render([problem]),
                hint="set it in a profile, in HPCFLOW_* variables or on the command line",
            )
        sources[name] = f"workflow {where}"
    return Layer(dict(values), sources, positions, prefix)


def parse_setting_text(name: str, text: str) -> Any:
    """Field ``name``'s value from text (an environment variable or ``--set``).

    Lists: ``a,b`` or a YAML list; mappings: a YAML mapping; anything else is left as
    text for the field's own type to read (``"4"``, ``"true"``, ``"2h"``, ``"4GB"``).

    Raises
    ------
    ValueError
        Text that is not a list or mapping where one is needed.
    """
    kind = field_kind(name)
    stripped = text.strip()
    if kind == "list":
        if stripped.startswith("["):
            items = _yaml_flow(stripped, "a list such as [a, b]")
            if not isinstance(items, list):
                raise ValueError("expected a list such as [a, b] or a,b")
            return [_scalar_text(item) for item in items]
        return [part.strip() for part in text.split(",") if part.strip()]
    if kind == "dict":
        mapping = _yaml_flow(stripped, "a mapping such as {NAME: value}")
        if not isinstance(mapping, dict):
            raise ValueError("expected a mapping such as {NAME: value}")
        return {str(key): _scalar_text(value) for key, value in mapping.items()}
    return text


def _yaml_flow(text: str, expected: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        reason = getattr(exc, "problem", None) or str(exc)
        raise ValueError(f"expected {expected} (YAML): {reason}") from None


def _scalar_text(value: Any) -> Any:
    # `[12, openmpi]` from YAML holds the number 12; a module or directive is text.
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


def _unknown_setting(name: str) -> str:
    close = difflib.get_close_matches(name, SETTABLE_FIELDS, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}?" if close else "`hpcflow profiles show` lists them"
    return f"unknown setting {name!r}; {hint}"


def _warn_about_misspelt_variables(env: Mapping[str, str]) -> None:
    known = {env_var(name) for name in SETTABLE_FIELDS}
    for var in env:
        if var.startswith(ENV_PREFIX) and var not in known:
            close = difflib.get_close_matches(var, sorted(known), n=1, cutoff=0.85)
            if close:
                logger.warning("ignoring %s: not a setting; did you mean %s?", var, close[0])


# -- pydantic errors → messages that say where -----------------------------------------------


def _problems(
    exc: pydantic.ValidationError, origin: Mapping[str, Layer], sources: Mapping[str, str]
) -> list[SpecProblem]:
    problems: list[SpecProblem] = []
    seen: set[tuple[Any, ...]] = set()
    for error in exc.errors():
        loc = tuple(error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        if not loc:
            cause = (error.get("ctx") or {}).get("error")
            fields = cause.fields if isinstance(cause, CrossFieldError) else ()
            hint = "; ".join(f"{name} from {sources[name]}" for name in fields) or None
            # Point at the first of the fields that some layer set (not a built-in default).
            chosen = next((name for name in fields if name in origin), None)
            problems.append(_cross_field_problem(origin, chosen, message, hint))
            continue
        name = str(loc[0])
        if name in _UNION_MESSAGES and len(loc) > 1:
            loc, message = loc[:1], _UNION_MESSAGES[name]
        if loc in seen:
            continue
        seen.add(loc)
        layer = origin.get(name)
        if error["type"] == "extra_forbidden":
            # A key of the profile, or of one of its pools (pools.NAME.KEY).
            unknown = str(loc[-1])
            pooled = name == "pools" and len(loc) == 3
            known = sorted(Pool.model_fields) if pooled else SETTABLE_FIELDS
            close = difflib.get_close_matches(unknown, known, n=1, cutoff=0.6)
            hint = (
                f"did you mean {close[0]!r}?"
                if close
                else (
                    f"a pool sets: {', '.join(known)}"
                    if pooled
                    else "`hpcflow profiles show` lists every setting"
                )
            )
            problems.append(_problem(layer, name, loc, f"unknown key {unknown!r}", hint, key=True))
            continue
        if layer is not None and layer.positions is None:
            message += f" (got {error['input']!r})"
        problems.append(_problem(layer, name, loc, message, None, key=loc[-1] == "[key]"))
    return problems


def _problem(
    layer: Layer | None,
    name: str | None,
    loc: tuple[Any, ...],
    message: str,
    hint: str | None,
    *,
    key: bool = False,
) -> SpecProblem:
    parts = tuple(part for part in loc if part != "[key]")
    if layer is not None and layer.positions is not None:
        path = _document_path((*layer.prefix, *parts), layer.positions)
        return layer.positions.problem(path, message, hint=hint, key=key)
    label = layer.sources[name] if layer is not None and name else "profile"
    return SpecProblem(
        file=label, line=None, column=None, where=format_path(parts), message=message, hint=hint
    )


def _cross_field_problem(
    origin: Mapping[str, Layer], chosen: str | None, message: str, hint: str | None
) -> SpecProblem:
    layer = origin.get(chosen) if chosen else None
    if layer is None or chosen is None:
        return SpecProblem(
            file="profile", line=None, column=None, where="", message=message, hint=hint
        )
    if layer.positions is None:
        return SpecProblem(
            file=layer.sources[chosen], line=None, column=None, where="", message=message, hint=hint
        )
    line, column = layer.positions.locate((*layer.prefix, chosen), key=True)
    return SpecProblem(
        file=layer.positions.file, line=line, column=column, where="", message=message, hint=hint
    )


def _document_path(path: tuple[Any, ...], positions: Positions) -> Path:
    """The longest start of ``path`` that exists in the document."""
    found: Path = ()
    for part in path:
        candidate = (*found, part)
        if candidate not in positions.values:
            break
        found = candidate
    return found


def _render(problems: Sequence[SpecProblem]) -> str:
    return "\n".join(problem.render() for problem in problems)
