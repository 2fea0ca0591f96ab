"""Start and stop the private local SLURM test cluster from Python.

This wraps ``slurm/start-cluster.sh`` and ``slurm/stop-cluster.sh`` (see those
scripts for what the cluster is: munged + slurmctld on the submit side (this process's
own namespaces) + N nodes ``n1..nN``, each in its own UTS, PID and mount namespaces with
its own hostname, /tmp and init, fake GPUs, partitions ``debug`` (default) and ``gpu``,
and a GlusterFS volume mounted at ``cluster.shared`` by a client of its own on the submit
side and in every node; all private to one directory and on non-default ports).

Files a job must see (scripts, run directories, outputs) belong under
``cluster.shared`` (``cluster.mkdtemp()``); this machine's /tmp is invisible to the
nodes. The repository and the running Python's prefix are passed with ``--share``, so
they stay visible even when they lie under /tmp.

It has no hpcflow imports on purpose, so it can be used from any test (or by
hand: ``python -m tests.slurm_cluster`` starts a cluster and prints how to use
it).

Typical use::

    cluster = start_cluster()            # raises SlurmUnavailable / SlurmClusterError
    try:
        subprocess.run(["sbatch", ...], env=cluster.env)
    finally:
        cluster.stop()

In pytest, use the session-scoped ``slurm_cluster`` fixture from
``tests/integration/slurm/conftest.py`` instead.

``start_cluster(accounting=True)`` also starts a private MariaDB and slurmdbd
so that ``sacct`` works (needs ``sudo bash slurm/install-deps.sh --accounting``;
the start takes a few seconds more).
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
SLURM_SCRIPTS = REPO_ROOT / "slurm"
START_SCRIPT = SLURM_SCRIPTS / "start-cluster.sh"
STOP_SCRIPT = SLURM_SCRIPTS / "stop-cluster.sh"

DEFAULT_PORT = 16817
#: Port blocks tried when no port is given: DEFAULT_PORT + k * PORT_STRIDE.
PORT_STRIDE = 100
PORT_TRIES = 40

#: Job states after which a job will not change any more.
FINAL_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "REVOKED",
        "SPECIAL_EXIT",
    }
)

HOW_TO_RUN = (
    "To run the SLURM integration tests: `sudo bash slurm/install-deps.sh`, then, as root, "
    "`HPCFLOW_REQUIRE_SLURM=1 python -m pytest tests/integration/slurm`."
)


class SlurmUnavailable(RuntimeError):
    """The machine cannot run the test cluster (not root, SLURM not installed...)."""


class SlurmClusterError(RuntimeError):
    """Starting (or using) the test cluster failed.

    ``log_tail`` holds the tail of the daemon logs (may be empty).
    """

    def __init__(self, message: str, log_tail: str = ""):
        super().__init__(message)
        self.log_tail = log_tail

    def __str__(self) -> str:
        msg = super().__str__()
        if self.log_tail and "==> " not in msg:
            msg += "\n" + self.log_tail
        return msg


def slurm_required() -> bool:
    """True if a missing/broken cluster must fail the tests rather than skip them.

    That is the case when ``CI=true`` or ``HPCFLOW_REQUIRE_SLURM=1``.
    """
    return (
        os.environ.get("CI", "").lower() == "true"
        or os.environ.get("HPCFLOW_REQUIRE_SLURM", "") == "1"
    )


#: Programs that ``start-cluster.sh --accounting`` needs on top of the basic ones.
ACCOUNTING_EXECUTABLES = ("slurmdbd", "mariadbd", "mariadb-install-db", "mariadb", "sacct")


#: Programs the nodes' namespaces need.
NODE_EXECUTABLES = ("unshare", "setsid", "mount", "umount", "hostname")
#: Programs the shared GlusterFS volume needs (``shared_fs="gluster"``).
GLUSTER_EXECUTABLES = ("glusterd", "gluster", "glusterfs", "mount.glusterfs")


def remove_in_background(folder: Path) -> None:
    """Remove ``folder`` without waiting: a cluster's folder holds its volume's brick
    (every file of every run on it, twice with GlusterFS's own links), whose removal took
    13 minutes on a loaded disk at the end of a suite. Renamed first, so that a new
    cluster never meets it; removed by a process of its own session."""
    trash = folder.with_name(f"{folder.name}.removing-{os.getpid()}")
    try:
        folder.rename(trash)
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        return
    subprocess.Popen(
        ["rm", "-rf", "--one-file-system", "--", str(trash)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip


def check_prerequisites(accounting: bool = False, shared_fs: str = "gluster") -> str | None:
    """Return why the cluster cannot be started here, or None if it can.

    ``accounting``: also check for what ``start_cluster(accounting=True)`` needs;
    ``shared_fs="gluster"``: for what the GlusterFS volume needs.
    """
    if not hasattr(os, "geteuid"):
        return "the local SLURM test cluster needs Linux"
    if os.geteuid() != 0:
        return "the local SLURM test cluster must be started as root"
    # The daemons are in /usr/sbin, which a non-login PATH may lack
    # (start-cluster.sh adds it).
    search = os.environ.get("PATH", "") + os.pathsep + "/usr/sbin"
    missing = [
        exe
        for exe in ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scontrol")
        if shutil.which(exe, path=search) is None
    ]
    if missing:
        return f"SLURM/munge not installed (missing: {', '.join(missing)})"
    missing = [exe for exe in NODE_EXECUTABLES if shutil.which(exe, path=search) is None]
    if missing:
        return f"util-linux tools for the nodes' namespaces missing: {', '.join(missing)}"
    if shared_fs == "gluster":
        missing = [exe for exe in GLUSTER_EXECUTABLES if shutil.which(exe, path=search) is None]
        if missing:
            return (
                f"GlusterFS not installed (missing: {', '.join(missing)}); "
                "run `sudo bash slurm/install-deps.sh`"
            )
        if not os.path.exists("/dev/fuse"):
            return "/dev/fuse is missing: the shared GlusterFS volume needs FUSE"
    if accounting:
        missing = [exe for exe in ACCOUNTING_EXECUTABLES if shutil.which(exe, path=search) is None]
        if missing:
            return (
                f"slurmdbd/MariaDB not installed (missing: {', '.join(missing)}); "
                "run `sudo bash slurm/install-deps.sh --accounting`"
            )
    if not START_SCRIPT.is_file() or not STOP_SCRIPT.is_file():
        return f"cluster scripts not found in {SLURM_SCRIPTS}"
    return None


def default_base_parent() -> str:
    """Where a cluster's base directory goes by default: the temporary directory, unless
    that is /tmp (or under it), which the nodes do not see: then /var/tmp."""
    parent = os.path.realpath(tempfile.gettempdir())
    if parent == "/tmp" or parent.startswith(("/tmp/", "/dev/shm")):
        parent = "/var/tmp"
    return parent


def read_shared_path(base: str | os.PathLike[str]) -> Path | None:
    """The shared path of the cluster in ``base`` (``HPCFLOW_SHARED`` of its env.sh)."""
    try:
        text = (Path(base) / "etc" / "shared-fs.env").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key == "SHARED" and value:
            return Path(value)
    return None


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def cluster_ports(port: int, nodes: int, accounting: bool = False) -> list:
    """All TCP ports a cluster on base port ``port`` listens on.

    With ``accounting``, slurmdbd listens on ``port + 2`` and MariaDB on ``port + 3``.
    """
    extra = [port + 2, port + 3] if accounting else []
    return [port] + extra + [port + 10 + i for i in range(1, nodes + 1)]


def find_free_port(nodes: int = 4, start: int = DEFAULT_PORT, accounting: bool = False) -> int:
    """First base port ``start + k * PORT_STRIDE`` whose ports are all free."""
    for k in range(PORT_TRIES):
        port = start + k * PORT_STRIDE
        if all(_port_free(p) for p in cluster_ports(port, nodes, accounting)):
            return port
    raise SlurmClusterError(
        f"no free port block found from {start} (stride {PORT_STRIDE}, {PORT_TRIES} tries)"
    )


def read_log_tail(base: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of each daemon log under ``base/log``."""
    log_dir = Path(base) / "log"
    if not log_dir.is_dir():
        return ""
    names = ["munged.log", "gluster-start.out", "glusterd.log", "mariadbd.log"]
    names += ["slurmdbd.log", "slurmctld.log"]
    names += sorted(p.name for p in log_dir.glob("node-*.log"))
    names += sorted(p.name for p in log_dir.glob("slurmd-*.log"))
    names += ["daemons.out"]
    parts = []
    for name in names:
        path = log_dir / name
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        if not text.strip():
            continue
        tail = "\n".join(text.splitlines()[-lines:])
        parts.append(f"==> {path} (last {lines} lines) <==\n{tail}")
    return "\n".join(parts)


@dataclass
class SlurmCluster:
    """A running private SLURM test cluster.

    ``env`` is a complete environment (a copy of ``os.environ`` at start plus
    ``extra_env``) to pass to client commands (``sbatch``, ``squeue``, ``qsub``
    ...) as ``subprocess.run(..., env=cluster.env)``; ``extra_env`` holds only
    the variables the cluster needs (``SLURM_CONF``, and ``HPCFLOW_SHARED``, the shared
    path), e.g. for ``monkeypatch.setenv``. ``accounting`` is True when the cluster runs
    slurmdbd (``sacct`` works). ``shared`` is the path every node and the submit side see
    (a GlusterFS volume, each side through its own client, unless ``shared_fs`` is
    ``"none"``); ``shared_from`` the base of the cluster whose volume this one mounts.
    """

    base: Path
    port: int
    nodes: int
    cpus: int
    gpus: int
    extra_env: dict[str, str]
    env: dict[str, str]
    remove_base: bool = True
    start_seconds: float = 0.0
    accounting: bool = False
    shared: Path | None = None
    shared_fs: str = "gluster"
    shared_from: Path | None = None
    _stopped: bool = field(default=False, repr=False)

    @property
    def node_names(self) -> list:
        return [f"n{i}" for i in range(1, self.nodes + 1)]

    @property
    def stopped(self) -> bool:
        return self._stopped

    def mkdtemp(self, prefix: str = "tmp-") -> Path:
        """A fresh folder on the shared file system (every node sees it at this path)."""
        if self.shared is None:
            raise SlurmClusterError(f"the cluster in {self.base} has no shared path")
        parent = self.shared / "tmp"
        parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))

    def run(
        self,
        args: Sequence[str],
        check: bool = True,
        timeout: float = 60,
        **kwargs,
    ) -> subprocess.CompletedProcess:
        """Run a client command against this cluster; text output is captured."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        env = dict(self.env)
        env.update(kwargs.pop("env", None) or {})
        proc = subprocess.run(list(args), env=env, timeout=timeout, **kwargs)
        if check and proc.returncode != 0:
            raise SlurmClusterError(
                f"command {list(args)} failed with exit code {proc.returncode}\n"
                f"stdout: {proc.stdout}\nstderr: {proc.stderr}"
            )
        return proc

    def job_state(self, job_id: str) -> str | None:
        """State of a job (e.g. ``PENDING``, ``COMPLETED``), None if unknown/purged.

        For a job array the first state listed is returned.
        """
        proc = self.run(["squeue", "-h", "-t", "all", "-j", str(job_id), "-o", "%T"], check=False)
        if proc.returncode != 0:
            return None
        states = proc.stdout.split()
        return states[0] if states else None

    def wait_for_job(self, job_id: str, timeout: float = 30, poll: float = 0.1) -> str:
        """Poll until the job reaches a final state and return that state.

        (``sbatch --wait`` polls with long intervals, so poll ourselves.)
        Raises ``SlurmClusterError`` on timeout or if the job is unknown.
        """
        deadline = time.monotonic() + timeout
        state = None
        while True:
            state = self.job_state(job_id)
            if state in FINAL_STATES:
                return state
            if time.monotonic() >= deadline:
                detail = self.run(["scontrol", "show", "job", str(job_id)], check=False)
                raise SlurmClusterError(
                    f"job {job_id} not finished after {timeout}s (state {state})\n"
                    f"{detail.stdout}{detail.stderr}",
                    self.log_tail(),
                )
            time.sleep(poll)

    def stop_controller(self) -> None:
        """Stop slurmctld (SIGTERM, wait until it is gone); the nodes and jobs go on."""
        pid = int((self.base / "run" / "slurmctld.pid").read_text().strip())
        os.kill(pid, 15)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
        raise SlurmClusterError(f"slurmctld (pid {pid}) did not stop within 60 s")

    def start_controller(self, timeout: float = 30) -> None:
        """Start slurmctld again (it recovers its jobs from its state files)."""
        conf = self.base / "etc" / "slurm.conf"
        with open(self.base / "log" / "daemons.out", "ab") as out:
            subprocess.run(
                ["slurmctld", "-f", str(conf)], stdin=subprocess.DEVNULL, stdout=out,
                stderr=out, env=self.env, check=True, timeout=timeout,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.run(["squeue", "-h"], check=False, timeout=10).returncode == 0:
                return
            time.sleep(0.2)
        raise SlurmClusterError("slurmctld did not answer after its restart", self.log_tail())

    def node_init_pid(self, node: str) -> int | None:
        """This machine's PID of ``node``'s init (PID 1 of its namespaces), None if the
        node is not running."""
        pid_file = self.base / "run" / f"node-{node}.pid"
        try:
            pid = int(pid_file.read_text().strip())
            with open(f"/proc/{pid}/comm") as comm:
                if comm.read().strip() != "node-init.sh":
                    return None
        except (OSError, ValueError):
            return None
        return pid

    def node_processes(self, node: str) -> list[int]:
        """This machine's PIDs of everything node ``node`` runs: its init, slurmd,
        slurmstepds, GlusterFS client and job processes (every live process in the
        node's PID namespace). Empty when the node is not running."""
        import psutil

        init = self.node_init_pid(node)
        if init is None:
            return []
        try:
            namespace = os.readlink(f"/proc/{init}/ns/pid")
        except OSError:
            return []
        found = []
        for pid in psutil.pids():
            try:
                if os.readlink(f"/proc/{pid}/ns/pid") != namespace:
                    continue
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    continue
            except (OSError, psutil.Error):
                continue
            found.append(pid)
        return sorted(found)

    def kill_node(self, node: str, rounds: int = 3, timeout: float = 30) -> list[int]:
        """Make node ``node`` die as a machine does: SIGKILL its init, and with it (the
        kernel ends a PID namespace with its PID 1) its slurmd, slurmstepds, GlusterFS
        client and every job process, all at once. Waits until they are gone and returns
        their PIDs. Bring it back with :meth:`start_node`. (``rounds`` is left from the
        one-kernel cluster, which had to repeat its kill; it is ignored.)"""
        import psutil

        del rounds
        pids = self.node_processes(node)
        init = self.node_init_pid(node)
        if init is None:
            return []
        try:
            os.kill(init, signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            alive = []
            for pid in pids:
                try:
                    if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                        alive.append(pid)
                except psutil.Error:
                    continue
            if not alive:
                return pids
            time.sleep(0.05)
        raise SlurmClusterError(f"processes of {node} still alive {timeout}s after the kill")

    def start_node(self, node: str, timeout: float = 60) -> None:
        """Start ``node`` again (new namespaces, mounts and slurmd, by
        ``BASE/etc/start-node.sh``) and wait until the controller calls it idle
        (ReturnToService=2 returns a DOWN node to service when it registers)."""
        proc = subprocess.run(
            ["bash", str(self.base / "etc" / "start-node.sh"), node, str(int(timeout))],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, env=self.env,
            timeout=timeout + 10,
        )  # fmt: skip
        if proc.returncode != 0:
            raise SlurmClusterError(
                f"starting {node} failed: {proc.stdout}{proc.stderr}", self.log_tail()
            )
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            state = self.node_state(node)
            if state == "idle":
                return
            time.sleep(0.2)
        raise SlurmClusterError(f"node {node} not idle after its restart ({state})")

    def node_state(self, node: str) -> str:
        """The node's state as ``sinfo`` prints it (``idle``, ``down*``, ``mixed`` ...)."""
        proc = self.run(["sinfo", "-h", "-n", node, "-o", "%T"], check=False, timeout=30)
        return proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else ""

    def log_tail(self, lines: int = 20) -> str:
        return read_log_tail(self.base, lines)

    def stop(self) -> None:
        """Cancel all jobs and stop every daemon (idempotent); remove ``base``
        unless it was kept (``keep=True`` or ``HPCFLOW_SLURM_KEEP=1``)."""
        if self._stopped:
            return
        self._stopped = True
        proc = subprocess.run(
            ["bash", str(STOP_SCRIPT), str(self.base)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if proc.returncode != 0:
            raise SlurmClusterError(
                f"stop-cluster.sh failed ({proc.returncode}): {proc.stdout}{proc.stderr}"
            )
        if self.remove_base:
            remove_in_background(self.base)

    def __enter__(self) -> SlurmCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_cluster(
    base: str | os.PathLike[str] | None = None,
    nodes: int = 4,
    cpus: int = 2,
    gpus: int = 2,
    gpu_nodes: int | None = None,
    gpu_type: str | None = None,
    port: int | None = None,
    min_job_age: int = 30,
    timeout: float = 30,
    keep: bool | None = None,
    accounting: bool = False,
    enforce_limits: bool = False,
    slurmd_timeout: int | None = None,
    shared_fs: str = "gluster",
    shared_from: SlurmCluster | str | os.PathLike[str] | None = None,
    shares: Sequence[str | os.PathLike[str]] | None = None,
) -> SlurmCluster:
    """Start a private cluster and wait until all its nodes are idle.

    ``base``: directory for all its files (default: a new temporary directory,
    removed again by ``stop()``). ``port``: slurmctld port (default: the first
    free block from 16817 on, in steps of 100; node i listens on port+10+i).
    ``keep``: keep ``base`` after ``stop()`` (default: ``HPCFLOW_SLURM_KEEP=1``).
    ``accounting``: also run MariaDB + slurmdbd so that ``sacct`` works (ports
    port+2 and port+3 as well; ``timeout`` then covers their start too).
    ``enforce_limits`` (with ``accounting``): QOS and association limits apply, and
    the calling user has an association, so ``sacctmgr`` limits can be tested.
    ``gpu_nodes``: only the last ``gpu_nodes`` nodes have GPUs (partition ``gpu``; the
    others make partition ``cpu``); default: every node. ``gpu_type``: their kind (the
    gres type, ``--gres=gpu:TYPE:N``); default: none.
    ``slurmd_timeout``: SlurmdTimeout in seconds (SLURM's default 300 when None): how
    soon a node whose slurmd died is marked DOWN.
    ``shared_fs``: ``"gluster"`` (a GlusterFS volume of its own at ``BASE/shared``, or
    the one of ``shared_from``, a running cluster or its base: several clusters then see
    the same files at the same path) or ``"none"`` (a plain folder).
    ``shares``: paths the nodes must see although they lie under /tmp (default: the
    repository and ``sys.prefix``; paths elsewhere are visible anyway).

    Raises ``SlurmUnavailable`` if this machine cannot run it and
    ``SlurmClusterError`` (with the daemon log tail) if the start failed.
    """
    reason = check_prerequisites(accounting, shared_fs)
    if reason:
        raise SlurmUnavailable(reason)
    if keep is None:
        keep = os.environ.get("HPCFLOW_SLURM_KEEP", "") == "1"
    if shares is None:
        shares = [REPO_ROOT, sys.prefix]
    from_base: Path | None = None
    if shared_from is not None:
        from_base = Path(
            shared_from.base if isinstance(shared_from, SlurmCluster) else shared_from
        ).resolve()

    made_base = base is None
    if base is None:
        base_path = Path(tempfile.mkdtemp(prefix="hpcflow-slurm-", dir=default_base_parent()))
    else:
        base_path = Path(base)
        base_path.mkdir(parents=True, exist_ok=True)
    base_path = base_path.resolve()

    attempts = 3 if port is None else 1
    last_error = ""
    for attempt in range(attempts):
        use_port = (
            port
            if port is not None
            else find_free_port(nodes, DEFAULT_PORT + attempt * PORT_STRIDE, accounting)
        )
        cmd = [
            "bash", str(START_SCRIPT), str(base_path),
            "--nodes", str(nodes),
            "--cpus", str(cpus),
            "--gpus", str(gpus),
            "--port", str(use_port),
            "--min-job-age", str(min_job_age),
            "--timeout", str(int(timeout)),
        ]  # fmt: skip
        if slurmd_timeout is not None:
            cmd += ["--slurmd-timeout", str(int(slurmd_timeout))]
        if gpu_nodes is not None:
            cmd += ["--gpu-nodes", str(int(gpu_nodes))]
        if gpu_type is not None:
            cmd += ["--gpu-type", gpu_type]
        cmd += ["--shared-fs", shared_fs]
        if from_base is not None:
            cmd += ["--shared-from", str(from_base)]
        for path in shares:
            if Path(path).exists():
                cmd += ["--share", str(path)]
        if accounting:
            cmd.append("--accounting")
            if enforce_limits:
                cmd.append("--enforce-limits")
        t0 = time.monotonic()
        try:
            proc = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=timeout + 60,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            subprocess.run(["bash", str(STOP_SCRIPT), str(base_path)], capture_output=True)
            raise SlurmClusterError(
                f"start-cluster.sh did not return within {timeout + 60}s",
                read_log_tail(base_path),
            )
        elapsed = time.monotonic() - t0
        if proc.returncode == 0:
            shared = read_shared_path(base_path)
            extra_env = {"SLURM_CONF": str(base_path / "etc" / "slurm.conf")}
            if shared is not None:
                extra_env["HPCFLOW_SHARED"] = str(shared)
            env = dict(os.environ)
            env.update(extra_env)
            cluster = SlurmCluster(
                base=base_path,
                port=use_port,
                nodes=nodes,
                cpus=cpus,
                gpus=gpus,
                extra_env=extra_env,
                env=env,
                remove_base=made_base and not keep,
                start_seconds=elapsed,
                accounting=accounting,
                shared=shared,
                shared_fs=shared_fs,
                shared_from=from_base,
            )
            atexit.register(_stop_quietly, cluster)
            return cluster
        last_error = (proc.stderr or proc.stdout).strip()
        # Port taken between our check and the daemons' bind: try the next block.
        if port is None and "already in use" in last_error:
            continue
        break

    if made_base and not keep:
        log_tail = read_log_tail(base_path)
        shutil.rmtree(base_path, ignore_errors=True)
    else:
        log_tail = read_log_tail(base_path)
    raise SlurmClusterError(
        f"starting the SLURM test cluster in {base_path} failed:\n{last_error}", log_tail
    )


#: The cluster whose GlusterFS volume ``start_test_cluster`` mounts in the clusters it
#: starts (unless told ``shared_from``): one shared path for all clusters of a test
#: session, so a test's folder there (its ``tmp_path``) is seen by whichever cluster it
#: starts. Set by ``tests/integration/slurm/conftest.py`` for its session cluster.
_shared_volume: SlurmCluster | None = None


def set_shared_volume(cluster: SlurmCluster | None) -> None:
    """Let clusters started by ``start_test_cluster`` mount ``cluster``'s volume."""
    global _shared_volume
    _shared_volume = cluster


def start_test_cluster(why: str = "", **options: Any) -> SlurmCluster:
    """``start_cluster(**options)`` for a test: a cluster, or the test is skipped saying
    why, or failed when a cluster is required (``CI=true``, ``HPCFLOW_REQUIRE_SLURM=1``).

    ``why`` names what the test needs beyond a plain cluster (e.g. "with accounting").
    Unless ``shared_from`` or ``shared_fs`` is given, the cluster mounts the volume of
    the session's cluster (:func:`set_shared_volume`), when there is one.
    """
    import pytest

    owner = _shared_volume
    if (
        "shared_from" not in options
        and options.get("shared_fs", "gluster") == "gluster"
        and owner is not None
        and not owner.stopped
        and owner.shared_fs == "gluster"
    ):
        options["shared_from"] = owner.shared_from or owner.base
    try:
        return start_cluster(**options)
    except (SlurmUnavailable, SlurmClusterError) as exc:
        what = f"SLURM test cluster{' ' + why if why else ''}"
        if slurm_required():
            pytest.fail(
                f"{what} required (CI=true or HPCFLOW_REQUIRE_SLURM=1) "
                f"but could not be started: {exc}",
                pytrace=False,
            )
        pytest.skip(f"{what} not available: {exc}. {HOW_TO_RUN}")


def _stop_quietly(cluster: SlurmCluster) -> None:
    try:
        cluster.stop()
    except Exception:  # pragma: no cover - best effort at interpreter exit
        pass


if __name__ == "__main__":  # pragma: no cover - manual use
    import sys

    c = start_cluster(keep=True)
    print(f"cluster up in {c.start_seconds:.2f}s in {c.base}")
    print(f"  source {c.base}/env.sh")
    print(f"  shared file system ({c.shared_fs}) at {c.shared}")
    print(f"  bash {STOP_SCRIPT} {c.base}   # to stop it")
    c._stopped = True  # leave it running
    sys.exit(0)
