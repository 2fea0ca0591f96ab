"""Every socket authenticates: another account finds a run's ports and gets nowhere.

Live: during a local ``hpcflow run --engine dask`` and a ``snakemake --executor hpcflow``
run (the plugin's default local mode), with a task held open on a file, every socket
that the victim's process tree listens on is found (psutil, as ``ss`` would show it), and
the other account attacks each one: a Dask ``Client`` and a raw Dask RPC (``identity``,
then ``run`` of a function that would create a canary file) over ``tcp://`` and over
``tls://`` with a certificate of its own; ``curl`` over http and https for ``/info``,
``/json``, ``/metrics``, ``/health`` and ``/``. Nothing connects, the canary never
appears, and no HTTP answer carries more than ``/health``'s ``ok``.

Static: the worker jobs of elastic mode and the servers of a pilot serve no dashboard
and bind their HTTP servers to loopback (the rendered job script; the bind addresses).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from hpcflow.errors import HpcflowError, ProfileError
from hpcflow.modes.elastic_cluster import import_jobqueue
from hpcflow.modes.elastic_plan import plan_elastic
from hpcflow.settings.profile import Profile
from hpcflow.transport.certificates import create_credentials
from hpcflow.transport.http_servers import dashboard_bind, http_settings
from hpcflow.transport.security import security_for
from tests.security.conftest import Account

#: The attacker's program: argv[1] a JSON list of [host, port], argv[2] the canary path.
#: Prints one JSON object: every attempt and what came of it.
ATTACK = r"""
import asyncio, json, subprocess, sys
from pathlib import Path

targets, canary = json.loads(sys.argv[1]), sys.argv[2]

def plant():
    Path(canary).write_text("ran as the victim")
    return "planted"

async def rpc_attempt(address, security):
    from distributed.core import rpc
    from distributed.protocol.pickle import dumps
    conn = rpc(address, connection_args=security.get_connection_args("client") if security else {},
               timeout=5)
    try:
        who = await asyncio.wait_for(conn.identity(), 8)
    except BaseException as exc:
        await conn.close_rpc()
        return f"refused: {type(exc).__name__}: {str(exc)[:200]}"
    try:  # (workers and nannies run a pickled function; the scheduler has no "run")
        ran = await asyncio.wait_for(conn.run(function=dumps(plant)), 10)
    except BaseException as exc:
        ran = f"{type(exc).__name__}: {exc}"
    await conn.close_rpc()
    return f"CONNECTED identity={who!r} run={ran!r}"

async def client_attempt(address, security):
    from distributed import Client

    async def use():
        async with Client(address, security=security, timeout=5, asynchronous=True,
                          set_as_default=False) as client:
            out = [await client.run_on_scheduler(plant)]
            out.append(await client.submit(plant, pure=False))
            return f"CONNECTED {out!r}"
    try:
        return await asyncio.wait_for(use(), 12)
    except BaseException as exc:  # (a refused handshake may surface as a cancellation)
        return f"refused: {type(exc).__name__}: {str(exc)[:200]}"

def curl(url):
    done = subprocess.run(
        ["curl", "-sk", "-m", "5", "-o", "-", "-w", "\n%{http_code}", url],
        capture_output=True, text=True, errors="replace",
    )
    body, _, code = done.stdout.rpartition("\n")
    return {"code": code.strip(), "body": body[:300], "curl_exit": done.returncode}

from concurrent.futures import ThreadPoolExecutor
from distributed import Security

own = Security.temporary()  # a certificate of the attacker's own, signed by its own CA
PATHS = ("/", "/info/main/workers.html", "/json/index.html", "/json/counts.json",
         "/metrics", "/health", "/sitemap.json", "/statics/")

async def attack_all():
    # Every target and way at once: a port that never answers costs one timeout in all.
    jobs = {}
    for host, port in targets:
        for scheme, security in (("tcp", None), ("tls", own)):
            address = f"{scheme}://{host}:{port}"
            jobs[(host, port, f"rpc {scheme}")] = rpc_attempt(address, security)
            jobs[(host, port, f"client {scheme}")] = client_attempt(address, security)
    results = await asyncio.gather(*jobs.values())
    return dict(zip(jobs, results))

