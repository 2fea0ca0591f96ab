"""Software environments of tasks (hpcflow/envs): the argv each runtime gets (Apptainer's
against golden files: no Apptainer can be installed here), names that stay data through
the shims, what identifies an image, and the preflight's errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hpcflow.envs.containers import ContainerRun, container_argv, mount_spec
from hpcflow.envs.environments import Environments, SoftwareEnvironmentError
from hpcflow.envs.identity import image_identity
from hpcflow.envs.shims import activate_argv, modules_argv
from hpcflow.envs.site import SiteEnvironment
from hpcflow.errors import HpcflowError
from hpcflow.spec.models import SoftwareKeys
from tests.conftest import REPO

GOLDEN = REPO / "tests" / "golden" / "envs"

HOSTILE = [
    "a b",
    "$(touch pwned)",
    "`touch pwned`",
    "x; touch pwned",
    "'\"",
    "-rf",
    "--help",
    "a\\nb",
    "ünï",
    "*",
]


def _software(**keys: object) -> SoftwareKeys:
    return SoftwareKeys.model_validate(keys)


@pytest.mark.parametrize("runtime", ["apptainer", "singularity"])
@pytest.mark.parametrize("gpus", [False, True], ids=["cpu", "gpus"])
def test_apptainer_command_lines_match_the_golden_files(tmp_path, runtime, gpus):
    site = SiteEnvironment(
        runtime=runtime,
        commands={"singularity": "/opt/singularity/bin/singularity"},
        binds=("/scratch", "data:/data"),
        options=("--cleanenv",),
    )
    envs = Environments(site)
    software = _software(
        container={"image": "images/tool.sif", "binds": ["/ref:/ref:ro"], "options": ["-e"]}
    )
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "tool.sif").write_bytes(b"sif")
    env = envs.of(0, software, str(tmp_path), gpus)
    assert env is not None
    argv = env.inner(f"{tmp_path}/work", ["/runs/r1:/runs/r1"])
    argv = [a.replace(str(tmp_path), "/FLOW") for a in argv]
    golden = GOLDEN / f"{runtime}-{'gpus' if gpus else 'cpu'}.json"
    if os.environ.get("HPCFLOW_UPDATE_GOLDEN"):
        golden.write_text(json.dumps(argv, indent=1) + "\n")
    assert argv == json.loads(golden.read_text())


def test_a_docker_reference_goes_to_apptainer_unchanged(tmp_path):
    ref = "docker://ghcr.io/x/tool:1.2@sha256:" + "ab" * 32
    env = Environments(SiteEnvironment(runtime="podman")).of(
        0, _software(container=ref), str(tmp_path)
    )
    assert env is not None and env.container is not None
    assert env.container.runtime == "apptainer"
    assert env.container.image == ref
    assert env.identity[2] == ref


def test_charliecloud_and_podman_command_lines():
    run = ContainerRun("charliecloud", "ch-run", "/img", ("/w:/w",), ("--no-home",))
    assert container_argv(run, "/w/sub")[4:] == [
        "ch-run", "-b", "/w:/w", "-c", "/w/sub", "--no-home", "/img", "--",
    ]  # fmt: skip
    run = ContainerRun("podman", "podman", "localhost/img:1", ("/w:/w",), (), gpus=True)
    argv = container_argv(run, "/w", ["MY_VAR"])
    # A supervisor that kills the container by its name when the task is stopped.
    assert argv[:2] == ["/bin/sh", "-c"] and argv[4].startswith("hpcflow-")
    assert argv[5:10] == ["podman", "run", "--name", argv[4], "--rm"]
    assert argv[argv.index("-v") + 1] == "/w:/w"
    assert ["--env", "MY_VAR"] == argv[argv.index("MY_VAR") - 1 : argv.index("MY_VAR") + 1]
    assert "nvidia.com/gpu=all" in argv and argv[-3:] == ["-w", "/w", "localhost/img:1"]
    assert "--pull=never" in argv


def test_a_squashfs_image_has_charliecloud_s_mount_point_made_first(tmp_path):
    """Two ch-runs of SquashFS images starting at once race to create their default
    mount point (/var/tmp/$USER.ch/mnt): the wrapper makes it first, with mkdir -p, and
    leaves it alone for a directory image or a --mount of the task's own."""
    import shutil
    import uuid
    from pathlib import Path

    user = f"hpcflow-test-{uuid.uuid4().hex[:8]}"
    made = Path(f"/var/tmp/{user}.ch")
    try:
        for image, options, expected in (
            ("/img", (), False),
            ("/i.sqfs", ("--mount=/m",), False),
            ("/i.sqfs", (), True),
            ("/i.sqfs", (), True),  # again, with the folder there: still fine
        ):
            run = ContainerRun("charliecloud", "true", image, (), options)
            argv = container_argv(run, str(tmp_path))
            done = subprocess.run(argv, env={"USER": user, "PATH": "/usr/bin:/bin"})
            assert done.returncode == 0
            assert (made / "mnt").is_dir() == expected, (image, options)
    finally:
        shutil.rmtree(made, ignore_errors=True)


