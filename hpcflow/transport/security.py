"""The ``Security`` every process of a run passes to distributed, by transport.

* ``tls``: the run's certificate (see :mod:`hpcflow.transport.certificates`) on every
  side, encryption required, peers checked against the run's own CA.
* ``tcp``: no authentication; anyone who can reach the port can run code as you.
* ``ucx``: distributed-ucxx ignores TLS settings, so traffic is plaintext too.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from hpcflow.errors import ProfileError
from hpcflow.transport.certificates import credentials_in

if TYPE_CHECKING:
    from distributed import Security

log = logging.getLogger(__name__)

#: Transports that encrypt and authenticate.
ENCRYPTED = frozenset({"tls"})


def check_choice(transport: str, *, require_encryption: bool, shared_machine: bool) -> None:
    """Refuse or warn about a transport before anything is submitted.

    ``require_encryption`` (a profile setting) turns the warning into a refusal;
    ``shared_machine`` is true for every batch backend.
    """
    if transport in ENCRYPTED:
        return
    if require_encryption:
        raise ProfileError(
            f"transport {transport!r} is not encrypted, and the profile requires encryption",
            hint="use transport: tls"
            + (" (distributed-ucxx has no TLS)" if transport == "ucx" else ""),
        )
    if shared_machine:
        what = (
            "UCX traffic is not encrypted (distributed-ucxx ignores TLS)"
            if transport == "ucx"
            else "plain TCP has no authentication"
        )
        log.warning(
            "transport %s: %s; other users of the cluster's nodes could connect to this "
            "run's Dask scheduler and run code as you. Use transport: tls unless the "
            "nodes are yours alone.",
            transport,
            what,
        )


def security_for(run_dir: Path, transport: str) -> Security | None:
    """The ``Security`` for processes of the run at ``run_dir`` (None: no TLS)."""
    if transport not in ENCRYPTED:
        return None
    from distributed import Security

    creds = credentials_in(run_dir)
    if not creds.exist():
        raise ProfileError(
            f"transport tls, but the run's certificates are missing from {creds.directory}",
            hint="the run directory must be on a file system shared with the compute nodes; "
            "a run created with another transport cannot switch to tls",
        )
    creds.check_private()
    ca, cert, key = str(creds.ca_file), str(creds.cert_file), str(creds.key_file)
    return Security(
        require_encryption=True,
        tls_ca_file=ca,
        tls_scheduler_cert=cert,
        tls_scheduler_key=key,
        tls_worker_cert=cert,
        tls_worker_key=key,
        tls_client_cert=cert,
        tls_client_key=key,
    )
