"""Snakemake's job command read for the warm runner (pure: no Snakemake needed)."""

from __future__ import annotations

import pytest

from snakemake_executor_plugin_hpcflow.jobcommand import (
    NotWarm,
    read_job_command,
    strip_per_job,
)

#: A job command as Snakemake 9 writes it for a remote executor (format_job_exec).
COMMAND = (
    "/venv/bin/python -m snakemake --snakefile '/w/Snakefile' --target-jobs 'square:i=30' "
    "--allowed-rules square --cores 'all' --attempt 1 --force-use-threads  "
    "--wait-for-files '/w/.snakemake/tmp.hi36amkl' 'sq/29.txt' --force "
    "--target-files-omit-workdir-adjustment --max-inventory-time 0 --retries 0 --nocolor "
    "--no-hooks --nolock --ignore-incomplete --rerun-triggers mtime code software-env "
    "params input --conda-frontend 'conda' --shared-fs-usage source-cache sources "
    "persistence input-output --latency-wait 5 --scheduler 'ilp' --local-storage-prefix "
    "base64//LnNuYWtlbWFrZS9zdG9yYWdl --default-resources "
    "base64//dG1wZGlyPXN5c3RlbV90bXBkaXI= --mode 'remote'"
)


def test_a_job_command_gives_its_interpreter_and_snakemake_argv():
    job = read_job_command(COMMAND, "/w")
    assert job.python == "/venv/bin/python"
    assert job.env == ()
    assert job.argv[:4] == ("--snakefile", "/w/Snakefile", "--target-jobs", "square:i=30")
    assert "--wait-for-files" in job.argv
    assert job.argv[-2:] == ("--mode", "remote")


def test_a_job_command_of_snakemakes_subprocess_mode_is_read_too():
    # Local mode: Snakemake takes the plugin for a local executor, whose job commands
    # run `--mode subprocess` and pass the run's `--local-groupid`.
    local = COMMAND.replace("--mode 'remote'", "--mode 'subprocess' --local-groupid 'local'")
    job = read_job_command(local, "/w")
    assert job.argv[-4:] == ("--mode", "subprocess", "--local-groupid", "local")
    assert job.key != read_job_command(COMMAND, "/w").key


def test_jobs_that_differ_only_in_per_job_options_share_a_key():
    one = read_job_command(COMMAND, "/w")
    other = read_job_command(
        COMMAND.replace("square:i=30", "square:i=7")
        .replace("--attempt 1", "--attempt 2")
        .replace("'sq/29.txt'", "'sq/6.txt' 'sq/5.txt'")
        .replace("--force-use-threads", "--local-groupid 'g1'"),
        "/w",
    )
    assert one.key == other.key
    assert one.argv != other.argv


@pytest.mark.parametrize(
    "change",
    [
        ("--latency-wait 5", "--latency-wait 6"),
        ("--rerun-triggers mtime code", "--rerun-triggers mtime"),
        ("--cores 'all'", "--cores 4"),
        ("/venv/bin/python", "/other/bin/python"),
    ],
)
def test_jobs_with_other_general_options_do_not_share_a_key(change):
    assert (
        read_job_command(COMMAND, "/w").key != read_job_command(COMMAND.replace(*change), "/w").key
    )
    assert read_job_command(COMMAND, "/w").key != read_job_command(COMMAND, "/elsewhere").key


def test_exported_variables_are_read_and_part_of_the_key():
    job = read_job_command(f"export A='x y' B=\"it's\" && {COMMAND}", "/w")
    assert job.env == (("A", "x y"), ("B", "it's"))
    assert job.key != read_job_command(f"export A='x' && {COMMAND}", "/w").key


def test_quoting_is_read_as_bash_reads_it():
    job = read_job_command(COMMAND.replace("'conda'", '\'con\'"da"x \'a b\' "c\\"d\\\\"'), "/w")
    i = job.argv.index("--conda-frontend")
    assert job.argv[i + 1 : i + 4] == ("condax", "a b", 'c"d\\')


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        (f"true && {COMMAND}", "precommand"),
        (f"{COMMAND} && touch x", "precommand or suffix"),
        (f'export A="$HOME" && {COMMAND}', "expansion"),
        (f"export A=~/x && {COMMAND}", "shell syntax"),
        (COMMAND.replace("'sq/29.txt'", "sq/*.txt"), "shell syntax"),
        (COMMAND.replace("'sq/29.txt'", "`date`"), "shell syntax"),
        (COMMAND + "; rm -rf x", "shell syntax"),
        (COMMAND.replace("--mode 'remote'", "--mode 'default'"), "remote or subprocess mode"),
        (COMMAND.replace("-m snakemake", "-m other"), "-m snakemake"),
        ("export A='x' " + COMMAND, "without '&&'"),
        (COMMAND.replace("'conda'", "'conda"), "unterminated"),
        (COMMAND.replace("'conda'", '"a\\$b"'), "backslash escape"),
    ],
)
def test_what_the_warm_runner_does_not_read_is_refused_with_the_reason(command, reason):
    with pytest.raises(NotWarm, match=reason.replace("*", r"\*")):
        read_job_command(command, "/w")


def test_strip_per_job_keeps_everything_else_in_order():
    args = [
        "--snakefile", "S", "--target-jobs", "a:i=1", "b:i=2", "--cores", "all",
        "--force-use-threads", "--attempt", "3", "--unneeded-temp-files", "t1", "t2",
        "--wait-for-files", "--local-groupid", "g", "--wait-for-files-file", "f",
        "--mode", "remote",
    ]  # fmt: skip
    assert strip_per_job(args) == ["--snakefile", "S", "--cores", "all", "--mode", "remote"]
