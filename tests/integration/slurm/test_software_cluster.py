"""Tasks in software environments on the real test SLURM cluster, where every node is its
own host (network and mount namespace, GlusterFS client): an MPI task whose ranks each
start in a Charliecloud image on two nodes (``srun ... ch-run IMAGE -- prog``), a real
mpi4py allreduce inside an image with the host's MPI mounted in, the same
environments in jobs and elastic mode (modules, a container, a python task inside one),
and modules loaded on the nodes with Environment Modules (the profile's modules_init)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import write_workflow
from tests.e2e.software_images import (
    ENVIRONMENT_MODULES,
    ENVIRONMENT_MODULES_INIT,
    busybox_rootfs,
    lmod_tree,
    python_rootfs,
    requires_environment_modules,
    tcl_module_tree,
)
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


@requires_environment_modules
@pytest.mark.parametrize("mode", ["pilot", "jobs"])
def test_environment_modules_load_on_the_nodes(tmp_path, hpcflow_slurm, mode):
    """The profile's modules_init travels to where tasks start (the pilot's driver, each
    batch job) and is sourced on the node; a missing module fails only its task."""
    modulepath = tcl_module_tree(tmp_path / "modules")
    shipped = Path(__file__).resolve().parents[3] / "hpcflow" / "settings" / "profiles"
    profile = tmp_path / "slurm-test-environment-modules.yaml"
    profile.write_text(
        (shipped / "slurm-test.yaml").read_text() + f"modules_init: {ENVIRONMENT_MODULES_INIT}\n"
    )
    wf = write_workflow(
        tmp_path,
        f"""
name: envmodules-{mode}
tasks:
  - name: with_module
    modules: [hpctool/1.0]
    env: {{MODULEPATH: {modulepath}}}
    command: hpctool > m.txt && echo "$MODULES_CMD" >> m.txt && echo "$SLURMD_NODENAME" >> m.txt
    outputs: [m.txt]
  - name: missing
    modules: [nope/9]
    env: {{MODULEPATH: {modulepath}}}
    command: touch ran_missing
""",
    )
    result = hpcflow_slurm("run", str(wf), "--profile", str(profile), "--mode", mode, timeout=300)
    assert result.returncode == 1, result.output + run_logs(tmp_path)
    tool, modulecmd, node = (tmp_path / "m.txt").read_text().splitlines()
    assert tool == "hpctool 1.0" and node.startswith("n"), node
    assert modulecmd == str(ENVIRONMENT_MODULES / "usr/lib/x86_64-linux-gnu/modulecmd.tcl")
    assert "hpcflow: module load nope/9 failed" in result.stdout, result.output
    assert not (tmp_path / "ran_missing").exists()


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
