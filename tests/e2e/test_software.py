"""Tasks in software environments, with real components: two tasks in two Charliecloud
images (each proves where it ran by a marker only its image has), a task with Lmod
modules written here, a python task inside a container whose value a task outside
receives, and resume: changing one image re-runs exactly the task that uses it."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

import hpcflow as hpcflow_api
from tests.conftest import write_workflow
from tests.e2e.software_images import busybox_rootfs, python_rootfs
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


def _lmod_tree(root: Path) -> Path:
    tools = root / "tools" / "bin"
    tools.mkdir(parents=True)
    tool = tools / "hpctool"
    tool.write_text("#!/bin/sh\necho hpctool 1.0\n")
    tool.chmod(0o755)
    modules = root / "modulefiles" / "hpctool"
    modules.mkdir(parents=True)
    (modules / "1.0.lua").write_text(
        f'prepend_path("PATH", "{tools}")\nsetenv("HPCTOOL_VERSION", "1.0")\n'
    )
    return root / "modulefiles"


@pytest.fixture
def workflow(tmp_path: Path) -> Path:
    points = [str(tmp_path)]
    busybox_rootfs(tmp_path / "images" / "a", "a", points)
    busybox_rootfs(tmp_path / "images" / "b", "b", points)
    _, prefix = python_rootfs(tmp_path / "images" / "py", "py", points)
    (tmp_path / "steps.py").write_text(textwrap.dedent(STEPS))
    text = WORKFLOW.format(modules=_lmod_tree(tmp_path / "lmod"), prefix=prefix)
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
