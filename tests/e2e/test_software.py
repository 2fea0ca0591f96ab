"""Tasks in software environments, with real components: two tasks in two Charliecloud
images (each proves where it ran by a marker only its image has), a task with Lmod
modules written here, a python task inside a container whose value a task outside
receives, and resume: changing one image re-runs exactly the task that uses it."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

import hpcflow as hpcflow_api
from tests.conftest import left_with, write_workflow
from tests.e2e.software_images import busybox_rootfs, lmod_tree, python_rootfs, squashfs_image
from tests.slurm_cluster import slurm_required

_MISSING = shutil.which("ch-run") is None or not Path("/usr/share/lmod/lmod/init/bash").exists()
# Where scripts/test.sh has installed them (as root, CI) they must run, never skip.
pytestmark = pytest.mark.skipif(
    _MISSING and not slurm_required(),
    reason="needs charliecloud-runtime and lmod (scripts/test.sh installs them)",
)

STEPS = """
def inside(tag):
    with open("/hpcflow-image") as f:
        return tag + ":" + f.read().strip()

def outside(x):
    import os
    return {"got": x, "host_has_marker": os.path.exists("/hpcflow-image")}
"""

WORKFLOW = """
name: software
tasks:
  - name: in_a
    container: {{image: images/a, runtime: charliecloud}}
    command: cat /hpcflow-image > a.txt && . /etc/os-release && echo "$ID" >> a.txt
    outputs: [a.txt]
  - name: in_b
    container: {{image: images/b, runtime: charliecloud}}
    command: cat /hpcflow-image > b.txt
    outputs: [b.txt]
  - name: with_module
    modules: [hpctool/1.0]
    env: {{MODULEPATH: {modules}}}
    command: hpctool > m.txt && echo "$HPCTOOL_VERSION" >> m.txt
    outputs: [m.txt]
  - name: py
    container:
      image: images/py
      runtime: charliecloud
      binds: [{prefix}]
      python: {prefix}/bin/python3
    params: {{tag: t}}
    python: steps:inside
  - name: reads
    python: steps:outside
    from: {{x: py}}
"""


@pytest.fixture
def workflow(tmp_path: Path) -> Path:
    points = [str(tmp_path)]
    busybox_rootfs(tmp_path / "images" / "a", "a", points)
    busybox_rootfs(tmp_path / "images" / "b", "b", points)
    _, prefix = python_rootfs(tmp_path / "images" / "py", "py", points)
    (tmp_path / "steps.py").write_text(textwrap.dedent(STEPS))
    text = WORKFLOW.format(modules=lmod_tree(tmp_path / "lmod"), prefix=prefix)
    return write_workflow(tmp_path, text)


@pytest.mark.parametrize("engine", ["pool", "dask"])
def test_tasks_run_in_their_own_images_and_modules_and_resume(workflow, hpcflow, engine):
    folder = workflow.parent
    first = hpcflow("run", str(workflow), "-q", "--engine", engine)
    assert first.returncode == 0, first.output
    assert (folder / "a.txt").read_text() == "a\nhpcflow-a\n"
    assert (folder / "b.txt").read_text() == "b\n"
    assert (folder / "m.txt").read_text() == "hpctool 1.0\n1.0\n"
    run_dir = next((folder / ".hpcflow" / "runs").iterdir())
    assert hpcflow_api.load_result(run_dir, "py") == "t:py"
    assert hpcflow_api.load_result(run_dir, "reads") == {"got": "t:py", "host_has_marker": False}

    plan = hpcflow("run", str(workflow), "--dry-run")
    assert plan.returncode == 0, plan.output
    assert f"in_a: charliecloud {folder}/images/a" in plan.stdout, plan.stdout
    assert "with_module: modules hpctool/1.0" in plan.stdout, plan.stdout

    again = hpcflow("run", str(workflow), "-q", "--engine", engine)
    assert again.returncode == 0 and "0 ran, 5 up to date" in again.stdout, again.output

    # A changed image re-runs the task that uses it, and no other.
    (folder / "images" / "b" / "hpcflow-image").write_text("b2\n")
    changed = hpcflow("run", str(workflow), "-q", "--engine", engine)
    assert changed.returncode == 0 and "1 ran, 4 up to date" in changed.stdout, changed.output
    assert (folder / "b.txt").read_text() == "b2\n"


def test_a_missing_image_and_a_missing_python_are_clear_errors(tmp_path, hpcflow):
    busybox_rootfs(tmp_path / "images" / "a", "a", [str(tmp_path)])
    (tmp_path / "steps.py").write_text(textwrap.dedent(STEPS))
    wf = write_workflow(
        tmp_path,
        """
