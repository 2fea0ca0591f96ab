"""Snakemake jobs through the warm runner: every rule kind, Snakemake's semantics, and the
fallback to Snakemake's own job command (real ``snakemake`` processes, local mode).

Each rule writes ``who`` files: the command line of the process that ran the job (the
parent of its shell, of its script's interpreter, or itself for ``run:``). Under the warm
runner that process is a fork of ``snakemake_executor_plugin_hpcflow.warm_server``;
under Snakemake's job command it is ``python -m snakemake``.
"""

from __future__ import annotations

import os
import stat
import textwrap
from pathlib import Path

import pytest

from tests.snakemake.helpers import run_dirs, write_snakefile

pytestmark = pytest.mark.slow

WARM = "snakemake_executor_plugin_hpcflow.warm_server"

#: The command line of the shell's parent, for shell: rules.
SHELL_WHO = "tr '\\\\0' ' ' < /proc/$PPID/cmdline > {output.who}"

RULE_KINDS = textwrap.dedent(
    """
    rule all:
        input: "shell.txt", "run.txt", "script.txt", "wrapped.txt", "kept.txt", "bench.txt"

    rule shell_rule:
        output: out="shell.txt", who="who/shell"
        params: greeting="hello", n=3
        log: "logs/shell.log"
        shell: "echo {params.greeting} {params.n} > {output.out}; echo to-log > {log}; SHELL_WHO"

    rule run_rule:
        output: out="run.txt", who="who/run"
        params: word="ran"
        log: "logs/run.log"
        run:
            with open(output.out, "w") as f:
                f.write(params.word + " " + str(threads) + "\\n")
            with open(log[0], "w") as f:
                f.write("run log\\n")
            with open("/proc/self/cmdline") as f:
                open(output.who, "w").write(f.read().replace("\\0", " "))

    rule script_rule:
        input: "shell.txt"
        output: out="script.txt", who="who/script"
        params: suffix="!"
        script: "scripts/copy.py"

    rule wrapper_rule:
        input: "run.txt"
        output: out="wrapped.txt", who="who/wrapper"
        wrapper: "file://WRAPPERS/upper"

    rule make_temp:
        output: temp("intermediate.txt"), who="who/temp"
        shell: "echo temporary > {output[0]}; SHELL_WHO"

    rule protect:
        input: "intermediate.txt"
        output: protected("kept.txt"), who="who/protected"
        shell: "cat {input} > {output[0]}; SHELL_WHO"

    rule bench:
        output: out="bench.txt", who="who/bench"
        benchmark: "benchmarks/bench.tsv"
        shell: "sleep 0.2; echo done > {output.out}; SHELL_WHO"
    """
).replace("SHELL_WHO", SHELL_WHO)

SCRIPT = textwrap.dedent(
    """
    import os
    text = open(snakemake.input[0]).read().strip()
    open(snakemake.output.out, "w").write(text + snakemake.params.suffix + "\\n")
    with open(f"/proc/{os.getppid()}/cmdline") as f:
        open(snakemake.output.who, "w").write(f.read().replace("\\0", " "))
    """
)

WRAPPER = textwrap.dedent(
    """
    import os
    text = open(snakemake.input[0]).read()
    open(snakemake.output.out, "w").write(text.upper())
    with open(f"/proc/{os.getppid()}/cmdline") as f:
        open(snakemake.output.who, "w").write(f.read().replace("\\0", " "))
    """
)


def _workflow(tmp_path: Path, text: str) -> Path:
    work = tmp_path / "work"
    wrappers = tmp_path / "wrappers"
    (wrappers / "upper").mkdir(parents=True)
    (wrappers / "upper" / "wrapper.py").write_text(WRAPPER)
    # A remote executor's job waits for the wrapper's environment file (never used here).
    (wrappers / "upper" / "environment.yaml").write_text("dependencies: []\n")
    write_snakefile(work, text.replace("WRAPPERS", str(wrappers)))
    (work / "scripts").mkdir()
    (work / "scripts" / "copy.py").write_text(SCRIPT)
    return work


def _who(work: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in (work / "who").iterdir()}


def _runner_logs(work: Path) -> list[Path]:
    (run_dir,) = run_dirs(work)[-1:]
    folder = run_dir / "warm"
    return sorted(folder.iterdir()) if folder.exists() else []


