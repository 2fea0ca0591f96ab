"""Tasks in software environments on the real test SLURM cluster, where every node is its
own host (network and mount namespace, GlusterFS client): an MPI task whose ranks each
start in a Charliecloud image on two nodes (``srun ... ch-run IMAGE -- prog``), a real
mpi4py allreduce inside an image with the host's MPI mounted in, and the same
environments in jobs and elastic mode (modules, a container, a python task inside one)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import write_workflow
from tests.e2e.software_images import busybox_rootfs, lmod_tree, python_rootfs
from tests.integration.slurm.conftest import run_logs

pytestmark = pytest.mark.slurm


def test_an_mpi_task_starts_one_container_per_rank_on_two_nodes(tmp_path, hpcflow_slurm):
    busybox_rootfs(tmp_path / "image", "ranks", [str(tmp_path)])
    wf = write_workflow(
        tmp_path,
        """
name: mpi-container
tasks:
  - name: ranks
    resources: {ranks: 4, nodes: 2}
    container: {image: image, runtime: charliecloud}
    command: >-
      echo "$(cat /hpcflow-image) $SLURMD_NODENAME" > "rank_${SLURM_PROCID}.txt"
""",
    )
    result = hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "--nodes", "3", "-q")
    assert result.returncode == 0, result.output + run_logs(tmp_path)
    lines = [(tmp_path / f"rank_{r}.txt").read_text().split() for r in range(4)]
    assert {image for image, _ in lines} == {"ranks"}
    assert len({node for _, node in lines}) == 2, lines


STEPS = """
def inside(tag):
    with open("/hpcflow-image") as f:
        return tag + ":" + f.read().strip()
"""


@pytest.mark.parametrize("mode", ["jobs", "elastic"])
def test_environments_in_jobs_and_elastic_mode(tmp_path, hpcflow_slurm, mode):
    busybox_rootfs(tmp_path / "images" / "a", "a", [str(tmp_path)])
    rootfs, prefix = python_rootfs(tmp_path / "images" / "py", "py", [str(tmp_path)])
    modulepath = lmod_tree(tmp_path / "lmod")
    (tmp_path / "steps.py").write_text(textwrap.dedent(STEPS))
    wf = write_workflow(
        tmp_path,
        f"""
name: envs-{mode}
tasks:
  - name: in_a
    container: {{image: images/a, runtime: charliecloud}}
    command: cat /hpcflow-image > a.txt && echo "$SLURMD_NODENAME" >> a.txt
    outputs: [a.txt]
  - name: with_module
    modules: [hpctool/1.0]
    env: {{MODULEPATH: {modulepath}}}
    command: hpctool > m.txt
    outputs: [m.txt]
  - name: py
    container: {{image: images/py, runtime: charliecloud, binds: [{prefix}],
                 python: {prefix}/bin/python3}}
    params: {{tag: {mode}}}
    python: steps:inside
""",
    )
    result = hpcflow_slurm(
        "run", str(wf), "--profile", "slurm-test", "--mode", mode, "-q", timeout=300
    )
    assert result.returncode == 0, result.output + run_logs(tmp_path)
    image, node = (tmp_path / "a.txt").read_text().split()
    assert image == "a" and node.startswith("n"), node
    assert (tmp_path / "m.txt").read_text() == "hpctool 1.0\n"
    import hpcflow

    run_dir = next((tmp_path / ".hpcflow" / "runs").iterdir())
    assert hpcflow.load_result(run_dir, "py") == f"{mode}:py"


def test_mpi4py_allreduce_inside_an_image_with_the_host_mpi_mounted(tmp_path, hpcflow_slurm):
    """The hybrid model sites use for MPI in containers: the image brings the program,
    the host's MPI libraries are mounted in, srun starts one container per rank."""
    venv = Path(sys.prefix)
    rootfs, prefix = python_rootfs(tmp_path / "image", "mpi", [str(tmp_path), str(venv)])
    host = ["/usr/lib/x86_64-linux-gnu", "/etc/openmpi", "/usr/share/openmpi"]
    for folder in host:
        (rootfs / folder.lstrip("/")).mkdir(parents=True, exist_ok=True)
    (tmp_path / "allreduce.py").write_text(
        "import os\nfrom mpi4py import MPI\ncomm = MPI.COMM_WORLD\n"
        "total = comm.allreduce(comm.Get_rank() + 1)\n"
        "nodes = comm.gather(os.environ['SLURMD_NODENAME'])\n"
        "marker = open('/hpcflow-image').read().strip()\n"
        "if comm.Get_rank() == 0:\n"
        "    open('allreduce.txt', 'w').write(f'{comm.Get_size()} {total} "
        "{len(set(nodes))} {marker}')\n"
    )
    binds = ", ".join([prefix, str(venv), *host])
    wf = write_workflow(
        tmp_path,
        f"""
name: mpi4py-container
tasks:
  - name: allreduce
    resources: {{ranks: 4, nodes: 2}}
    container: {{image: image, runtime: charliecloud, binds: [{binds}]}}
    argv: [{venv}/bin/python, allreduce.py]
    outputs: [allreduce.txt]
""",
    )
    result = hpcflow_slurm("run", str(wf), "--profile", "slurm-test", "--nodes", "3", "-q")
    assert result.returncode == 0, result.output + run_logs(tmp_path)
    assert (tmp_path / "allreduce.txt").read_text() == "4 10 2 mpi"