name: broken
tasks:
  - name: lost
    container: {image: images/nope, runtime: charliecloud}
    command: "true"
""",
    )
    result = hpcflow("run", str(wf), "-q")
    assert result.returncode == 2, result.output
    assert "task 'lost'" in result.stderr and "images/nope is not there" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / ".hpcflow" / "runs").exists() or not any(
        (tmp_path / ".hpcflow" / "runs").iterdir()
    )

    wf = write_workflow(
        tmp_path,
        """
name: nopython
tasks:
  - name: py
    container: {image: images/a, runtime: charliecloud}
    params: {tag: t}
    python: steps:inside
""",
    )
    result = hpcflow("run", str(wf))
    assert result.returncode == 1, result.output
    assert "no usable python3 in the task's environment" in result.stdout, result.output
    log = next((tmp_path / ".hpcflow" / "runs").glob("*/tasks/py/1.err")).read_text()
    assert "hpcflow: no python3 in this environment" in log


@pytest.mark.skipif(
    shutil.which("mksquashfs") is None and not slurm_required(),
    reason="needs squashfs-tools (scripts/test.sh installs it)",
)
def test_a_squashfs_image_runs_its_task_and_a_timeout_leaves_nothing(tmp_path, hpcflow):
    """Charliecloud on one SquashFS file (ch-run mounts it through its own squashfuse,
    a process of its own): the task sees the image, and a task that overruns its timeout
    is killed with everything it started, the mount's process included."""
    rootfs = busybox_rootfs(tmp_path / "rootfs", "squashed", [str(tmp_path)])
    squashfs_image(rootfs, tmp_path / "images" / "sq.sqfs")
    marker = f"hpcflow-squash-{tmp_path.name}"
    wf = write_workflow(
        tmp_path,
        f"""
name: squash
tasks:
  - name: inside
    container: {{image: images/sq.sqfs, runtime: charliecloud}}
    command: cat /hpcflow-image > sq.txt
    outputs: [sq.txt]
  - name: stuck
    container: images/sq.sqfs   # a .sqfs file goes to Charliecloud
    timeout: 3s
    command: sleep 120 && echo {marker}
""",
    )
    result = hpcflow("run", str(wf))
    assert result.returncode == 1, result.output
    assert (tmp_path / "sq.txt").read_text() == "squashed\n"
    assert "stuck" in result.stdout and "timed out after 3s" in result.stdout, result.output
    assert left_with(marker) == []


def test_hostile_image_and_module_names_stay_data(tmp_path, hpcflow):
    """An image folder whose name is shell syntax runs, and nothing in its name runs; a
    module whose name is shell syntax is refused before Lmod sees it (Lmod evaluates a
    name: tests/security/test_names.py)."""
    name = "img $(touch pwned) `touch pwned2`; touch pwned3 'q' \"d\""
    busybox_rootfs(tmp_path / "images" / name, "hostile", [str(tmp_path)])
    modulepath = lmod_tree(tmp_path / "lmod")
    wf = tmp_path / "workflow.yaml"
    import yaml

    in_image = {
        "name": "in_image",
        "container": {"image": f"images/{name}", "runtime": "charliecloud"},
        "command": "cat /hpcflow-image > marker.txt",
        "outputs": ["marker.txt"],
    }
    wf.write_text(yaml.safe_dump({"name": "hostile", "tasks": [in_image]}))
    result = hpcflow("run", str(wf))
    assert result.returncode == 0, result.output
    assert (tmp_path / "marker.txt").read_text() == "hostile\n"
    odd_module = {
        "name": "odd_module",
        "modules": ["hpctool/1.0; touch pwned4", "x'; touch pwned5; '"],
        "env": {"MODULEPATH": str(modulepath)},
        "command": "true",
    }
    wf.write_text(yaml.safe_dump({"name": "hostile", "tasks": [in_image, odd_module]}))
    result = hpcflow("run", str(wf))
    assert result.returncode == 2, result.output
    assert "is not a module name" in result.output and "Traceback" not in result.output
    assert not list(tmp_path.rglob("pwned*"))


