"""Command-line options that several commands share, and turning them into a profile."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

#: The allocation's shape, settable on the command line over the profile's values.
_ALLOCATION_OPTIONS = (
    click.option("--nodes", type=click.IntRange(min=1), help="Batch profiles: nodes to allocate."),
    click.option("--partition", help="Batch profiles: partition (queue)."),
    click.option("--account", help="Batch profiles: account to charge."),
    click.option("--walltime", help="Batch profiles: allocation walltime, e.g. 2h or 1:00:00."),
)


def allocation_options(func: F) -> F:
    """Adds ``--nodes``, ``--partition``, ``--account`` and ``--walltime`` to a command."""
    for option in reversed(_ALLOCATION_OPTIONS):
        func = option(func)
    return func


def resolve_cli_profile(name: str, overrides: dict[str, Any]) -> Any:
    """The profile ``name`` with the command line's values on top (``None``: not given).

    Each override is reported as coming from its ``--flag`` (``hpcflow profiles show``).
    """
    from hpcflow.api.launch import resolve_run_profile

    return resolve_run_profile(name, overrides)