def test_binds_relative_to_the_workflow_and_nested_mounts_once():
    assert mount_spec("data", "/flow") == "/flow/data:/flow/data"
    assert mount_spec("/a:/b", "/flow") == "/a:/b"
    env = Environments().of(0, _software(container="docker://img"), "/flow")
    assert env is not None
    runs = "/flow/.hpcflow/runs/r"
    argv = env.inner("/flow", [f"{runs}:{runs}", "/elsewhere:/elsewhere"])
    binds = [argv[i + 1] for i, a in enumerate(argv) if a == "--bind"]
    assert binds == ["/flow:/flow", "/elsewhere:/elsewhere"]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_module_names_never_reach_module(name):
    """Lmod evaluates a module name: one outside the grammar is refused before the shim
    (tests/security/test_names.py)."""
    with pytest.raises(HpcflowError, match="not a module name"):
        modules_argv([name, "two"], True, None)


@pytest.mark.parametrize("name", ["py-numpy/1.26.4+mkl", "a_b/c.d/e-f"])
def test_module_names_stay_data(tmp_path, name):
    """A fake `module` that records its arguments: each name arrives as one argument,
    and the program after the shim gets its own argv unchanged."""
    init = tmp_path / "init.sh"
    log = tmp_path / "log"
    init.write_text(f'module() {{ printf "%s\\n" "$@" >> {log}; }}\n')
    argv = [*modules_argv([name, "two"], True, str(init)), "printf", "%s|", name]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert done.stdout == f"{name}|"
    assert log.read_text().splitlines() == ["purge", "load", name, "two"]


def test_a_failed_module_load_stops_the_task(tmp_path):
    init = tmp_path / "init.sh"
    init.write_text("module() { return 1; }\n")
    done = subprocess.run(
        [*modules_argv(["nosuch"], False, str(init)), "touch", "ran"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 97 and "module load nosuch failed" in done.stderr
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_environment_prefixes_stay_data(tmp_path, name):
    prefix = tmp_path / name.replace("/", "_")
    (prefix / "bin").mkdir(parents=True)
    tool = prefix / "bin" / "hpcflow-probe"
    tool.write_text('#!/bin/sh\nprintf "%s\\n" "$VIRTUAL_ENV"\n')
    tool.chmod(0o755)
    done = subprocess.run(
        [*activate_argv(str(prefix), "venv"), "hpcflow-probe"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout == f"{prefix}\n"
    assert not (tmp_path / "pwned").exists()


def test_an_image_folder_changes_its_identity_when_a_file_changes(tmp_path):
    image = tmp_path / "img"
    (image / "etc").mkdir(parents=True)
    (image / "etc" / "marker").write_text("a")
    first = image_identity("charliecloud", "ch-run", str(image))
    assert image_identity("charliecloud", "ch-run", str(image)) == first
    (image / "etc" / "marker").write_text("bb")
    assert image_identity("charliecloud", "ch-run", str(image)) != first


def test_the_preflight_names_every_task_and_the_fix(tmp_path):
    envs = Environments(SiteEnvironment(commands={"apptainer": "no-such-apptainer-here"}))
    image = tmp_path / "there.sif"
    image.write_bytes(b"x")
    uses = [
        ("align", 0, _software(container="missing.sif"), str(tmp_path), False),
        ("train", 1, _software(container=str(image)), str(tmp_path), False),
        ("post", 2, _software(venv="nope"), str(tmp_path), False),
    ]
    with pytest.raises(SoftwareEnvironmentError) as caught:
        envs.preflight(uses)
    text = str(caught.value)
    assert "task 'align': the image" in text and "missing.sif is not there" in text
    assert "task 'train'" in text and "no-such-apptainer-here" in text
    assert "container_commands" in text
    assert "task 'post': venv" in text and "no bin/ folder" in text


def test_a_python_task_process_imports_hpcflow_from_the_worker_zip(tmp_path):
    from hpcflow.envs.worker_code import ensure_worker_code

    path = ensure_worker_code(tmp_path / "w.zip")
    done = subprocess.run(
        [sys.executable, "-S", "-c", "import hpcflow.worker.pycall as m; print(m.__file__)"],
        env={"PYTHONPATH": path}, cwd=tmp_path, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.startswith(path)


def test_apptainer_pulls_into_the_profile_cache():
    site = SiteEnvironment(runtime="singularity", cache="/scratch/images")
    env = Environments(site).of(0, _software(container="docker://alpine:3"), "/flow")
    assert env is not None and env.variables == (("SINGULARITY_CACHEDIR", "/scratch/images"),)
    other = Environments(site).of(0, _software(venv="/v"), "/flow")
    assert other is not None and other.variables == ()


def test_one_python_environment_per_task_and_the_task_s_own_wins(tmp_path):
    from hpcflow.dag.instances import software_of
    from hpcflow.errors import SpecError
    from hpcflow.spec.loader import load_workflow
    from hpcflow.spec.models import Defaults, TaskSpec

    wf = tmp_path / "workflow.yaml"
    wf.write_text("name: w\ntasks:\n  - name: t\n    command: x\n    venv: a\n    conda: b\n")
    with pytest.raises(SpecError) as caught:
        load_workflow(wf)
    said = str(caught.value)
    assert "workflow.yaml:3:5: tasks[0]" in said and "give one of 'venv' and 'conda'" in said
    defaults = Defaults.model_validate({"venv": "/v", "modules": ["m"]})
    task = TaskSpec.model_validate({"name": "t", "command": "x", "conda": "/c"})
    merged = software_of(task, defaults)
    assert merged is not None
    assert (merged.venv, merged.conda, merged.modules.load) == (None, "/c", ["m"])
