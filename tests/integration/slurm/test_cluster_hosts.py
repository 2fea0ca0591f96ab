"""The test cluster's nodes are separate hosts on a real shared file system.

Each node of ``slurm/start-cluster.sh`` runs in UTS, PID and mount namespaces of its own
(hostname ``nI``, a private /tmp, its own init as PID 1), and the shared path is a
GlusterFS volume that the submit side (this process) and every node mount through
clients of their own. These tests prove it with real jobs, as a program running on a
real cluster would see it.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from tests.slurm_cluster import REPO_ROOT, start_test_cluster

pytestmark = pytest.mark.slurm


def on_node(cluster, node: str, script: str, cwd: Path, timeout: float = 60) -> str:
    """Run ``script`` (bash) as a job step on ``node``; its standard output."""
    proc = cluster.run(
        ["srun", "-N1", "-n1", "-w", node, "bash", "-c", script], cwd=cwd, timeout=timeout
    )
    return proc.stdout


def mount_of(path: Path, mountinfo: str) -> tuple[str, str]:
    """(device, file system type) of the mount at ``path`` in a /proc/PID/mountinfo text."""
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) > 4 and fields[4] == str(path):
            return fields[2], right.split()[0]
    raise AssertionError(f"{path} is not a mount point in:\n{mountinfo}")


def gluster_clients(mount_point: Path) -> set[int]:
    """This machine's PIDs of the GlusterFS client processes serving ``mount_point``."""
    found = set()
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if proc.info["name"] == "glusterfs" and cmdline and cmdline[-1] == str(mount_point):
            found.add(proc.pid)
    return found


def test_nodes_have_their_own_hostnames(slurm_cluster, tmp_path):
    submit_host = socket.gethostname()
    proc = slurm_cluster.run(
        ["srun", "-N2", "-n2", "-w", "n1,n2", "bash", "-c",
         f'echo "$SLURM_PROCID $SLURMD_NODENAME $(hostname) '
         f"$({sys.executable} -c 'import socket; print(socket.gethostname())')\""],
        cwd=tmp_path, timeout=60,
    )  # fmt: skip
    rows = sorted(line.split() for line in proc.stdout.splitlines() if line.strip())
    assert [row[0] for row in rows] == ["0", "1"], proc.stdout
    for _, node, hostname, python_hostname in rows:
        assert node == hostname == python_hostname, rows
    assert {row[1] for row in rows} == {"n1", "n2"}
    assert submit_host not in {"n1", "n2"}
    # The nodes resolve each other and the submit host (the submit side does not
    # resolve node names).
    out = on_node(slurm_cluster, "n1", f"getent hosts n2 {submit_host}", tmp_path)
    names = {line.split()[1] for line in out.splitlines() if line.strip()}
    assert names == {"n2", submit_host}, out


def test_nodes_have_their_own_boot_ids(slurm_cluster, tmp_path):
    # Two machines never share a boot id; UCX and ProcessIdentity tell hosts apart by it.
    ours = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    ids = {
        node: on_node(slurm_cluster, node, "cat /proc/sys/kernel/random/boot_id", tmp_path).strip()
        for node in ("n1", "n2")
    }
    assert all(len(value) == 36 for value in ids.values()), ids
    assert len({ours, *ids.values()}) == 3, (ours, ids)
    # ... and a node keeps its own for as long as it is up.
    assert (
        on_node(slurm_cluster, "n1", "cat /proc/sys/kernel/random/boot_id", tmp_path).strip()
        == ids["n1"]
    )


def test_tmp_is_private_to_each_host(slurm_cluster, tmp_path):
    marker = f"/tmp/hpcflow-hosts-{uuid.uuid4().hex}"
    made = on_node(
        slurm_cluster, "n1", f"touch {marker} && test -e {marker} && echo made", tmp_path
    )
    assert made.strip() == "made"
    try:
        probe = f"if test -e {marker}; then echo present; else echo absent; fi"
        assert on_node(slurm_cluster, "n2", probe, tmp_path).strip() == "absent"
        assert not os.path.exists(marker)
        # A host's /tmp outlives a job on it.
        assert on_node(slurm_cluster, "n1", probe, tmp_path).strip() == "present"
    finally:
        on_node(slurm_cluster, "n1", f"rm -f {marker}", tmp_path)
    # The software stays visible to the nodes (bound in with --share when under /tmp).
    out = on_node(
        slurm_cluster, "n2",
        f"test -e {REPO_ROOT / 'pyproject.toml'} && {sys.executable} -c 'print(\"python ok\")'",
        tmp_path,
    )  # fmt: skip
    assert out.strip() == "python ok"


