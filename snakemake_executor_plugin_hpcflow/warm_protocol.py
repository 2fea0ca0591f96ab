"""What the worker side and a warm runner say to each other: JSON messages on sockets.

Both ends are Unix ``SOCK_SEQPACKET`` socket pairs, so one ``send`` is one message and
file descriptors travel with it (``SCM_RIGHTS``):

- the **control** socket (one per warm runner, its end inherited by the runner): the
  runner's start (``{"argv": [...]}`` → ``{"ready": true}`` or ``{"ready": false,
  "error": ...}``), then one message per job carrying three descriptors: the job's own
  socket and the write ends of its stdout and stderr pipes;
- the **job** socket (one per job): the request ``{"argv": [...], "env": {...}}``, then
  ``{"pid": N}`` once the job's process runs (or ``{"fallback": reason}`` /
  ``{"stale": reason}`` instead), then ``{"status": WAITSTATUS, "maxrss": BYTES}``.

A closed control socket tells the runner that its worker is gone: it ends, and its jobs
with it. Standard library only.
"""

from __future__ import annotations

import json
import socket
from typing import Any

#: The largest message (a group job's target list can be long); larger ones fall back.
MAX_MESSAGE = 1 << 20


def socket_pair() -> tuple[socket.socket, socket.socket]:
    """A connected pair of message sockets (not inherited by children unless passed)."""
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


def send(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    """Send one JSON message (and ``fds``) on ``sock``."""
    data = json.dumps(message, separators=(",", ":")).encode()
    if fds:
        socket.send_fds(sock, [data], fds)
    else:
        sock.sendall(data)


def receive(sock: socket.socket, maxfds: int = 0) -> tuple[dict[str, Any] | None, list[int]]:
    """One message (None at end of file) and the descriptors that came with it."""
    if maxfds:
        data, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE, maxfds)
    else:
        data, fds = sock.recv(MAX_MESSAGE), []
    if not data:
        return None, list(fds)
    return json.loads(data), list(fds)
