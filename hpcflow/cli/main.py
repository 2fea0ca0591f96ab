"""`hpcflow` entry point: the command group and the user-error boundary."""

from __future__ import annotations

import importlib
import logging
import sys
from typing import Any

import click

from hpcflow._version import __version__
from hpcflow.errors import HpcflowError

#: The commands by name, each the ``command`` of the module ``hpcflow.cli.NAME``.
COMMANDS = (
    "run", "validate", "dag", "render", "schema", "status", "runs", "logs", "result",
    "cancel", "profiles", "report", "init", "completion",
)  # fmt: skip


class _Group(click.Group):
    """Turns :class:`HpcflowError` into a message and an exit code, never a traceback;
    imports a command's module only when the command is used (or listed, by --help): a
    command's start-up pays for its own imports, not for every other command's."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        command: click.Command = importlib.import_module(f"hpcflow.cli.{cmd_name}").command
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except HpcflowError as exc:
            click.secho(f"error: {exc}", fg="red", err=True)
            sys.exit(exc.exit_code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hpcflow")
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
def cli(verbose: int) -> None:
    """hpcflow: run a workflow.yaml here, or inside HPC allocations."""
    level = max(logging.WARNING - 10 * verbose, logging.DEBUG)
    handler = logging.StreamHandler()
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    # Dask is chatty at INFO; its messages matter only when debugging.
    logging.getLogger("distributed").setLevel(logging.DEBUG if verbose >= 3 else logging.WARNING)


def main() -> None:
    cli(prog_name="hpcflow")


if __name__ == "__main__":
    main()
