"""The embedded cluster takes no fixed port: another cluster on :8787 does not matter."""

from __future__ import annotations

import socket


def test_busy_dashboard_port_is_not_ours(example, hpcflow):
    holder = socket.socket()
    try:
        holder.bind(("", 8787))
        holder.listen()
    except OSError:
        pass  # someone holds it already: the same situation
    try:
        wf = example("hello")
        result = hpcflow("run", str(wf), "-q", "--engine", "dask", cwd=wf.parent)
    finally:
        holder.close()
    assert result.returncode == 0, result.output
    assert "already in use" not in result.stderr and "8787" not in result.stderr
