"""Names are checked: module names and image references against strict grammars before
any tool sees them (Lmod evaluates a module name given as an argument; a runtime takes an
image starting with '-' as an option). Refused by ``validate`` and ``run`` with file:line,
no traceback, nothing run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from hpcflow.envs.shims import modules_argv
from hpcflow.errors import HpcflowError
from hpcflow.spec.names import image_problem, module_problem

GOOD_MODULES = [
    "gcc",
    "gcc/12.2.0",
    "GCC/12.3.0",
    "cuda/12.4",
    "python/3.11-foss-2023a",
    "intel-oneapi-compilers/2023.1.0",
    "py-numpy/1.26.4+mkl",
    "hpctool/1.0",
    "a_b/c.d/e",
]
HOSTILE_MODULES = [
    "x'; touch CANARY; '",
    "hpctool/1.0; touch CANARY",
    "$(touch CANARY)",
    "`touch CANARY`",
    "[exec touch CANARY]",
    "a b",
    "a\nb",
    "-x",
    "--help",
    "",
    "gcc/",
    "/gcc",
    "gcc//12",
    "gcc/12\0",
    "gcc@12",
]
GOOD_IMAGES = [
    "docker://ubuntu",
    "docker://ubuntu:22.04",
    "docker://ghcr.io/lab/train:1.0",
    "docker://docker.io/library/ubuntu:22.04@sha256:" + "a" * 64,
    "docker://localhost:5000/x/y",
    "oras://ghcr.io/lab/model:v1",
    "library://alpine:latest",
    "ubuntu:22.04",
    "localhost/tool",
    "images/tool.sif",
    "img.sif",
    "/abs/path/x.sif",
    "images/sq.sqfs",
    "My Images/x.sif",
    "./images/a",
]
HOSTILE_IMAGES = [
    "--privileged",
    "-v/:/host",
    "docker://--privileged",
    "docker://Ubuntu",
    "docker://x;touch CANARY",
    "docker://$(touch CANARY)",
    "http://example.org/x.sif",
    "img\n.sif",
    "img\r.sif",
    "docker://ubuntu:22.04 --privileged",
]


@pytest.mark.parametrize("name", GOOD_MODULES)
def test_module_names_of_real_sites_pass(name: str) -> None:
    assert module_problem(name) is None


@pytest.mark.parametrize("name", HOSTILE_MODULES)
def test_hostile_module_names_are_refused(name: str) -> None:
    assert module_problem(name)
    with pytest.raises(HpcflowError, match="not a module name"):
        modules_argv([name], False, None)  # never handed to Lmod


@pytest.mark.parametrize("image", GOOD_IMAGES)
def test_image_references_and_paths_pass(image: str) -> None:
    assert image_problem(image) is None


@pytest.mark.parametrize("image", HOSTILE_IMAGES)
def test_hostile_images_are_refused(image: str) -> None:
    assert image_problem(image)


def _workflow(folder: Path, bad: str = "") -> Path:
    """A workflow whose second task has ``bad`` (its line 6) and a first task that leaves
    a marker if it ran."""
    wf = folder / "workflow.yaml"
    wf.write_text(
        "name: names\ntasks:\n  - name: marker\n    command: touch MARKER\n"
        f"  - name: bad\n{bad}    command: touch RAN\n"
    )
    return wf


@pytest.mark.parametrize(
    "bad",
    [f"    modules: [{json.dumps(m)}]\n" for m in HOSTILE_MODULES[:5]]
    + [
        f"    container: {{image: {json.dumps(i)}, runtime: podman}}\n"
        for i in ("--privileged", "docker://x;touch CANARY")
    ],
)
def test_validate_and_run_refuse_hostile_names_with_file_line(
    tmp_path: Path, hpcflow, bad: str
) -> None:
    wf = _workflow(tmp_path, bad)
    for args in (("validate", str(wf)), ("run", str(wf))):
        result = hpcflow(*args, cwd=tmp_path)
        assert result.returncode == 2, result.output
        assert "Traceback" not in result.output, result.output
        assert "workflow.yaml:6:" in result.output, result.output
        assert "not a module name" in result.output or "image" in result.output, result.output
    assert not (tmp_path / "MARKER").exists() and not (tmp_path / "RAN").exists()
    assert list(tmp_path.rglob("CANARY")) == []


def test_a_profiles_hostile_module_is_refused(tmp_path: Path, hpcflow) -> None:
    wf = _workflow(tmp_path)
    profile = tmp_path / "site.yaml"
    profile.write_text(yaml.safe_dump({"backend": "local", "modules": ["x'; touch CANARY; '"]}))
    result = hpcflow("run", str(wf), "--profile", str(profile), cwd=tmp_path)
    assert result.returncode == 2, result.output
    assert "Traceback" not in result.output and "not a module name" in result.output
    assert not (tmp_path / "MARKER").exists() and list(tmp_path.rglob("CANARY")) == []
