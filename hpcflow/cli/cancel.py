"""`hpcflow cancel RUN`: stop a run from any shell, in every mode, without writing its state
(the protocol is :mod:`hpcflow.api.cancel`; this prints what it did)."""

from __future__ import annotations

import click


@click.command("cancel")
@click.argument("run")
def command(run: str) -> None:
    """Cancel RUN (run id, prefix or directory): its allocations, and its driver."""
    from hpcflow.api.cancel import cancel_run
    from hpcflow.api.locate import find_run

    done = cancel_run(find_run(run))
    if not done.active:
        click.echo(f"run {done.run_id} is not active ({done.status})")
        return
    if done.driver_stopped:
        click.echo("the run's driver stopped the run")
    if done.allocations:
        click.echo(f"cancelled allocation(s) {', '.join(done.allocations)}")
    if done.signalled is not None:
        click.echo(f"asked the driver (pid {done.signalled}) to stop with SIGTERM")
    elif done.asked_only:
        click.echo("asked the run's driver to stop")
