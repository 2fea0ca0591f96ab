"""Snakemake's own software directives through the plugin: a rule's ``envmodules:`` loads
real Lmod modules where the plugin runs the job (Snakemake's job command does it, with
``--software-deployment-method env-modules`` passed on), and without that switch the
modules are not loaded (the control)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.software_images import lmod_tree
from tests.snakemake.helpers import write_snakefile

LMOD_INIT = Path("/usr/share/lmod/lmod/init/bash")

pytestmark = pytest.mark.skipif(
    not LMOD_INIT.exists(), reason="needs lmod (scripts/test.sh installs it)"
)

SNAKEFILE = """
rule all:
    input: "tool.txt"

rule tool:
    output: "tool.txt"
    envmodules: "hpctool/1.0"
    shell: "(hpctool || echo no tool) > {output}; echo v=${{HPCTOOL_VERSION:-}} >> {output}"
"""


@pytest.mark.parametrize("deploy", [True, False], ids=["env-modules", "without"])
def test_envmodules_of_a_rule_load_where_the_plugin_runs_the_job(
    tmp_path, snakemake, snakemake_env, deploy
):
    modulepath = lmod_tree(tmp_path / "lmod")
    work = tmp_path / "work"
    write_snakefile(work, SNAKEFILE)
    env = {**snakemake_env, "MODULEPATH": str(modulepath), "BASH_ENV": str(LMOD_INIT)}
    args = ["--executor", "hpcflow", "--jobs", "1"]
    if deploy:
        args += ["--software-deployment-method", "env-modules"]
    result = snakemake(*args, cwd=work, env=env)
    assert result.returncode == 0, result.output[-4000:]
    expected = "hpctool 1.0\nv=1.0\n" if deploy else "no tool\nv=\n"
    assert (work / "tool.txt").read_text() == expected
