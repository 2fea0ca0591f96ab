"""Where a live run's Dask dashboard is, and the ssh tunnel that reaches it from a laptop."""

from __future__ import annotations

import getpass
import json
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Dashboard:
    """A running dashboard: its URL on the cluster and how to reach it from outside."""

    url: str
    tunnel: str | None  # an ssh command run on the user's own machine
    local_url: str | None  # what to open once the tunnel runs


def find_dashboard(scheduler_file: Path, login_host: str | None = None) -> Dashboard | None:
    """Read the scheduler file a pilot allocation publishes; None without a dashboard."""
    try:
        data = json.loads(scheduler_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    url = data.get("dashboard") if isinstance(data, dict) else None
    if not isinstance(url, str) or not url:
        return None
    return dashboard_at(url, login_host)


def dashboard_at(url: str, login_host: str | None = None) -> Dashboard:
    """The dashboard at ``url`` and the ssh tunnel to it through ``login_host``."""
    parts = urlsplit(url)
    if not parts.hostname or not parts.port:
        return Dashboard(url, None, None)
    login = login_host or socket.getfqdn()
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = None
    target = f"{user}@{login}" if user else login
    port = parts.port
    tunnel = f"ssh -N -L {port}:{parts.hostname}:{port} {target}"
    return Dashboard(url, tunnel, f"http://localhost:{port}{parts.path or '/status'}")
