"""`hpcflow profiles`: the site profiles there are, and what one resolves to."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from hpcflow.api.profiles import ResolvedProfile


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
    from rich.text import Text

    from hpcflow.api.profiles import list_profiles, load_profile
    from hpcflow.cli.console import fit_columns, fitted_table, short_path, tilde
    from hpcflow.errors import ProfileError

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
    # Names, backends and modes never wrap; descriptions wrap, and a path too long loses
    # its middle. Where that is not enough, where each came from is left out, then the
    # modes, then the backends (`profiles show NAME` has them all).
    console = Console(soft_wrap=False)
    cells = [
        [
            row["name"] + (" (hidden)" if row["shadowed"] else ""),
            row["backend"] or "?",
            row["mode"] or "?",
            f"invalid: {row['error']}" if row["error"] else row["description"] or "",
            "shipped" if row["origin"] == "shipped" else f"{row['origin']}: ",
            tilde(str(row["location"])),
        ]
        for row in rows
    ]
    natural = [max([len(head), *(len(c[k]) for c in cells)]) for k, head in enumerate(HEADS)]
    natural[4] = max([len(HEADS[4]), *(len(c[4] + c[5]) for c in cells if c[4] != "shipped")])
    labels = max((len(c[4]) for c in cells if c[4] != "shipped"), default=0)
    minimum = [*natural[:3], min(natural[3], 20), min(natural[4], labels + 16)]
    widths = fit_columns(console.width, natural, minimum, shrink=(4, 3), drop=(4, 2, 1))
    table = fitted_table(widths, HEADS, wrap=("description",))
    room = widths[4] or natural[4]
    for row, cell in zip(rows, cells, strict=True):
        origin = cell.pop()
        if cell[4] != "shipped":
            cell[4] += short_path(origin, room - len(cell[4]))
        texts = [Text(c) for c in cell]
        texts[0].stylize("bold")
        if row["error"]:
            texts[3].stylize("red")
        table.add_row(*(t for t, w in zip(texts, widths, strict=True) if w is not None))
    console.print(table, crop=False)


#: The columns of `hpcflow profiles list`.
HEADS = ("name", "backend", "mode", "description", "from")


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
    from hpcflow.api.profiles import resolve_profile

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

    from hpcflow.api.profiles import BUILTIN_DEFAULT

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
    from hpcflow.api.profiles import field_kind
    from hpcflow.api.units import format_duration, format_memory

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