def test_a_job_lives_in_its_nodes_pid_namespace(slurm_cluster, tmp_path):
    out = on_node(
        slurm_cluster, "n1",
        "tr '\\0' ' ' < /proc/1/cmdline; echo; readlink /proc/self/ns/pid /proc/self/ns/uts "
        "/proc/self/ns/mnt",
        tmp_path,
    )  # fmt: skip
    init_cmdline, pid_ns, uts_ns, mnt_ns = out.splitlines()
    # PID 1 of the job's world is the node's init, not this machine's.
    assert "node-init.sh n1" in init_cmdline
    assert "node-init.sh" not in Path("/proc/1/cmdline").read_text()
    assert pid_ns != os.readlink("/proc/self/ns/pid")
    assert uts_ns != os.readlink("/proc/self/ns/uts")
    assert mnt_ns != os.readlink("/proc/self/ns/mnt")

    # A PID a job reports is a PID on its node: here it names another process or none.
    pid_file = tmp_path / "job.pid"
    proc = slurm_cluster.run(
        ["sbatch", "--parsable", "-w", "n1", "-o", str(tmp_path / "job.out"), "--wrap",
         f"echo $$ > {pid_file}.part && mv {pid_file}.part {pid_file}; exec sleep 60"],
        cwd=tmp_path,
    )  # fmt: skip
    job_id = proc.stdout.strip().split(";")[0]
    try:
        deadline = time.monotonic() + 30
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        node_pid = int(pid_file.read_text())
        # Find the job's process on this machine: in n1's PID namespace, with that PID
        # there (the last NSpid entry).
        machine_pid = None
        for pid in slurm_cluster.node_processes("n1"):
            try:
                status = Path(f"/proc/{pid}/status").read_text()
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            nspid = next(
                line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")
            )
            if int(nspid[-1]) == node_pid and b"sleep" in cmdline:
                machine_pid = pid
        assert machine_pid is not None, f"no process of n1 has PID {node_pid} there"
        assert machine_pid != node_pid
        try:
            here = Path(f"/proc/{node_pid}/cmdline").read_bytes()
        except OSError:
            here = b""  # no such process on the submit side
        assert b"sleep\x0060" not in here
    finally:
        slurm_cluster.run(["scancel", job_id], check=False)


def test_shared_path_is_one_file_system_through_separate_clients(slurm_cluster, tmp_path):
    shared = slurm_cluster.shared
    assert shared is not None and slurm_cluster.shared_fs == "gluster"
    assert tmp_path.is_relative_to(shared)
    target = tmp_path / "from-n2.txt"
    out = on_node(
        slurm_cluster, "n2",
        f'echo "written on $(hostname)" > {target}; cat /proc/self/mountinfo',
        tmp_path,
    )  # fmt: skip
    # Written on n2, read back on the submit side and on n1.
    assert target.read_text() == "written on n2\n"
    assert on_node(slurm_cluster, "n1", f"cat {target}", tmp_path) == "written on n2\n"
    # Both sides mount GlusterFS there, but each its own mount (another device: another
    # FUSE connection) ...
    node_dev, node_fs = mount_of(shared, out)
    submit_dev, submit_fs = mount_of(shared, Path("/proc/self/mountinfo").read_text())
    assert node_fs == submit_fs == "fuse.glusterfs"
    assert node_dev != submit_dev
    # ... served by its own client process: one in n2's PID namespace, one outside any
    # node.
    clients = gluster_clients(shared)
    n2_clients = clients & set(slurm_cluster.node_processes("n2"))
    all_node_processes = set()
    for node in slurm_cluster.node_names:
        all_node_processes |= set(slurm_cluster.node_processes(node))
    submit_clients = clients - all_node_processes
    assert len(n2_clients) == 1, clients
    assert submit_clients, clients
    assert not n2_clients & submit_clients


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_killed_node_dies_whole_and_comes_back(slurm_cluster, tmp_path):
    """kill_node is a machine dying: everything of the node ends at once, its /tmp is
    gone; the rest of the cluster (and the shared volume) goes on; start_node brings it
    back. On a private cluster that mounts the session's volume."""
    cluster = start_test_cluster(nodes=2, cpus=1, gpus=0)
    try:
        assert cluster.shared == slurm_cluster.shared
        started = tmp_path / "started"
        proc = cluster.run(
            ["sbatch", "--parsable", "--no-requeue", "-w", "n2", "-o", str(tmp_path / "long.out"),
             "--wrap",
             f"touch /tmp/n2-was-here; touch {started}; exec sleep 300"],
            cwd=tmp_path,
        )  # fmt: skip
        job_id = proc.stdout.strip().split(";")[0]
        deadline = time.monotonic() + 30
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert started.exists(), (tmp_path / "long.out").read_text()
        before = cluster.node_processes("n2")
        names = set()
        for pid in before:
            try:
                names.add(psutil.Process(pid).name())
            except psutil.Error:
                pass
        assert {"node-init.sh", "slurmd", "slurmstepd", "glusterfs", "sleep"} <= names, names
        killed = cluster.kill_node("n2")
        assert set(killed) == set(before)
        # Ended: gone, or a zombie its parent outside the node has not reaped yet (on a
        # busy machine that can take a moment; a zombie runs nothing).
        assert not [pid for pid in killed if _running(pid)]
        assert cluster.node_processes("n2") == []
        # The survivors and the shared volume are unaffected.
        after = tmp_path / "after-kill.txt"
        out = on_node(cluster, "n1", f"echo fine > {after}; cat {after}", tmp_path)
        assert out == "fine\n" and after.read_text() == "fine\n"
        # The machine does not come back on its own: as an administrator would, mark it
        # down (its job fails), then start it (ReturnToService=2 returns it to service).
        cluster.run(["scontrol", "update", "nodename=n2", "state=down", "reason=killed"])
        assert cluster.wait_for_job(job_id) == "NODE_FAIL"
        cluster.start_node("n2")
        out = on_node(
            cluster, "n2",
            f"cat {after}; if test -e /tmp/n2-was-here; then echo kept; else echo gone; fi",
            tmp_path,
        )  # fmt: skip
        assert out.splitlines() == ["fine", "gone"]
    finally:
        cluster.stop()
