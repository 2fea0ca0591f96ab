"""`hpcflow completion bash|zsh|fish`: the shell completion script to source."""

from __future__ import annotations

import click


@click.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
@click.pass_context
def command(ctx: click.Context, shell: str) -> None:
    """Print SHELL's completion script.

    For bash, add `eval "$(hpcflow completion bash)"` to ~/.bashrc (zsh: ~/.zshrc).
    """
    from click.shell_completion import get_completion_class

    # The command group this command was reached through (no import of it: it imports us).
    root = ctx.find_root().command
    completion = get_completion_class(shell)
    if completion is None:  # click knows these three; keep the error readable anyway
        raise click.UsageError(f"no completion for {shell}")
    click.echo(completion(root, {}, "hpcflow", "_HPCFLOW_COMPLETE").source())
