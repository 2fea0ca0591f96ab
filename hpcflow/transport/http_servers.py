"""What Dask's HTTP servers serve, and where: nothing worth reading unless asked.

Every Dask scheduler and worker starts an HTTP server, dashboard or not, with routes
from the settings ``distributed.scheduler.http.routes`` and
``distributed.worker.http.routes``. Dask's defaults serve ``/info`` (workers, logs, call
stacks, exception texts), ``/json`` and ``/metrics`` to anyone who can reach the port,
without credentials, and bind ``0.0.0.0`` whenever a dashboard address names no host.

hpcflow's processes keep only ``/health`` and listen on ``127.0.0.1`` (any free port):
the settings below for Dask's configuration (this process, or a worker job's
environment) and the worker command line. Asked for (the profile's
``dashboard_address``), the scheduler's dashboard serves Dask's own pages on ONE
address of its node (:func:`dashboard_bind`), reached through an SSH tunnel
(docs/security.md); workers never serve theirs.
"""

from __future__ import annotations

import json
import socket
from typing import Any

from hpcflow.errors import ProfileError

#: The only route kept when the dashboard is off: ``/health`` answers ``ok``.
HEALTH_ONLY: list[str] = ["distributed.http.health"]

#: Where an HTTP server nobody asked for listens: loopback, any free port.
LOOPBACK_ANY_PORT = "127.0.0.1:0"

#: Hosts that mean every interface (refused for the dashboard, never bound).
_WILDCARDS = frozenset({"0.0.0.0", "::", "[::]", "*"})  # noqa: S104

#: The worker command-line options of a worker that serves no dashboard.
WORKER_CLI_ARGS: tuple[str, ...] = ("--no-dashboard", "--dashboard-address", LOOPBACK_ANY_PORT)


def http_settings(*, dashboard: bool = False) -> dict[str, Any]:
    """Dask settings for this process's HTTP servers: health only for workers always,
    and for the scheduler unless ``dashboard`` (then Dask's own routes)."""
    settings: dict[str, Any] = {"distributed.worker.http.routes": list(HEALTH_ONLY)}
    if not dashboard:
        settings["distributed.scheduler.http.routes"] = list(HEALTH_ONLY)
    return settings


def worker_environment() -> dict[str, str]:
    """The same for a worker job started by a shell: Dask reads ``DASK_*`` variables."""
    return {"DASK_DISTRIBUTED__WORKER__HTTP__ROUTES": json.dumps(HEALTH_ONLY)}


def dashboard_bind(address: str, *, host: str | None = None, interface: str | None = None) -> str:
    """The ONE ``host:port`` the scheduler's dashboard listens on, from the profile's
    ``dashboard_address`` (``:8787``, ``HOST:8787``, ``8787``).

    Without a host: ``host``, else the address of ``interface``, else this node's
    address. A wildcard (``0.0.0.0``) is refused: the dashboard has no authentication.
    """
    bind_host, _, port = address.strip().rpartition(":")
    if bind_host in _WILDCARDS:
        raise ProfileError(
            f"dashboard_address {address!r} would serve the dashboard on every network "
            "interface, without authentication",
            hint="name one address, e.g. dashboard_address: 127.0.0.1:8787 (then reach it "
            "through an SSH tunnel, docs/security.md), or leave the host out for the node's",
        )
    if not bind_host:
        bind_host = host or _interface_address(interface) or _node_address()
    return f"{bind_host}:{port or 0}"


def _interface_address(interface: str | None) -> str | None:
    if not interface:
        return None
    from distributed.utils import get_ip_interface

    try:
        return str(get_ip_interface(interface))
    except ValueError as exc:
        raise ProfileError(
            f"network interface {interface!r} has no IPv4 address on {socket.gethostname()}",
            hint="check the profile's interface (ip -brief address lists them)",
        ) from exc


def _node_address() -> str:
    """This node's address as its name resolves (loopback when the name does not)."""
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"
