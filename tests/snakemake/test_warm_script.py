"""Python ``script:`` and ``wrapper:`` jobs run forked from the warm runner's job process
(snakemake_executor_plugin_hpcflow.warm_script), and what a script sees there is what it
sees in the fresh interpreter Snakemake starts (real ``snakemake`` processes, local mode).

The probe script records what a script can observe of its process (its name, argv, the
variables Snakemake's shell sets, exit handlers, threads, asyncio) and whether the warm
runner's modules are loaded in it: they are in a fork, not in a fresh interpreter.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.snakemake.helpers import run_dirs, write_snakefile

pytestmark = pytest.mark.slow

PROBE = textwrap.dedent(
    """
    import asyncio, atexit, json, logging, os, sys, threading, time

    print("probe says hello on stdout")
    print("probe says hello on stderr", file=sys.stderr)

    def at_exit():
        open(snakemake.output.at_exit, "w").write("ran\\n")

    def late():
        time.sleep(0.3)
        open(snakemake.output.thread, "w").write("joined\\n")

    atexit.register(at_exit)
    threading.Thread(target=late).start()  # not a daemon: the interpreter waits for it

    async def answer():
        return 42

    facts = {
        "forked": "snakemake_executor_plugin_hpcflow.warm_script" in sys.modules,
        "name": __name__,
        "argv": [
            os.path.relpath(os.path.dirname(sys.argv[0])),
            sys.argv[0].endswith(".probe.py"),
            len(sys.argv),
        ],
        "path0_is_script_dir": os.path.samefile(sys.path[0], os.path.dirname(sys.argv[0])),
        "threads": [os.environ.get(v) for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")],
        "tmpdir": [os.environ.get(v) for v in ("TMPDIR", "TMP", "TEMP", "TEMPDIR")],
        "asyncio": asyncio.run(answer()),
        "rule": snakemake.rule,
        "param": snakemake.params.word,
        "log_handlers": len(logging.getLogger("snakemake.logging").handlers),
        "active_threads": threading.active_count(),
    }
    with open(snakemake.log[0], "w") as f:
        f.write("logged\\n")
    json.dump(facts, open(snakemake.output.facts, "w"))
    """
)

WRAPPER = textwrap.dedent(
    """
    import sys
    open(snakemake.output[0], "w").write(
        str("snakemake_executor_plugin_hpcflow.warm_script" in sys.modules) + "\\n"
    )
    """
)

PROBED = textwrap.dedent(
    """
    rule all:
        input: "probe/facts.json", "bench/facts.json", "wrapped.txt"

    rule probe:
        output: facts="probe/facts.json", at_exit="probe/at_exit", thread="probe/thread"
        params: word="hello"
        threads: 2
        resources: tmpdir="TMP"
        log: "logs/probe.log"
        script: "scripts/probe.py"

    rule bench:
        output: facts="bench/facts.json", at_exit="bench/at_exit", thread="bench/thread"
        params: word="bench"
        log: "logs/bench.log"
        benchmark: "benchmarks/bench.tsv"
        script: "scripts/probe.py"

    rule wrapped:
        output: "wrapped.txt"
        wrapper: "file://WRAPPERS/forked"
    """
)

FAILING = textwrap.dedent(
    """
    rule all:
        input: "raises.txt", "exits.txt"

    rule raises:
        output: "raises.txt"
        script: "scripts/raises.py"

    rule exits:
        output: "exits.txt"
        script: "scripts/exits.py"
    """
)

RAISES = textwrap.dedent(
    """
    open(snakemake.output[0], "w").write("partial\\n")

    def deep():
        raise ValueError("broken on purpose")

    deep()
    """
)

EXITS = 'import sys\nprint("leaving with 3", file=sys.stderr)\nsys.exit(3)\n'


def _workflow(tmp_path: Path, text: str) -> Path:
    work = tmp_path / "work"
    wrappers = tmp_path / "wrappers" / "forked"
    wrappers.mkdir(parents=True)
    (wrappers / "wrapper.py").write_text(WRAPPER)
    (wrappers / "environment.yaml").write_text("dependencies: []\n")
    text = text.replace("WRAPPERS", str(tmp_path / "wrappers"))
    write_snakefile(work, text.replace("TMP", str(tmp_path / "scratch")))
    (tmp_path / "scratch").mkdir()
    scripts = work / "scripts"
    scripts.mkdir()
    (scripts / "probe.py").write_text(PROBE)
    (scripts / "raises.py").write_text(RAISES)
    (scripts / "exits.py").write_text(EXITS)
    return work


def _facts(work: Path, rule: str) -> dict:
    return json.loads((work / rule / "facts.json").read_text())


def _task_log(work: Path, rule: str, stream: str) -> str:
    (run_dir,) = run_dirs(work)[-1:]
    (task_dir,) = [p for p in (run_dir / "tasks").iterdir() if p.name.startswith(rule)]
    return (task_dir / f"1.{stream}").read_text()


def _run(snakemake, work: Path, *args: str):
    return snakemake("--executor", "hpcflow", "--jobs", "3", *args, cwd=work)


def test_a_script_runs_forked_and_sees_what_a_fresh_interpreter_shows_it(tmp_path: Path, snakemake):
    forked = _workflow(tmp_path / "warm", PROBED)
    result = _run(snakemake, forked)
    assert result.returncode == 0, result.output[-4000:]
    fresh = _workflow(tmp_path / "fresh", PROBED)
    baseline = _run(snakemake, fresh, "--hpcflow-runner", "command")
    assert baseline.returncode == 0, baseline.output[-4000:]

    seen, expected = _facts(forked, "probe"), _facts(fresh, "probe")
    assert seen.pop("forked") is True and expected.pop("forked") is False
    # The scratch folders differ by test folder only.
    assert seen.pop("tmpdir") == [str(tmp_path / "warm" / "scratch")] * 4
    assert expected.pop("tmpdir") == [str(tmp_path / "fresh" / "scratch")] * 4
    assert seen == expected
    assert seen["name"] == "__main__" and seen["argv"] == [".snakemake/scripts", True, 1]
    assert seen["threads"] == ["2", "2"]
    assert seen["asyncio"] == 42 and seen["active_threads"] == 2 and seen["log_handlers"] == 0
    for work in (forked, fresh):
        assert (work / "probe" / "at_exit").read_text() == "ran\n"
        assert (work / "probe" / "thread").read_text() == "joined\n"
        assert (work / "logs" / "probe.log").read_text() == "logged\n"
        assert "probe says hello on stdout" in _task_log(work, "probe", "out")
        assert "probe says hello on stderr" in _task_log(work, "probe", "err")
        # Snakemake removes its temporary script files after the job.
        assert not list((work / ".snakemake" / "scripts").iterdir())
    # A benchmarked script runs in a fresh interpreter (it measures its process).
    assert _facts(forked, "bench")["forked"] is False
    assert (forked / "benchmarks" / "bench.tsv").read_text().startswith("s\t")
    # A wrapper is a script too.
    assert (forked / "wrapped.txt").read_text() == "True\n"
    assert (fresh / "wrapped.txt").read_text() == "False\n"
    # Nothing to do the second time.
    again = _run(snakemake, forked)
    assert again.returncode == 0 and "Nothing to be done" in again.output


def test_a_failing_script_fails_its_job_as_in_a_fresh_interpreter(tmp_path: Path, snakemake):
    work = _workflow(tmp_path, FAILING)
    result = _run(snakemake, work, "--keep-going")
    assert result.returncode != 0
    assert not (work / "raises.txt").exists()  # its partial output was removed
    raised = _task_log(work, "raises", "err")
    # The interpreter's traceback, from the script's frames on, then Snakemake's report.
    start = raised.index("Traceback (most recent call last):")
    traceback = raised[start : raised.index("ValueError: broken on purpose", start)]
    frames = [line for line in traceback.splitlines() if line.startswith('  File "')]
    assert len(frames) == 2 and all("raises.py" in f for f in frames), traceback
    assert "runpy" not in traceback and "warm_script" not in traceback
    assert "returned non-zero exit status 1" in raised
    assert "Error in rule raises" in raised
    exited = _task_log(work, "exits", "err")
    assert "leaving with 3" in exited and "returned non-zero exit status 3" in exited
    assert "Traceback" not in exited.split("leaving with 3")[1].split("Error in rule")[0]


def test_a_shell_prefix_keeps_scripts_in_a_fresh_interpreter(tmp_path: Path, snakemake):
    # The prefix runs before the interpreter (say, to set up its environment).
    text = 'shell.prefix("export PROBE_PREFIX=set; ")\n' + PROBED.replace(
        '"bench/facts.json", "wrapped.txt"', ""
    )
    work = _workflow(tmp_path, text)
    (work / "scripts" / "probe.py").write_text(
        PROBE.replace('"rule": snakemake.rule', '"prefix": os.environ.get("PROBE_PREFIX")')
    )
    result = _run(snakemake, work)
    assert result.returncode == 0, result.output[-4000:]
    facts = _facts(work, "probe")
    assert facts["forked"] is False and facts["prefix"] == "set"