def test_every_rule_kind_runs_in_the_warm_runner_with_snakemakes_semantics(
    tmp_path: Path, snakemake
):
    work = _workflow(tmp_path, RULE_KINDS)
    result = snakemake("--executor", "hpcflow", "--jobs", "4", cwd=work)
    assert result.returncode == 0, result.output[-4000:]
    who = _who(work)
    assert set(who) == {"shell", "run", "script", "wrapper", "temp", "protected", "bench"}
    for kind, cmdline in who.items():
        assert WARM in cmdline, (kind, cmdline)
    # shell:, params:, log:
    assert (work / "shell.txt").read_text() == "hello 3\n"
    assert (work / "logs" / "shell.log").read_text() == "to-log\n"
    # run: (in the job's process, with its threads) and its log
    assert (work / "run.txt").read_text() == "ran 1\n"
    assert (work / "logs" / "run.log").read_text() == "run log\n"
    # script: and wrapper: (a local wrapper: no network)
    assert (work / "script.txt").read_text() == "hello 3!\n"
    assert (work / "wrapped.txt").read_text() == "RAN 1\n"
    # temp() is removed once its consumer is done; protected() is read-only
    assert not (work / "intermediate.txt").exists()
    assert (work / "kept.txt").read_text() == "temporary\n"
    assert not os.stat(work / "kept.txt").st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    # benchmark:
    bench = (work / "benchmarks" / "bench.tsv").read_text().splitlines()
    assert bench[0].split("\t")[:2] == ["s", "h:m:s"]
    assert float(bench[1].split("\t")[0]) >= 0.2
    # One runner served all seven jobs; nothing asked for Snakemake's own command.
    assert len(_runner_logs(work)) == 1
    assert "runs Snakemake's own job command" not in result.output
    # A second run has nothing to do: the jobs' metadata is what Snakemake expects.
    again = snakemake("--executor", "hpcflow", "--jobs", "4", cwd=work)
    assert again.returncode == 0, again.output[-4000:]
    assert "Nothing to be done" in again.output


RETRIED = textwrap.dedent(
    """
    rule all:
        input: "flaky.txt"

    rule flaky:
        output: "flaky.txt", who="who/flaky"
        resources: try_number=lambda wildcards, attempt: attempt
        shell: "SHELL_WHO; echo attempt {resources.try_number} >&2; "
               "test {resources.try_number} -ge 2; echo ok > {output[0]}"
    """
).replace("SHELL_WHO", SHELL_WHO)


def test_retries_run_again_as_the_next_attempt(tmp_path: Path, snakemake):
    work = _workflow(tmp_path, RETRIED)
    result = snakemake("--executor", "hpcflow", "--jobs", "1", "--retries", "1", cwd=work)
    assert result.returncode == 0, result.output[-4000:]
    assert (work / "flaky.txt").read_text() == "ok\n"
    assert WARM in _who(work)["flaky"]
    (run_dir,) = run_dirs(work)
    (task_dir,) = (run_dir / "tasks").iterdir()
    assert "attempt 1" in (task_dir / "1.err").read_text()
    assert "attempt 2" in (task_dir / "2.err").read_text()


FAILING = textwrap.dedent(
    """
    rule all:
        input: "bad.txt", "good.txt"

    rule bad:
        output: "bad.txt"
        shell: "echo partial > {output}; echo about to fail >&2; exit 3"

    rule good:
        output: "good.txt"
        shell: "echo fine > {output}"
    """
)


def test_a_failed_job_loses_its_incomplete_outputs_and_says_why(tmp_path: Path, snakemake):
    work = _workflow(tmp_path, FAILING)
    result = snakemake("--executor", "hpcflow", "--jobs", "2", "--keep-going", cwd=work)
    assert result.returncode != 0
    assert not (work / "bad.txt").exists()  # the partial output was removed
    assert (work / "good.txt").read_text() == "fine\n"
    (run_dir,) = run_dirs(work)
    (bad_dir,) = [p for p in (run_dir / "tasks").iterdir() if p.name.startswith("bad")]
    err = (bad_dir / "1.err").read_text()
    assert "about to fail" in err
    assert "Error in rule bad" in err  # Snakemake's own report, from the warm child
    assert str(bad_dir / "1.err") in result.output
    assert "exited with 1" in result.output
    # Nothing is left marked incomplete: a second run only retries the failed job.
    again = snakemake("--executor", "hpcflow", "--jobs", "2", "--keep-going", cwd=work)
    assert "IncompleteFilesException" not in again.output
    assert "rule bad:" in again.output and "rule good:" not in again.output


PARAMS = textwrap.dedent(
    """
    rule all:
        input: "a.txt", "b.txt"

    rule a:
        output: "a.txt"
        params: value=VALUE
        shell: "echo {params.value} > {output}"

    rule b:
        output: "b.txt"
        shell: "echo b > {output}"
    """
)


def test_rerun_triggers_see_what_the_warm_runner_recorded(tmp_path: Path, snakemake):
    work = _workflow(tmp_path, PARAMS.replace("VALUE", "1"))
    first = snakemake("--executor", "hpcflow", "--jobs", "2", cwd=work)
    assert first.returncode == 0, first.output[-4000:]
    write_snakefile(work, PARAMS.replace("VALUE", "2"))
    second = snakemake("--executor", "hpcflow", "--jobs", "2", cwd=work)
    assert second.returncode == 0, second.output[-4000:]
    assert (work / "a.txt").read_text() == "2\n"
    assert "rule a:" in second.output and "rule b:" not in second.output
    write_snakefile(work, PARAMS.replace("VALUE", "3"))
    third = snakemake(
        "--executor", "hpcflow", "--jobs", "2", "--rerun-triggers", "mtime", cwd=work
    )  # fmt: skip
    assert third.returncode == 0, third.output[-4000:]
    assert "Nothing to be done" in third.output
    assert (work / "a.txt").read_text() == "2\n"


