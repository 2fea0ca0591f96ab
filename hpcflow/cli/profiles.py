"""`hpcflow profiles`: the site profiles there are, and what one resolves to."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from hpcflow.settings import ResolvedProfile


@click.group("profiles")
def command() -> None:
    """Site profiles: where runs go and how their allocations are shaped."""


@command.command("list")
@click.option(
    "--all", "show_all", is_flag=True, help="Also list profiles hidden by one of the same name."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_command(show_all: bool, as_json: bool) -> None:
    """List the profiles on the search path, first match first.

    The search path is $HPCFLOW_PROFILE_PATH (colon-separated folders), then
    ~/.config/hpcflow/profiles, then the profiles shipped with hpcflow.
    """
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from hpcflow.errors import ProfileError
    from hpcflow.settings import list_profiles, load_profile

    rows: list[dict[str, Any]] = []
    for ref in list_profiles(include_shadowed=show_all):
        row: dict[str, Any] = {
            "name": ref.name,
            "backend": None,
            "mode": None,
            "description": None,
            "origin": ref.origin,
            "location": ref.location,
            "shadowed": ref.shadowed,
            "error": None,
        }
        try:
            profile = load_profile(ref)
        except ProfileError as exc:
            # One broken file must not hide the others; `show NAME` gives the details.
            row["error"] = str(exc).splitlines()[0]
        else:
            row.update(backend=profile.backend, mode=profile.mode, description=profile.description)
        rows.append(row)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    # Names and where each came from never wrap (a shipped profile says only that); a
    # path too long keeps its end; descriptions wrap in what is left.
    console = Console(soft_wrap=False)
    table = Table(box=None, pad_edge=False)
    for column in ("name", "backend", "mode", "description", "from"):
        table.add_column(
            column,
            style="bold" if column == "name" else None,
            no_wrap=column != "description",
            overflow="fold" if column == "description" else "ellipsis",
            ratio=1 if column == "description" else None,
        )
    for row in rows:
        name = row["name"] + (" (hidden)" if row["shadowed"] else "")
        about = (
            Text(f"invalid: {row['error']}", style="red")
            if row["error"]
            else Text(row["description"] or "")
        )
        table.add_row(
            Text(name),
            Text(row["backend"] or "?"),
            Text(row["mode"] or "?"),
            about,
            Text(_origin(row["origin"], str(row["location"]), console.width // 3)),
        )
    console.print(table)


def _origin(origin: str, location: str, width: int) -> str:
    """Where a profile came from, short: ``shipped``, or the search step and its file
    (``~`` for the home folder, the file's end when long)."""
    from hpcflow.cli.console import short_path

    if origin == "shipped":
        return "shipped"
    return f"{origin}: {short_path(location, max(12, width - len(origin) - 2))}"


def _parse_set(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> dict[str, str]:
    settings: dict[str, str] = {}
    for item in value:
        key, eq, text = item.partition("=")
        if not eq or not key.strip():
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", ctx=ctx, param=param)
        settings[key.strip().replace("-", "_")] = text
    return settings


@command.command("show")
@click.argument("name", required=False)
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    callback=_parse_set,
    help="Override one setting, as the command line of a run would (repeatable).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def show_command(name: str | None, settings: dict[str, str], as_json: bool) -> None:
    """Show every setting of profile NAME (a name or a .yaml path; default:
    $HPCFLOW_PROFILE or local), its value and where the value came from.

    HPCFLOW_<SETTING> environment variables are applied, as they would be for a run.
    """
    from hpcflow.settings import resolve_profile

    resolved = resolve_profile(
        name, overrides=settings, flags={key: f"--set {key}" for key in settings}
    )
    if as_json:
        click.echo(json.dumps(_as_json(resolved), indent=2))
        return
    _print_table(resolved)


def _as_json(resolved: ResolvedProfile) -> dict[str, Any]:
    values = resolved.profile.model_dump(mode="json")
    ref = resolved.ref
    return {
        "name": resolved.profile.name,
        "origin": ref.origin if ref else None,
        "location": ref.location if ref else None,
        "settings": {
            key: {"value": value, "source": resolved.source(key)} for key, value in values.items()
        },
    }


def _print_table(resolved: ResolvedProfile) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from hpcflow.settings import BUILTIN_DEFAULT

    console = Console(soft_wrap=False)
    ref = resolved.ref
    title = Text.assemble(("profile ", ""), (resolved.profile.name, "bold"))
    if ref is not None:
        title.append(f"  ({ref.origin}: {ref.location})", style="dim")
    console.print(title)
    table = Table(box=None, pad_edge=False)
    table.add_column("setting", style="bold", no_wrap=True)
    # Fold rather than cut: a source's line number is the point of this table.
    table.add_column("value", overflow="fold")
    table.add_column("source", overflow="fold")
    for key in type(resolved.profile).model_fields:
        source = resolved.source(key)
        if ref is not None:
            # The title gives the profile's full path; rows name just the file and line.
            source = source.replace(f"profile {ref.location}", f"profile {Path(ref.location).name}")
        # Text cells: values are user data, never rich markup.
        table.add_row(
            Text(key),
            Text(_show_value(key, getattr(resolved.profile, key))),
            Text(source, style="dim" if source == BUILTIN_DEFAULT else ""),
        )
    console.print(table)


def _show_pool(pool: Any) -> str:
    """A pool's own settings, each as :func:`_show_value` shows the profile's."""
    shown = [
        f"{name}={_show_value(name, getattr(pool, name))}"
        for name in sorted(pool.model_fields_set)
        if name != "description"
    ]
    return " ".join(shown) or "the profile as it is"


def _show_value(key: str, value: Any) -> str:
    """A setting as a person reads it: 4.0 GiB, 2:00:00, a, b, NAME=value."""
    from hpcflow.settings import field_kind
    from hpcflow.spec.units import format_duration, format_memory

    if value is None:
        return "-"
    if key == "pools":
        return "; ".join(f"{name}: {_show_pool(pool)}" for name, pool in value.items()) or "-"
    kind = field_kind(key)
    if kind == "memory":
        return format_memory(value)
    if kind == "duration":
        return f"{value:g}s" if value < 60 else format_duration(value)
    if kind == "list":
        return ", ".join(value) if value else "-"
    if kind == "dict":
        return " ".join(f"{k}={v}" for k, v in value.items()) if value else "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
