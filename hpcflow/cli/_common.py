"""Helpers shared by CLI commands: finding runs, reading their state (they live in
:mod:`hpcflow.api.locate`, which the Python API reads runs with too)."""

from hpcflow.api.locate import (
    RunView,
    driver_alive,
    find_run,
    fresh_allocations,
    latest_run_in,
    read_run,
    view_of,
)

__all__ = [
    "RunView",
    "driver_alive",
    "find_run",
    "fresh_allocations",
    "latest_run_in",
    "read_run",
    "view_of",
]
