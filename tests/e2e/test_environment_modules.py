"""Tasks' ``modules:`` with Environment Modules 5 (the Tcl ``modulecmd.tcl``), the other
module system sites run besides Lmod (tests/e2e/test_software.py): a module tree of Tcl
modulefiles, loaded through a profile's ``modules_init``; a missing module fails the task
with hpcflow's message and runs nothing, and modules whose names are shell (and Tcl)
syntax are refused before the module system sees them; ``purge`` unloads what the shell
hpcflow started from had loaded."""

from __future__ import annotations

import subprocess

import yaml

from tests.conftest import write_workflow
from tests.e2e.software_images import (
    ENVIRONMENT_MODULES,
    ENVIRONMENT_MODULES_INIT,
    requires_environment_modules,
    tcl_module_tree,
)

pytestmark = requires_environment_modules

#: Names of shell and Tcl syntax: refused before anything runs (tests/security/test_names.py).
HOSTILE = [
    "hpctool/1.0; touch pwned1",
    "$(touch pwned2)",
    "`touch pwned3`",
    "[exec touch pwned4]",
    "x'; touch pwned5; echo '",
]


def _without_module_systems(env: dict[str, str]) -> dict[str, str]:
    """``env`` less whatever a module system (Lmod or another) set in the shell the tests
    started from: the tests' tasks see only the one they set up."""
    prefixes = ("LMOD", "__LMOD", "_ModuleTable", "BASH_FUNC_", "MODULES", "__MODULES")
    names = {"MODULEPATH", "MODULESHOME", "LOADEDMODULES", "_LMFILES_", "BASH_ENV", "ENV"}
    return {k: v for k, v in env.items() if k not in names and not k.startswith(prefixes)}


def test_modules_load_with_the_profiles_init_file_and_failures_are_clear(tmp_path, env, hpcflow):
    env = _without_module_systems(env)
    modulepath = tcl_module_tree(tmp_path / "modules")
    profile = tmp_path / "environment-modules.yaml"
    profile.write_text(f"backend: local\nmodules_init: {ENVIRONMENT_MODULES_INIT}\n")
    tasks = [
        {
            "name": "with_module",
            "modules": ["hpctool/1.0"],
            "command": 'hpctool > m.txt && echo "$HPCTOOL_VERSION $LOADEDMODULES" >> m.txt'
            ' && echo "$MODULES_CMD" >> m.txt',
            "outputs": ["m.txt"],
        },
        {"name": "missing", "modules": ["nope/9"], "command": "touch ran_missing"},
    ]
    for task in tasks:
        task["env"] = {"MODULEPATH": str(modulepath)}
    wf = write_workflow(tmp_path, yaml.safe_dump({"name": "envmodules", "tasks": tasks}))

    plan = hpcflow("run", str(wf), "--profile", str(profile), "--dry-run")
    assert plan.returncode == 0, plan.output
    assert "with_module: modules hpctool/1.0" in plan.stdout, plan.stdout

    result = hpcflow("run", str(wf), "--profile", str(profile))
    assert result.returncode == 1, result.output  # missing fails
    modulecmd = ENVIRONMENT_MODULES / "usr/lib/x86_64-linux-gnu/modulecmd.tcl"
    assert (tmp_path / "m.txt").read_text() == f"hpctool 1.0\n1.0 hpctool/1.0\n{modulecmd}\n"

    logs = next((tmp_path / ".hpcflow" / "runs").glob("*/tasks")).resolve()
    missing = (logs / "missing" / "1.err").read_text()
    assert "Unable to locate a modulefile for 'nope/9'" in missing, missing
    assert "hpcflow: module load nope/9 failed" in missing, missing
    assert result.stdout.count("exited with 97") == 1, result.output  # hpcflow's message
    assert "hpcflow: module load nope/9 failed" in result.stdout, result.output
    assert not (tmp_path / "ran_missing").exists()

    hostile = [{"name": "hostile", "modules": HOSTILE, "command": "touch ran_hostile"}]
    wf = write_workflow(tmp_path, yaml.safe_dump({"name": "envmodules", "tasks": hostile}))
    result = hpcflow("run", str(wf), "--profile", str(profile))
    assert result.returncode == 2, result.output
    assert "is not a module name" in result.output, result.output
    assert not (tmp_path / "ran_hostile").exists()
    assert not list(tmp_path.rglob("pwned*"))


def test_purge_unloads_what_the_starting_shell_had_loaded(tmp_path, env, hpcflow):
    """hpcflow started from a shell that has Environment Modules and sitewide/1.0 loaded
    (no modules_init: the ``module`` function comes with the environment)."""
    modulepath = tcl_module_tree(tmp_path / "modules")
    loaded = subprocess.run(
        ["bash", "-c", '. "$1" && module use "$2" && module load sitewide/1.0 && env -0',
         "_", str(ENVIRONMENT_MODULES_INIT), str(modulepath)],
        env=_without_module_systems(env), capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    env.clear()
    env.update(line.split("=", 1) for line in loaded.split("\0") if "=" in line)
    assert env["LOADEDMODULES"] == "sitewide/1.0" and "BASH_FUNC_module%%" in env
    show = 'echo "$LOADEDMODULES" && (printenv SITEWIDE || echo unset)'
    wf = write_workflow(
        tmp_path,
        f"""
name: purge
tasks:
  - name: keeps
    modules: [hpctool/1.0]
    command: ({show}) > keeps.txt
    outputs: [keeps.txt]
  - name: purges
    modules: {{load: [hpctool/1.0], purge: true}}
    command: ({show} && hpctool) > purges.txt
    outputs: [purges.txt]
""",
    )
    result = hpcflow("run", str(wf), "-q")
    assert result.returncode == 0, result.output
    assert (tmp_path / "keeps.txt").read_text() == "sitewide/1.0:hpctool/1.0\n1\n"
    assert (tmp_path / "purges.txt").read_text() == "hpctool/1.0\nunset\nhpctool 1.0\n"