#: This machine mounts cgroups v1 and v2 side by side (crun refuses that) and caps the
#: limits podman raises by default; a site sets the same in its containers.conf.
CONTAINERS_CONF = """[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]

[engine]
runtime = "runc"
"""


def _podman_image(rootfs: Path, tag: str, env: dict[str, str]) -> str:
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    subprocess.run(
        ["podman", "import", "-q", "-", tag], stdin=tar.stdout, env=env, check=True,
        capture_output=True,
    )  # fmt: skip
    assert tar.wait() == 0
    return tag


def _podman_names(env: dict[str, str]) -> list[str]:
    out = subprocess.run(
        ["podman", "ps", "-a", "--format", "{{.Names}}"], env=env, capture_output=True,
        text=True, check=True,
    ).stdout  # fmt: skip
    return [name for name in out.split() if name.startswith("hpcflow-")]


@pytest.mark.skipif(
    shutil.which("podman") is None and not slurm_required(),
    reason="needs podman and runc (scripts/test.sh installs them)",
)
def test_podman_tasks_python_inside_and_a_timeout_leaves_no_container(tmp_path, env, hpcflow):
    conf = tmp_path / "containers.conf"
    conf.write_text(CONTAINERS_CONF)
    env["CONTAINERS_CONF"] = str(conf)
    points = [str(tmp_path)]
    plain = _podman_image(
        busybox_rootfs(tmp_path / "rootfs-c", "c", points), "localhost/hpcflow-test-c:1", env
    )
    rootfs, prefix = python_rootfs(tmp_path / "rootfs-py", "pod-py", points)
    python = _podman_image(rootfs, "localhost/hpcflow-test-py:1", env)
    (tmp_path / "steps.py").write_text(textwrap.dedent(STEPS))
    wf = write_workflow(
        tmp_path,
        f"""
name: podman
tasks:
  - name: in_c
    container: {{image: '{plain}', runtime: podman}}
    env: {{GREETING: from the task}}
    command: cat /hpcflow-image > c.txt && echo "$GREETING" >> c.txt
    outputs: [c.txt]
  - name: py
    container: {{image: '{python}', runtime: podman, binds: [{prefix}],
                 python: {prefix}/bin/python3}}
    params: {{tag: p}}
    python: steps:inside
  - name: reads
    python: steps:outside
    from: {{x: py}}
""",
    )
    first = hpcflow("run", str(wf), "-q")
    assert first.returncode == 0, first.output
    assert (tmp_path / "c.txt").read_text() == "c\nfrom the task\n"
    run_dir = next((tmp_path / ".hpcflow" / "runs").iterdir())
    assert hpcflow_api.load_result(run_dir, "reads") == {
        "got": "p:pod-py",
        "host_has_marker": False,
    }
    again = hpcflow("run", str(wf), "-q")
    assert again.returncode == 0 and "0 ran, 3 up to date" in again.stdout, again.output

    slow = write_workflow(
        tmp_path / "slow",
        f"""
name: slow
tasks:
  - name: sleeps
    container: {{image: '{plain}', runtime: podman}}
    timeout: 3s
    command: sleep 120
""",
    )
    timed_out = hpcflow("run", str(slow))
    assert timed_out.returncode == 1 and "timed out after 3s" in timed_out.stdout, timed_out.output
    assert _podman_names(env) == []