found = asyncio.run(attack_all())
urls = {(host, port, f"{scheme} {path}"): f"{scheme}://{host}:{port}{path}"
        for host, port in targets for scheme in ("http", "https") for path in PATHS}
with ThreadPoolExecutor(16) as pool:
    found.update(zip(urls, pool.map(curl, urls.values())))
report = []
for host, port in targets:
    entry = {"host": host, "port": port}
    entry.update({key: value for (h, p, key), value in found.items() if (h, p) == (host, port)})
    report.append(entry)
print(json.dumps(report))
"""

#: A task that holds the run open until the test creates ``go``: sockets stay up.
HOLD = "touch {started}; while [ ! -e {go} ]; do sleep 0.1; done; echo done > {out}"


#: Where to reach a socket bound to every interface.
LOOPBACK = {"0.0.0.0": "127.0.0.1", "::": "::1"}  # noqa: S104

#: Answers that say nothing: no HTTP at all (000: a TLS port, refused, reset), errors.
BARE_ERRORS = frozenset({"000", "400", "403", "404", "405", "500"})

#: What an HTTP path may answer with 200: nothing about the run.
HARMLESS = {
    "/health": ("ok",),
    "/sitemap.json": ('{"paths": ["/health", "/sitemap.json"]}',),
}


def _wait_for(
    what: str, done: Callable[[], bool], proc: subprocess.Popen[str], timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(
                f"the victim's run ended before {what}: rc {proc.returncode}\n{out}\n{err}"[-4000:]
            )
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.1)


def process_tree(root_pid: int) -> set[int]:
    """``root_pid`` and every process below it."""
    root = psutil.Process(root_pid)
    return {root.pid} | {p.pid for p in root.children(recursive=True)}


def _listening(pids: set[int]) -> list[tuple[str, int, int]]:
    """Every (address, port, pid) that the processes ``pids`` listen on."""
    found = {
        (c.laddr.ip, c.laddr.port, c.pid)
        for c in psutil.net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN and c.pid in pids
    }
    return sorted(found)


def _named_unix_sockets(pids: set[int]) -> list[str]:
    """Unix sockets of ``pids`` with a name (a path, or an abstract name): ones that others
    could connect to. Unnamed socket pairs (the warm runner's) have none."""
    return sorted(
        str(c.laddr) for c in psutil.net_connections(kind="unix") if c.pid in pids and c.laddr
    )


def _attack(attacker: Account, sockets: list[tuple[str, int, int]], canary: Path) -> list[dict]:
    # (A socket bound to every interface is reached on loopback.)
    targets = [[LOOPBACK.get(host, host), port] for host, port, _ in sockets]
    done = attacker.run(
        [sys.executable, "-c", ATTACK, json.dumps(targets), str(canary)], timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: list[dict] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def _nothing_got_through(report: list[dict], canary: Path) -> None:
    """No Dask connection was accepted; HTTP gave nothing but ``/health``'s ``ok``."""
    for entry in report:
        where = f"{entry['host']}:{entry['port']}"
        for key, value in entry.items():
            if key.startswith(("rpc ", "client ")):
                assert value.startswith("refused"), (where, key, value)
            elif key.startswith(("http ", "https ")):
                if value["code"] == "200":
                    # /health's "ok", and Dask's list of routes (that one only), on loopback.
                    assert value["body"].strip() in HARMLESS.get(key.split()[1], ()), (
                        where, key, value,
                    )  # fmt: skip
                else:
                    # Refused, reset, not HTTP at all (a TLS port), or a bare error page.
                    assert value["code"] in {"000", "400", "403", "404", "405", "500"}, (
                        where,
                        key,
                        value,
                    )
                    for leak in ("worker", "tcp://", "tls://", "dask_", "Traceback"):
                        assert leak not in value["body"], (where, key, value)
    assert not canary.exists(), f"the attacker's function ran: {canary.read_text()}"


class HeldRun:
    """The victim's run in shared scratch, whose one task waits for ``go``."""

    def __init__(self, shared_dir: Path) -> None:
        self.folder = shared_dir / "victim"
        self.folder.mkdir(mode=0o755)  # the victim's own, like a user's folder
        self.started, self.go = self.folder / "started", self.folder / "go"
        self.canary = shared_dir / "canary"  # (on a cluster: where every node sees it)

    def shell(self, output: str) -> str:
        """The held task's shell command, ``output`` its output's placeholder."""
        return HOLD.format(started=self.started, go=self.go, out=output)

    def attack(
        self,
        attacker: Account,
        argv: list[str],
        env: dict[str, str],
        pids_of: Callable[[int], set[int]] = process_tree,
        *,
        minimum: int = 3,
        loopback_only: bool = True,
    ) -> list[tuple[str, int, int]]:
        """Start ``argv``; once the task runs, attack every socket of the processes
        ``pids_of(pid of argv)`` (at least ``minimum``); then let the run end. Returns
        the sockets attacked."""
        proc = subprocess.Popen(
            argv, cwd=self.folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True,
        )  # fmt: skip
        try:
            _wait_for("the held task to start", self.started.exists, proc, timeout=180)
            pids = pids_of(proc.pid)
            sockets = _listening(pids)
            # Locally: the scheduler, a nanny and a worker, each with a comm port and (not
            # the nanny) an HTTP port. None found: the test looked in the wrong place.
            assert len(sockets) >= minimum, sockets
            if loopback_only:
                assert all(host == "127.0.0.1" for host, _, _ in sockets), sockets
            assert _named_unix_sockets(pids) == []
            report = _attack(attacker, sockets, self.canary)
            assert [e["port"] for e in report] == [p for _, p, _ in sockets]
            _nothing_got_through(report, self.canary)
            for (bound, port, pid), entry in zip(sockets, report):
                if entry["http /health"]["code"] == "200":  # an HTTP server: loopback only
                    assert bound == "127.0.0.1", (bound, port, psutil.Process(pid).cmdline())
            self.go.touch()
            out, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, (out + err)[-4000:]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
        assert (self.folder / "held.txt").read_text() == "done\n"
        return sockets


def test_a_local_dask_run_takes_no_ones_code(
    other_account: Account, shared_dir: Path, env: dict[str, str]
) -> None:
    run = HeldRun(shared_dir)
    (run.folder / "workflow.yaml").write_text(
        "name: held\ntasks:\n  - name: hold\n"
        f"    command: {json.dumps(run.shell('{outputs}'))}\n    outputs: [held.txt]\n"
    )
    argv = [sys.executable, "-m", "hpcflow.cli.main", "run", "workflow.yaml", "-q"]
    run.attack(other_account, [*argv, "--engine", "dask", "--workers", "1"], env)


def test_the_snakemake_plugins_local_mode_takes_no_ones_code(
    other_account: Account, shared_dir: Path, env: dict[str, str]
) -> None:
    import snakemake  # noqa: F401  (a missing plugin dependency fails here, by name)

    from tests.snakemake.helpers import SNAKEMAKE, clean_env

    run = HeldRun(shared_dir)
    (run.folder / "Snakefile").write_text(
        'rule all:\n    input: "held.txt"\n\nrule hold:\n    output: "held.txt"\n'
        f"    shell: {json.dumps(run.shell('{output}'))}\n"
    )
    run.attack(other_account, [*SNAKEMAKE, "--executor", "hpcflow", "--jobs", "1"], clean_env(env))


def test_tls_files_planted_by_another_account_are_refused(
    other_account: Account, shared_dir: Path
) -> None:
    """Another account makes a run folder's ``tls/`` first (its own key, 0700/0600 and
    all): a pilot or elastic run there would hand its cluster to the key's holder."""
    run_dir = shared_dir / "run"
    planted = other_account.python(
        "from pathlib import Path; from hpcflow.transport.certificates import "
        f"create_credentials; create_credentials(Path({str(run_dir)!r}), 'planted')"
    )
    assert planted.returncode == 0, planted.stderr
    key = run_dir / "tls" / "key.pem"
    assert key.stat().st_uid == other_account.uid
    with pytest.raises(HpcflowError, match="is not yours"):
        create_credentials(run_dir, "mine")
    with pytest.raises(HpcflowError, match="is not yours"):
        security_for(run_dir, "tls")


# --- Static: what elastic worker jobs and pilots are told ---------------------------------


def _slurm(**fields: object) -> Profile:
    return Profile(name="site", backend="slurm", cpus_per_node=2, **fields)  # type: ignore[arg-type]


def _worker_script(profile: Profile) -> str:
    plan = plan_elastic(profile, Path("/scratch/run1"), "r1", Path("/wf"))
    jobqueue = import_jobqueue()
    job_cls = getattr(jobqueue, plan.cluster_class).job_cls
    kwargs = {k: v for k, v in plan.kwargs.items() if k != "scheduler_options"}
    return str(job_cls(scheduler="tls://10.0.0.1:8786", name="w0", **kwargs).job_script())


@pytest.mark.parametrize(
    ("backend", "interface"), [("slurm", None), ("slurm", "lo"), ("pbs", "lo")]
)
def test_elastic_worker_jobs_serve_no_http_beyond_loopback(
    backend: str, interface: str | None
) -> None:
    profile = Profile(name="site", backend=backend, cpus_per_node=2, interface=interface)
    script = _worker_script(profile)
    command = script.splitlines()[-1]
    assert "--no-dashboard --dashboard-address 127.0.0.1:0" in command, command
    assert "export DASK_DISTRIBUTED__WORKER__HTTP__ROUTES='[\"distributed.http.health\"]'" in (
        script
    ), script
    assert "0.0.0.0" not in script


def test_the_elastic_scheduler_serves_health_on_loopback_unless_the_dashboard_is_asked() -> None:
    off = plan_elastic(_slurm(interface="lo"), Path("/scratch/run1"), "r1", Path("/wf"))
    assert off.kwargs["scheduler_options"]["dashboard_address"] == "127.0.0.1:0"
    assert http_settings(dashboard=off.dashboard) == {
        "distributed.worker.http.routes": ["distributed.http.health"],
        "distributed.scheduler.http.routes": ["distributed.http.health"],
    }
    on = plan_elastic(
        _slurm(dashboard_address=":8788", interface="lo"), Path("/scratch/run1"), "r1", Path("/wf")
    )
    # One address (the interface's), never every interface.
    assert on.kwargs["scheduler_options"]["dashboard_address"] == "127.0.0.1:8788"
    with pytest.raises(ProfileError, match="every network interface"):
        plan_elastic(_slurm(dashboard_address="0.0.0.0:8788"), Path("/r"), "r1", Path("/wf"))


def test_a_pilots_http_servers_bind_loopback_or_one_address() -> None:
    from hpcflow.bootstrap.ranks import _dashboard_bind

    # No dashboard: loopback, with or without an interface (Dask would bind 0.0.0.0).
    assert _dashboard_bind(None, None, "lo") == "127.0.0.1:0"
    assert _dashboard_bind(None, "10.0.0.5", None) == "127.0.0.1:0"
    # Asked for: the profile's port on one address of the node.
    assert _dashboard_bind(":8787", "10.0.0.5", None) == "10.0.0.5:8787"
    assert _dashboard_bind(":8787", None, "lo") == "127.0.0.1:8787"
    assert dashboard_bind("127.0.0.1:0") == "127.0.0.1:0"
    with pytest.raises(ProfileError):
        _dashboard_bind("0.0.0.0:8787", None, "lo")
