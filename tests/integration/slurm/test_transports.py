"""Transports of a pilot allocation on the real local SLURM: tls (the default), tcp, ucx.

The tls test holds a run open (its one task waits for a file) and, while the cluster is
live, proves who can and cannot talk to the scheduler, that the key files are private,
that the profile's worker settings reached the workers, and that ``hpcflow status``
shows the dashboard with an ssh tunnel.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_cli, write_workflow
from tests.integration.slurm.conftest import queue_drains, run_logs
from tests.slurm_cluster import slurm_required

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[3]
SHIPPED = REPO / "hpcflow" / "settings" / "profiles"

HELD = """
name: held
tasks:
  - name: wait
    command: >-
      for i in $(seq 600); do [ -e release ] && break; sleep 0.1; done;
      [ -e release ] && echo released > held.txt
    outputs: [held.txt]
"""


def _hpcflow(env: dict[str, str], *args: str, cwd: Path, timeout: float = 180):
    return subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def _wait_for(path: Path, timeout: float, why: str, logs: Path) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            time.sleep(0.2)
    errors = "\n".join(p.read_text()[-2000:] for p in sorted(logs.glob("allocations/*.err")))
    driver = logs / "driver.log"
    raise AssertionError(
        f"{why}: {path} did not appear in {timeout}s\n{errors}\n"
        + (driver.read_text()[-2000:] if driver.exists() else "")
    )


def _only_run_dir(workdir: Path) -> Path:
    runs = sorted((workdir / ".hpcflow" / "runs").iterdir())
    assert len(runs) == 1, runs
    return runs[0]


def _wait_for_end(env, workdir: Path, timeout: float = 90) -> dict:
    deadline = time.monotonic() + timeout
    status: dict = {}
    while time.monotonic() < deadline:
        status = json.loads(_hpcflow(env, "status", "--json", cwd=workdir).stdout)
        if status["status"] in ("succeeded", "failed", "cancelled"):
            return status
        time.sleep(0.5)
    raise AssertionError(f"run did not end in {timeout}s: {status}")


def _refused(address: str, security) -> str:
    """Try to reach the scheduler with ``security``; return why it failed (or fail)."""
    from distributed import Client

    try:
        client = Client(address, security=security, timeout=5, set_as_default=False)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    try:
        n = len(client.scheduler_info()["workers"])
        client.submit(sum, [1, 2]).result(timeout=5)
    finally:
        client.close()
    raise AssertionError(f"connected to {address} (saw {n} workers) and ran work")


def test_tls_by_default_refuses_strangers(tmp_path, slurm_env, slurm_cluster):
    from distributed import Client

    from hpcflow.transport.certificates import create_credentials
    from hpcflow.transport.security import security_for

    wf = write_workflow(tmp_path, HELD)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {
        **slurm_env,
        "HPCFLOW_DASHBOARD_ADDRESS": ":0",
        "HPCFLOW_WORKER_MEMORY_LIMIT": "1GB",
        "HPCFLOW_WORKER_MEMORY_TARGET": "0.55",
        "HPCFLOW_WORKER_MEMORY_SPILL": "0.65",
        "HPCFLOW_WORKER_MEMORY_PAUSE": "0.75",
        "HPCFLOW_WORKER_LIFETIME": "1h",
        "HPCFLOW_WORKER_LIFETIME_STAGGER": "1m",
        "HPCFLOW_WORKER_RESOURCES": "{licence: 2}",
        "HPCFLOW_LOCAL_DIRECTORY": str(scratch),
    }
    started = _hpcflow(env, "run", str(wf), "--profile", "slurm-test", "--detach", cwd=tmp_path)
    assert started.returncode == 0, started.stdout + started.stderr
    run_dir = _only_run_dir(tmp_path)
    try:
        info = _wait_for(run_dir / "scheduler.json", 90, "scheduler address", run_dir)
        address = info["address"]
        assert address.startswith("tls://"), address

        # Keys are private: the directory 0700, every file 0600.
        tls = run_dir / "tls"
        assert stat.S_IMODE(tls.stat().st_mode) == 0o700
        files = sorted(p.name for p in tls.iterdir())
        assert files == ["ca.pem", "cert.pem", "key.pem"]
        for path in tls.iterdir():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path

        # Strangers are refused: plain TCP, TLS with a certificate from another CA,
        # and a raw TLS connection that presents no certificate at all.
        assert _refused(address.replace("tls://", "tcp://", 1), None)
        stranger = create_credentials(tmp_path / "stranger", "stranger").directory.parent
        assert _refused(address, security_for(stranger, "tls"))
        host, port = address[len("tls://") :].rsplit(":", 1)
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with socket.create_connection((host, int(port)), timeout=5) as raw:
                with context.wrap_socket(raw) as conn:
                    conn.sendall(b"\0" * 64)
                    if not conn.recv(1):
                        raise ConnectionError("closed by the scheduler")

        # The run's own certificate works (the control for the refusals above).
        with Client(address, security=security_for(run_dir, "tls"), timeout=10) as client:
            client.wait_for_workers(1, timeout=60)
            assert client.submit(sum, [1, 2]).result(timeout=30) == 3

        # The profile's worker settings reached the worker.
        workers = _wait_for(run_dir / "workers.json", 60, "worker report", run_dir)["workers"]
        assert len(workers) == 1
        worker = workers[0]
        assert worker["memory_limit"] == 10**9
        assert (worker["memory_target"], worker["memory_spill"], worker["memory_pause"]) == (
            0.55,
            0.65,
            0.75,
        )
        assert 3600 - 60 <= worker["lifetime"] <= 3600 + 60
        assert worker["resources"] == {"licence": 2.0, "cpus": 2.0}
        assert worker["nthreads"] == 2
        assert worker["local_directory"].startswith(str(scratch))

        # Running tasks show the node they run on (as SLURM names it).
        deadline = time.monotonic() + 30
        running: list = []
        while time.monotonic() < deadline:
            running = json.loads(_hpcflow(env, "status", "--json", cwd=tmp_path).stdout)["running"]
            if running and running[0]["host"]:
                break
            time.sleep(0.5)
        assert running and running[0]["host"] in ("n1", "n2", "n3", "n4"), running

        # hpcflow status shows the dashboard and how to reach it.
        status = _hpcflow(env, "status", cwd=tmp_path)
        assert status.returncode == 0, status.stderr
        url = info["dashboard"]
        assert url and f"dashboard {url}" in status.stdout, status.stdout
        assert "ssh -N -L" in status.stdout, status.stdout
        with urllib.request.urlopen(url, timeout=10) as page:  # noqa: S310
            assert page.status == 200
    finally:
        (tmp_path / "release").touch()
    final = _wait_for_end(env, tmp_path)
    assert final["status"] == "succeeded", final
    assert (tmp_path / "held.txt").read_text() == "released\n"
    assert queue_drains(slurm_cluster) == []


def _values_workflow(tmp_path: Path) -> Path:
    """The values workflow of tests/e2e/test_values.py: arrays handed from task to task
    as Dask futures (worker to worker over the transport), checked bit for bit after."""
    from tests.e2e.test_values import setup

    return setup(tmp_path)


def _values_arrived(workdir: Path) -> None:
    from tests.e2e.test_values import expected, total_result

    assert total_result(workdir) == expected()


def test_tcp_on_request_warns(tmp_path, slurm_env):
    wf = _values_workflow(tmp_path)
    result = _hpcflow(
        slurm_env, "run", str(wf), "--profile", "slurm-test", "--transport", "tcp", "-q",
        "--nodes", "2", cwd=wf.parent,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no authentication" in result.stderr
    run_dir = _only_run_dir(wf.parent)
    assert json.loads((run_dir / "scheduler.json").read_text())["address"].startswith("tcp://")
    assert not (run_dir / "tls").exists()
    _values_arrived(tmp_path)


@pytest.mark.parametrize("transport", ["tcp", "ucx"])
def test_required_encryption_refuses_plaintext_before_submitting(
    tmp_path, slurm_env, slurm_cluster, transport
):
    wf = write_workflow(tmp_path, "name: x\ntasks:\n  - name: a\n    command: 'true'\n")
    env = {**slurm_env, "HPCFLOW_REQUIRE_ENCRYPTION": "true"}
    result = _hpcflow(
        env, "run", str(wf), "--profile", "slurm-test", "--transport", transport, cwd=tmp_path
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "not encrypted" in result.stderr and "Traceback" not in result.stderr
    assert queue_drains(slurm_cluster) == []


def _ucx_python() -> Path | None:
    named = os.environ.get("HPCFLOW_UCX_PYTHON")
    candidate = Path(named) if named else REPO / ".venv-ucx" / "bin" / "python"
    return candidate if candidate.exists() else None


def test_ucx_on_cpu_transports(tmp_path, slurm_env, slurm_cluster):
    python = _ucx_python()
    if python is None:
        message = (
            "no UCX environment: scripts/test.sh builds .venv-ucx "
            "(pip install distributed-ucxx-cu12 -e .), or set HPCFLOW_UCX_PYTHON"
        )
        if slurm_required():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    profile = yaml.safe_load((SHIPPED / "slurm-test.yaml").read_text())
    profile.update(transport="ucx", python=str(python))
    # CPU only: no cuda transports on a node without a driver (the scheduler would fail
    # to start); quiet the warning distributed-ucxx's own defaults cause.
    profile["env"].update(UCX_TLS="tcp,self", UCX_WARN_UNUSED_ENV_VARS="n")
    # Over two nodes the ranks must name the device their addresses are on (each node's
    # 127.0.10.I is an extra address of lo), as a site names ib0.
    profile["interface"] = "lo"
    profile_file = tmp_path / "slurm-ucx.yaml"
    profile_file.write_text(yaml.safe_dump(profile))
    wf = _values_workflow(tmp_path)
    try:
        result = run_cli(
            ("run", str(wf), "--profile", str(profile_file), "-q", "--nodes", "2"),
            slurm_env, wf.parent, timeout=300,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        # Say where it stood (a hang once seen in CI left nothing to go on).
        subprocess.run(["scancel", "--user", "root"], env=slurm_env, check=False)
        raise AssertionError("the ucx run hung:\n" + run_logs(wf.parent)) from None
    run_dir = _only_run_dir(wf.parent)
    assert result.returncode == 0, result.output + run_logs(wf.parent)
    assert "not encrypted" in result.stderr
    address = json.loads((run_dir / "scheduler.json").read_text())["address"]
    assert address.startswith(("ucx://", "ucxx://")), address
    _values_arrived(tmp_path)
    assert queue_drains(slurm_cluster) == []
