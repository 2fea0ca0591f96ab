"""`hpcflow init` scaffolds files that validate; `hpcflow completion` completes commands."""

from __future__ import annotations

import os
import subprocess
import sys

from click.testing import CliRunner

from hpcflow.cli.main import cli


def test_init_local_then_run(tmp_path, hpcflow):
    made = hpcflow("init", str(tmp_path / "proj"), "--yes")
    assert made.returncode == 0, made.output
    assert not (tmp_path / "proj" / "site.yaml").exists()
    wf = tmp_path / "proj" / "workflow.yaml"
    ran = hpcflow("run", str(wf), "-q", cwd=wf.parent)
    assert ran.returncode == 0, ran.output
    assert "5 ran" in ran.stdout
    again = hpcflow("init", str(tmp_path / "proj"), "--yes")
    assert again.returncode == 2 and "exists already" in again.stderr
    assert "--force" in again.stderr and "Traceback" not in again.stderr


def test_init_site_profile_from_flags(tmp_path, hpcflow):
    made = hpcflow(
        "init", str(tmp_path), "--backend", "pbs", "--site", "mysite", "--partition",
        "work q", "--account", "it's; mine", "--nodes", "2", "--walltime", "3h",
        "--gpus", "4", "--yes",
    )  # fmt: skip
    assert made.returncode == 0, made.output
    shown = hpcflow("profiles", "show", str(tmp_path / "mysite.yaml"), "--json")
    assert shown.returncode == 0, shown.output
    assert '"it\'s; mine"' in shown.stdout and '"work q"' in shown.stdout
    dry = hpcflow(
        "run", str(tmp_path / "workflow.yaml"), "--profile", str(tmp_path / "mysite.yaml"),
        "--dry-run",
    )  # fmt: skip
    assert dry.returncode == 0, dry.output
    assert "2 node(s), " in dry.stdout and "8 GPUs" in dry.stdout


def test_init_asks_when_interactive(tmp_path):
    answers = "\n".join(["demo", "slurm", "cluster", "debug", "", "1", "30m", "0"]) + "\n"
    result = CliRunner().invoke(cli, ["init", str(tmp_path / "x"), "--interactive"], input=answers)
    assert result.exit_code == 0, result.output
    text = (tmp_path / "x" / "cluster.yaml").read_text()
    assert 'partition: "debug"' in text and "account" not in text.split("mode:")[1]
    assert 'name: "demo"' in (tmp_path / "x" / "workflow.yaml").read_text()


def test_bash_completion(tmp_path):
    script = subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", "completion", "bash"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "_HPCFLOW_COMPLETE" in script and "complete " in script
    env = {**os.environ, "_HPCFLOW_COMPLETE": "bash_complete", "COMP_WORDS": "hpcflow sta",
           "COMP_CWORD": "1"}  # fmt: skip
    answer = subprocess.run(
        [sys.executable, "-c", "from hpcflow.cli.main import cli; cli(prog_name='hpcflow')"],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert "plain,status" in answer.stdout.splitlines()
    # And bash itself accepts the script.
    check = subprocess.run(
        ["bash", "-c", f"{script}\ncomplete -p hpcflow"], capture_output=True, text=True
    )
    assert check.returncode == 0 and "hpcflow" in check.stdout, check.stderr


def test_zsh_completion_script():
    script = subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", "completion", "zsh"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert script.startswith("#compdef hpcflow") and "_HPCFLOW_COMPLETE=zsh_complete" in script