ONE_SHELL_JOB = textwrap.dedent(
    """
    rule all:
        input: "one.txt"

    rule one:
        output: "one.txt", who="who/one"
        shell: "echo one > {output[0]}; SHELL_WHO"
    """
).replace("SHELL_WHO", SHELL_WHO)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--precommand", "true"], "runs Snakemake's own job command, not a warm runner: "),
        (["--hpcflow-runner", "command"], ""),
    ],
    ids=["precommand", "runner-command"],
)
def test_what_the_warm_runner_cannot_honour_runs_snakemakes_job_command(
    tmp_path: Path, snakemake, args, said
):
    work = _workflow(tmp_path, ONE_SHELL_JOB)
    result = snakemake("--executor", "hpcflow", "--jobs", "1", *args, cwd=work)
    assert result.returncode == 0, result.output[-4000:]
    assert (work / "one.txt").read_text() == "one\n"
    who = _who(work)["one"]
    assert "-m snakemake" in who and WARM not in who
    assert said in result.output
    assert _runner_logs(work) == []


GROUPED = textwrap.dedent(
    """
    rule all:
        input: expand("g/{i}.txt", i=range(4))

    rule member:
        output: "g/{i}.txt", who="who/member{i}"
        group: "batch"
        shell: "date +%s.%N > {output[0]}; echo $PPID >> {output[0]}; sleep 1; "
               "date +%s.%N >> {output[0]}; SHELL_WHO"
    """
).replace("SHELL_WHO", SHELL_WHO)


def _run_group(work: Path, snakemake, group: str, size: int) -> dict[str, str]:
    """Run ``work``'s Snakefile with ``size`` jobs in one ``group`` job; who ran each."""
    result = snakemake(
        "--executor", "hpcflow", "--hpcflow-local-groups", "--jobs", "1",
        "--group-components", f"{group}={size}",
        cwd=work,
    )  # fmt: skip
    assert result.returncode == 0, result.output[-4000:]
    (run_dir,) = run_dirs(work)
    (task_dir,) = (run_dir / "tasks").iterdir()  # one hpcflow task for the group
    assert task_dir.name.startswith(f"group_{group}")
    return _who(work)


def test_a_group_job_runs_in_one_warm_child_with_its_jobs_in_parallel(tmp_path: Path, snakemake):
    work = _workflow(tmp_path, GROUPED)
    who = _run_group(work, snakemake, "batch", 4)
    assert len(who) == 4 and all(WARM in cmdline for cmdline in who.values())
    members = [(work / "g" / f"{i}.txt").read_text().split() for i in range(4)]
    # One child ran the four (their shells share a parent), at least two at once.
    assert len({parent for _, parent, _ in members}) == 1
    spans = [(float(start), float(end)) for start, _, end in members]
    assert any(a[0] < b[1] and b[0] < a[1] for n, a in enumerate(spans) for b in spans[n + 1 :]), (
        spans
    )


GROUPED_MIXED = textwrap.dedent(
    """
    rule all:
        input: "m/shell.txt", "m/run.txt", "m/shadow.txt"

    rule shell_member:
        output: "m/shell.txt", who="who/shell"
        group: "mixed"
        shell: "echo shell > {output[0]}; SHELL_WHO"

    rule run_member:
        output: "m/run.txt", who="who/run"
        group: "mixed"
        run:
            open(output[0], "w").write("run\\n")
            with open("/proc/self/cmdline") as f:
                open(output.who, "w").write(f.read().replace("\\0", " "))

    rule shadow_member:
        output: "m/shadow.txt", who="who/shadow"
        group: "mixed"
        shadow: "minimal"
        shell: "echo shadow > {output[0]}; SHELL_WHO"
    """
).replace("SHELL_WHO", SHELL_WHO)


def test_a_group_jobs_run_and_shadow_jobs_are_snakemakes_subprocesses(tmp_path: Path, snakemake):
    # As in Snakemake's own group jobs (docs/snakemake.md, "The warm runner"): the
    # group's warm child runs its shell job itself, and starts `python -m snakemake
    # --mode subprocess` for a `run:` job and for a `shadow:` job.
    who = _run_group(_workflow(tmp_path, GROUPED_MIXED), snakemake, "mixed", 3)
    assert WARM in who["shell"] and "--mode" not in who["shell"]
    for kind in ("run", "shadow"):
        assert "-m snakemake" in who[kind] and "--mode subprocess" in who[kind], who[kind]
        assert WARM not in who[kind]
