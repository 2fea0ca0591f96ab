"""Smoke tests of the private local SLURM test cluster itself.

They check what hpcflow's SLURM/PBS tests rely on: nodes and partitions,
batch jobs, multi-node placement, fake GPUs, MPI through srun (PMIx) and
mpirun, and the PBS ``qsub`` front end of slurm-wlm-torque. (That the nodes are
separate hosts on a shared file system: test_cluster_hosts.py.) ``tmp_path`` lies
on the shared volume (conftest.py), so the jobs see it.
"""

import importlib.util
import shutil
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slurm


def submit(cluster, args, cwd):
    """``sbatch --parsable`` and return the job id."""
    proc = cluster.run(["sbatch", "--parsable", *args], cwd=cwd)
    job_id = proc.stdout.strip().split(";")[0]
    assert job_id.isdigit(), proc.stdout
    return job_id


def run_job(cluster, args, cwd, timeout=30):
    job_id = submit(cluster, args, cwd)
    state = cluster.wait_for_job(job_id, timeout=timeout)
    return job_id, state


def test_sinfo_nodes_and_partitions(slurm_cluster):
    out = slurm_cluster.run(["sinfo", "-h", "-N", "-o", "%N %R %T"]).stdout
    rows = [line.split() for line in out.splitlines() if line.strip()]
    by_part = {}
    for node, part, state in rows:
        by_part.setdefault(part, set()).add(node)
        assert not any(bad in state for bad in ("down", "drain", "inval", "fail")), rows
    expected = {f"n{i}" for i in range(1, 5)}
    assert by_part == {"debug": expected, "gpu": expected}
    default = slurm_cluster.run(["sinfo", "-h", "-o", "%P"]).stdout.split()
    assert "debug*" in default


def test_sbatch_job_writes_file(slurm_cluster, tmp_path):
    target = tmp_path / "result.txt"
    job_id, state = run_job(
        slurm_cluster,
        ["-J", "smoke", "-o", str(tmp_path / "out.%j"),
         "--wrap", f'echo "job $SLURM_JOB_ID on $SLURMD_NODENAME" > {target}'],
        cwd=tmp_path,
    )  # fmt: skip
    assert state == "COMPLETED"
    assert target.read_text().startswith(f"job {job_id} on n")
    # The finished job stays queryable for a while (MinJobAge).
    info = slurm_cluster.run(["scontrol", "show", "job", job_id]).stdout
    assert "JobState=COMPLETED" in info and "ExitCode=0:0" in info


def test_failing_job_state(slurm_cluster, tmp_path):
    job_id, state = run_job(slurm_cluster, ["-o", "/dev/null", "--wrap", "exit 3"], cwd=tmp_path)
    assert state == "FAILED"
    info = slurm_cluster.run(["scontrol", "show", "job", job_id]).stdout
    assert "ExitCode=3:0" in info


def test_multinode_placement(slurm_cluster, tmp_path):
    out = tmp_path / "placement.out"
    _, state = run_job(
        slurm_cluster,
        ["-N", "3", "--ntasks-per-node=1", "-o", str(out),
         "--wrap", "srun bash -c 'echo $SLURM_PROCID $SLURMD_NODENAME'"],
        cwd=tmp_path,
    )  # fmt: skip
    assert state == "COMPLETED", out.read_text()
    rows = sorted(line.split() for line in out.read_text().splitlines() if line.strip())
    assert [r[0] for r in rows] == ["0", "1", "2"]
    assert len({r[1] for r in rows}) == 3


def test_gpu_gres(slurm_cluster, tmp_path):
    out = tmp_path / "gpu.out"
    _, state = run_job(
        slurm_cluster,
        ["-p", "gpu", "--gres=gpu:2", "-o", str(out),
         "--wrap", 'echo "CVD=$CUDA_VISIBLE_DEVICES"'],
        cwd=tmp_path,
    )  # fmt: skip
    assert state == "COMPLETED"
    assert out.read_text().strip() == "CVD=0,1"
    # More GPUs than a node has is rejected at submission.
    proc = slurm_cluster.run(
        ["sbatch", "-p", "gpu", "--gres=gpu:3", "--wrap", "true"], check=False, cwd=tmp_path
    )
    assert proc.returncode != 0
    assert "Requested node configuration is not available" in proc.stderr