def test_a_venv_runs_its_own_tools_and_python(tmp_path, hpcflow):
    """``venv:`` activates a real virtual environment: its bin/ comes first on PATH and a
    python task runs its interpreter (which imports hpcflow's worker code from the run
    directory, not from this venv's site-packages)."""
    import venv as venv_module

    venv_module.EnvBuilder(with_pip=False).create(tmp_path / "env")
    tool = tmp_path / "env" / "bin" / "envtool"
    tool.write_text('#!/bin/sh\necho "envtool in $VIRTUAL_ENV"\n')
    tool.chmod(0o755)
    (tmp_path / "steps.py").write_text("import sys\n\ndef where():\n    return sys.prefix\n")
    wf = write_workflow(
        tmp_path,
        """
name: venv
defaults:
  venv: env
tasks:
  - name: tool
    command: envtool > tool.txt
    outputs: [tool.txt]
  - name: py
    python: steps:where
""",
    )
    result = hpcflow("run", str(wf), "-q")
    assert result.returncode == 0, result.output
    assert (tmp_path / "tool.txt").read_text() == f"envtool in {tmp_path / 'env'}\n"
    run_dir = next((tmp_path / ".hpcflow" / "runs").iterdir())
    assert hpcflow_api.load_result(run_dir, "py") == str(tmp_path / "env")
    assert "0 ran, 2 up to date" in hpcflow("run", str(wf), "-q").stdout
    # A package installed into the venv re-runs the tasks that use it.
    (site,) = (tmp_path / "env" / "lib").glob("python*/site-packages")
    (site / "newpkg-1.0.dist-info").mkdir()
    again = hpcflow("run", str(wf), "-q")
    assert again.returncode == 0 and "2 ran, 0 up to date" in again.stdout, again.output


FAKE_APPTAINER = r"""#!/bin/sh
# A stand-in for apptainer (not installable here; its command lines are also checked
# against golden files): logs pulls and execs, runs the program on the host.
case "$1" in
pull)
    shift; [ "$1" = --force ] && shift
    echo "pull $2" >> "$FAKE_APPTAINER_LOG"
    case "$2" in *nope*)
        echo "FATAL: Unable to handle $2 uri: failed to get checksum" >&2; exit 255;;
    esac
    echo "$2" > "$1";;
exec)
    shift
    while [ $# -gt 0 ]; do
        case "$1" in --nv) shift;; --bind|--pwd) shift 2;; -*) shift;; *) break;; esac
    done
    echo "exec $1" >> "$FAKE_APPTAINER_LOG"; shift
    exec "$@";;
esac
"""


def test_registry_images_are_pulled_once_before_anything_runs(tmp_path, env, hpcflow):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "apptainer"
    fake.write_text(FAKE_APPTAINER)
    fake.chmod(0o755)
    log = tmp_path / "apptainer.log"
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    env["FAKE_APPTAINER_LOG"] = str(log)
    wf = write_workflow(
        tmp_path,
        """
name: pulls
defaults:
  container: docker://example.org/lab/tool:1.0
tasks:
  - name: step
    foreach: {i: [1, 2, 3]}
    command: echo {i} > out_{i}.txt
    outputs: ["out_{i}.txt"]
""",
    )
    dry = hpcflow("run", str(wf), "--dry-run")
    assert dry.returncode == 0 and not log.exists(), dry.output  # a dry run pulls nothing
    result = hpcflow("run", str(wf), "-q")
    assert result.returncode == 0, result.output
    lines = log.read_text().splitlines()
    assert lines[0] == "pull docker://example.org/lab/tool:1.0"
    assert sum(line.startswith("pull") for line in lines) == 1
    (sif,) = (tmp_path / ".hpcflow" / "images").glob("*.sif")
    assert sorted(lines[1:]) == [f"exec {sif}"] * 3

    broken = write_workflow(
        tmp_path / "broken",
        """
name: broken
tasks:
  - name: lost
    container: docker://example.org/lab/nope:2
    command: touch ran
""",
    )
    refused = hpcflow("run", str(broken), "-q")
    assert refused.returncode == 2, refused.output
    assert "pulling docker://example.org/lab/nope:2 (for task 'lost') failed" in refused.stderr
    assert "failed to get checksum" in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "broken" / "ran").exists()