def test_srun_task_ids(slurm_cluster, tmp_path):
    proc = slurm_cluster.run(
        ["srun", "-n", "4", "-N", "2", "bash", "-c",
         "echo $SLURM_PROCID $SLURM_NTASKS $SLURMD_NODENAME"],
        cwd=tmp_path, timeout=30,
    )  # fmt: skip
    rows = sorted(line.split() for line in proc.stdout.splitlines() if line.strip())
    assert [r[0] for r in rows] == ["0", "1", "2", "3"]
    assert {r[1] for r in rows} == {"4"}
    assert len({r[2] for r in rows}) == 2


MPI_HELLO_C = textwrap.dedent(
    """\
    #include <mpi.h>
    #include <stdio.h>
    int main(int argc, char **argv) {
        int rank, size, one = 1, sum = 0;
        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        printf("rank %d size %d sum %d\\n", rank, size, sum);
        MPI_Finalize();
        return 0;
    }
    """
)


@pytest.fixture(scope="module")
def mpi_hello(slurm_cluster):
    """A compiled MPI hello world on the shared volume, where the nodes find it (skips if
    mpicc is not there)."""
    if shutil.which("mpicc") is None:
        pytest.skip("mpicc not found (libopenmpi-dev); run slurm/install-deps.sh")
    d = slurm_cluster.mkdtemp("mpi-")
    (d / "hello.c").write_text(MPI_HELLO_C)
    subprocess.run(["mpicc", "-o", str(d / "hello"), str(d / "hello.c")], check=True, timeout=120)
    return d / "hello"


def _check_mpi_output(text, n):
    rows = sorted(line for line in text.splitlines() if line.startswith("rank "))
    assert rows == [f"rank {i} size {n} sum {n}" for i in range(n)], text


def test_srun_mpi_pmix(slurm_cluster, mpi_hello, tmp_path):
    proc = slurm_cluster.run(
        ["srun", "-n", "4", "-N", "2", "--mpi=pmix", str(mpi_hello)],
        cwd=tmp_path, timeout=60,
    )  # fmt: skip
    _check_mpi_output(proc.stdout, 4)


def test_mpirun_in_batch_job(slurm_cluster, mpi_hello, tmp_path):
    out = tmp_path / "mpirun.out"
    _, state = run_job(
        slurm_cluster,
        ["-N", "2", "-n", "4", "-o", str(out), "--wrap", f"mpirun {mpi_hello}"],
        cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert state == "COMPLETED", out.read_text()
    _check_mpi_output(out.read_text(), 4)


def test_srun_mpi4py(slurm_cluster, tmp_path):
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip("mpi4py not importable in this Python")
    code = (
        "from mpi4py import MPI; c = MPI.COMM_WORLD; "
        "print('rank', c.Get_rank(), 'size', c.Get_size(), 'sum', c.allreduce(1))"
    )
    proc = slurm_cluster.run(
        ["srun", "-n", "4", "-N", "2", "--mpi=pmix", sys.executable, "-c", code],
        cwd=tmp_path, timeout=60,
    )  # fmt: skip
    _check_mpi_output(proc.stdout, 4)


def test_qsub_pbs_front_end(slurm_cluster, tmp_path):
    if shutil.which("qsub") is None:
        pytest.skip("qsub not found (slurm-wlm-torque); run slurm/install-deps.sh")
    script = tmp_path / "job.pbs"
    script.write_text(
        "#!/bin/bash\n"
        "#PBS -N pbs_smoke\n"
        "#PBS -l nodes=1:ppn=2\n"
        'echo "pbs job $SLURM_JOB_ID cpus $SLURM_CPUS_ON_NODE"\n'
    )
    # #PBS -o/-e in the script are overridden by the wrapper: pass them here.
    out, err = tmp_path / "pbs.out", tmp_path / "pbs.err"
    proc = slurm_cluster.run(["qsub", "-o", str(out), "-e", str(err), str(script)], cwd=tmp_path)
    job_id = proc.stdout.strip()
    assert job_id.isdigit(), proc.stdout  # bare id, no ".server" suffix
    assert slurm_cluster.wait_for_job(job_id) == "COMPLETED"
    assert out.read_text().strip() == f"pbs job {job_id} cpus 2"
    info = slurm_cluster.run(["scontrol", "show", "job", job_id]).stdout
    assert "JobName=pbs_smoke" in info and "NumCPUs=2" in info
    qstat = slurm_cluster.run(["qstat"]).stdout
    assert any(line.split()[:1] == [job_id] and " C " in line for line in qstat.splitlines()), qstat
