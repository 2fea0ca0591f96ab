"""One suite for every batch backend (SLURM, PBS Pro, Torque): the golden scripts, shell
syntax, hostile values run through bash, the checks on typed values and extra
directives, and the submit/poll/cancel rules of :class:`BatchBackend` with a scripted
runner. Backend-specific behaviour is tested in test_<backend>_render.py / _parse.py.

Regenerate the golden files after an intended template change with
``HPCFLOW_UPDATE_GOLDEN=1 python -m pytest tests/unit/backends/test_batch_backends.py``
and review the diff.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import jinja2
import pytest

from hpcflow.backends._commands import CommandResult, CommandRunner, CommandTimedOut
from hpcflow.backends._render import (
    Renderer,
    label,
    sh,
    validate_env_name,
    validate_extra_directive,
)
from hpcflow.backends.base import AllocationStatus
from hpcflow.backends.batch import BatchBackend, HarmlessErrors, memory_mib
from hpcflow.backends.pbs import backend as pbs
from hpcflow.backends.slurm import backend as slurm
from hpcflow.errors import ProfileError, SchedulerCommandError, SubmitError
from tests.conftest import HOSTILE_VALUES
from tests.unit.backends.cases import (
    CASE_IDS,
    CASES,
    GOLDEN,
    Case,
    ScriptedRunner,
    request,
    sample,
)

UPDATE = os.environ.get("HPCFLOW_UPDATE_GOLDEN") == "1"

every_backend = pytest.mark.parametrize("case", CASES, ids=CASE_IDS)


def backend_of(case: Case, runner: CommandRunner | None = None) -> BatchBackend:
    return case.make(runner or CommandRunner())


# -- the script ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "name"),
    [(case, name) for case in CASES for name in sorted(case.requests)],
    ids=[f"{case.id}-{name}" for case in CASES for name in sorted(case.requests)],
)
def test_render_matches_golden(case, name):
    script = backend_of(case).render(case.requests[name])
    golden = GOLDEN / case.golden(name)
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(script)
    assert golden.is_file(), f"missing {golden}; run with HPCFLOW_UPDATE_GOLDEN=1"
    assert script == golden.read_text()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@every_backend
def test_every_rendered_script_is_valid_bash(case, tmp_path):
    backend = backend_of(case)
    requests = [*case.requests.values(), *case.hostile_requests()]
    for n, script in enumerate(backend.render(r) for r in requests):
        path = tmp_path / f"{n}.sh"
        path.write_text(script)
        proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{proc.stderr}\n{script}"


@every_backend
def test_directives_come_before_any_command(case):
    """sbatch and PBS stop reading directives at the first command line."""
    backend = backend_of(case)
    for script in (backend.render(r) for r in case.requests.values()):
        lines = script.splitlines()
        last_directive = max(i for i, line in enumerate(lines) if line.startswith(case.prefix))
        before = [line for line in lines[1:last_directive] if line.strip()]
        assert all(line.startswith("#") for line in before), script


@every_backend
def test_job_name_and_comment_cannot_inject_lines(case):
    script = backend_of(case).render(case.requests["hostile"])
    assert case.hostile_job_name in script
    assert "# hpcflow allocation for run run_touch_CANARY;" in script
    # A line that mentions CANARY outside quotes and comments would be an injection.
    for line in script.splitlines():
        if "CANARY" in line and not line.startswith("#"):
            assert "'" in line, line


@every_backend
@pytest.mark.parametrize("task_name", [None, "sim'; $(touch CANARY)\nx"], ids=["pilot", "job"])
def test_hostile_script_runs_through_real_bash(case, tmp_path, task_name):
    """Run the rendered script (pilot, or jobs mode's per-task job with a hostile task
    name) with bash, where directive lines are comments: every argument and environment
    value arrives byte for byte, the working directory is the hostile one, and nothing
    else runs."""
    backend = backend_of(case)
    probe = (
        "import json, os, sys; json.dump({'argv': sys.argv[1:], 'env': os.environ['HOSTILE'],"
        " 'cwd': os.getcwd()}, open(os.environ['PROBE_OUT'], 'w'))"
    )
    for n, value in enumerate(HOSTILE_VALUES):
        work = tmp_path / f"w{n}" / value.replace("/", "_")  # may hold a line break
        work.mkdir(parents=True)
        out = tmp_path / f"probe{n}.json"
        req = request(
            run_dir=tmp_path,
            workdir=work,
            stdout=tmp_path / "o.log",
            stderr=tmp_path / "e.log",
            env={"HOSTILE": value, "PROBE_OUT": str(out)},
            command=[sys.executable, "-c", probe, value, "plain"],
            task_name=task_name,
            array_size=3 if task_name else 0,
        )
        script = tmp_path / f"s{n}.sh"
        script.write_text(backend.render(req))
        proc = subprocess.run(
            ["bash", str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        seen = json.loads(out.read_text())
        assert seen == {"argv": [value, "plain"], "env": value, "cwd": str(work)}
    assert not list(tmp_path.rglob("CANARY"))
    assert not Path("CANARY").exists()


@every_backend
def test_typed_values_are_checked(case):
    backend = backend_of(case)
    for field, value in (("nodes", 0), ("ntasks", 0), ("cpus_per_task", 0),
                         ("gpus_per_node", -1), ("walltime", 0), ("memory_per_node", -1),
                         ("nodes", True), ("ntasks", 1.5), ("account", "a\nb")):  # fmt: skip
        with pytest.raises(ProfileError, match=field):
            backend.render(request(**{field: value}))
    for name in ("A-B", "A=B; touch CANARY; X"):
        with pytest.raises(ProfileError, match="not a valid shell identifier"):
            backend.render(request(env={name: "x"}))
    with pytest.raises(ValueError):
        backend.render(request(command=[]))


@every_backend
def test_extra_directives_are_validated(case):
    backend = backend_of(case)
    for bad in case.bad_extras:
        with pytest.raises(ProfileError) as info:
            backend.render(request(extra_directives=[bad]))
        assert info.value.hint, bad
    script = backend.render(request(extra_directives=list(case.good_extras)))
    expected = "".join(f"{case.prefix} {text}\n" for text in case.good_extras)
    assert f"# Extra directives from the profile.\n{expected}" in script


@every_backend
def test_extra_directives_may_not_repeat_typed_settings(case):
    backend = backend_of(case)
    for overrides, extra, hint in case.repeated_extras:
        with pytest.raises(ProfileError, match="already") as info:
            backend.render(request(**overrides, extra_directives=[extra]))
        assert hint in info.value.hint, (extra, info.value.hint)
    # Not computed from a typed value: allowed.
    backend.render(request(extra_directives=list(case.free_extras)))


@pytest.mark.parametrize(
    ("seconds", "slurm_text", "pbs_text"),
    [(1, "0:00:01", "0:00:01"), (59.2, "0:01:00", "0:01:00"), (3600, "1:00:00", "1:00:00"),
     (86399, "23:59:59", "23:59:59"), (86400, "1-00:00:00", "24:00:00"),
     (90061, "1-01:01:01", "25:01:01"), (10 * 86400 + 5, "10-00:00:05", "240:00:05")],
)  # fmt: skip
def test_walltime_is_rounded_up_in_each_spelling(seconds, slurm_text, pbs_text):
    assert slurm.format_walltime(seconds) == slurm_text  # [D-]H:MM:SS
    assert pbs.format_walltime(seconds) == pbs_text  # hours unbounded


def test_memory_is_whole_mib_rounded_up():
    assert memory_mib(1) == 1
    assert memory_mib(2**20) == 1
    assert memory_mib(2**20 + 1) == 2
    assert memory_mib(16 * 2**30) == 16384


@pytest.mark.parametrize("job_name", [slurm.job_name, pbs.job_name], ids=["slurm", "pbs"])
@pytest.mark.parametrize(
    ("text", "name"),
    [("hello world!", "hello_world"), ("a'; echo foo\n0", "a_echo_foo_0"), ("$()", "hpcflow"),
     ("ok-name_1.2", "ok-name_1.2")],
)  # fmt: skip
def test_job_names_are_labels(job_name, text, name):
    assert job_name(text) == name == label(text)


@pytest.mark.parametrize(
    ("package", "template"),
    [("hpcflow.backends.slurm", "pilot.sbatch.j2"), ("hpcflow.backends.slurm", "job.sbatch.j2"),
     *[("hpcflow.backends.pbs", f"{kind}.{flavor}.j2") for kind in ("pilot", "job")
       for flavor in ("pbs", "torque")]],
)  # fmt: skip
def test_templates_are_strict(package, template):
    with pytest.raises(jinja2.UndefinedError):
        Renderer(package).render(template, {})


def test_renderer_has_one_quoting_filter():
    with pytest.raises(jinja2.TemplateNotFound):
        Renderer("hpcflow.backends.slurm").render("nosuch.j2", {})
    assert sh("it's") == "'it'\"'\"'s'"
    assert sh(3) == "3"
    assert validate_extra_directive("--foo=bar") == "--foo=bar"
    assert validate_env_name("_A1") == "_A1"


# -- submit, poll, cancel: the rules of BatchBackend, with a scripted runner -------------


@every_backend
def test_submit_reads_the_id_and_sorts_failures(case, tmp_path):
    """Success → the id; a refusal → the backend's classifier (permanent, naming the
    setting); a timeout → transient, naming the program; a program that cannot run →
    permanent, with the runner's hint."""
    runner = ScriptedRunner({case.submit_program: [
        (0, case.submitted[0], ""),
        (1, *case.no_such_partition),
        CommandTimedOut((case.submit_program,), 60, "", ""),
        SchedulerCommandError((case.submit_program,), 127, "", f"{case.submit_program}: not found"),
    ]})  # fmt: skip
    backend = backend_of(case, runner)
    script = tmp_path / "1.sh"
    req = request(run_dir=tmp_path, stdout=tmp_path / "a.out", stderr=tmp_path / "a.err")
    assert backend.submit(script, req) == case.submitted[1]
    assert runner.argvs[0][0] == case.submit_program and runner.argvs[0][-1] == str(script)
    with pytest.raises(SubmitError) as info:
        backend.submit(script, req)
    assert not info.value.transient and "partition" in info.value.hint
    assert "Invalid partition name specified" in info.value.message
    with pytest.raises(SubmitError) as info:
        backend.submit(script, req)
    assert info.value.transient and "retry" in info.value.hint
    assert info.value.message == f"{case.submit_program} did not answer within 60 s"
    with pytest.raises(SubmitError) as info:
        backend.submit(script, req)
    assert not info.value.transient
    assert runner.calls[case.submit_program] == 4


def failed_submit(case: Case, stdout: str = "", stderr: str = "", rc: int = 1) -> SubmitError:
    result = CommandResult((case.submit_program,), rc, stdout, stderr, 0.0)
    return backend_of(case).classify_submit_error(result)


# Every permanent error: (backend, stdout, stderr, the setting named, words kept).
PERMANENT = [
    ("slurm", "", sample("sbatch_invalid_partition.txt"), "partition",
     "Invalid partition name specified"),
    ("slurm", "", sample("sbatch_node_config.txt"), "resources",
     "Requested node configuration is not available"),
    ("slurm", "", sample("sbatch_memory.txt"), "memory_per_node",
     "Requested node configuration is not available"),
    ("slurm", "", "sbatch: error: Batch job submission failed: Invalid account or "
     "account/partition combination specified", "account", "Invalid account"),
    ("slurm", "", "sbatch: error: Batch job submission failed: Invalid qos specification", "qos",
     "Invalid qos"),
    ("slurm", "", "sbatch: error: Batch job submission failed: Job violates accounting/QOS "
     "policy (job submit limit, user's size and/or time limits)", "qos", "Job violates"),
    ("slurm", "", "sbatch: error: Batch job submission failed: Requested time limit is invalid "
     "(missing or exceeds some limit)", "walltime", "Requested time limit is invalid"),
    ("slurm", "", "sbatch: error: Batch job submission failed: Invalid feature specification",
     "constraint", "Invalid feature specification"),
    ("pbs-torque", sample("pbs/qsub_invalid_queue.txt"), "", "partition",
     "Invalid partition name specified"),
    ("pbs-torque", sample("pbs/qsub_node_config.txt"), "", "resources",
     "Requested node configuration is not available"),
    ("pbs-torque", sample("pbs/qsub_memory.txt"), "", "memory_per_node",
     "Memory specification can not be satisfied"),
    ("pbs-pro", sample("pbs/qsub_pro_unknown_queue.txt"), "", "partition", "Unknown queue"),
    ("pbs-pro", sample("pbs/qsub_pro_limits.txt"), "", "walltime",
     "violates queue and/or server resource limits"),
    ("pbs-torque", sample("pbs/qsub_torque_unknown_queue.txt"), "", "partition",
     "requested queue not found"),
]  # fmt: skip
BY_ID = dict(zip(CASE_IDS, CASES, strict=True))


@pytest.mark.parametrize(("case_id", "stdout", "stderr", "setting", "words"), PERMANENT)
def test_permanent_submit_errors_name_the_setting(case_id, stdout, stderr, setting, words):
    error = failed_submit(BY_ID[case_id], stdout, stderr)
    assert error.transient is False
    assert setting in error.hint
    assert words in error.message
    assert "sbatch: error:" not in error.message  # prefixes stripped, text kept


# Transient errors: (backend, stderr).
TRANSIENT = [
    ("slurm", "sbatch: error: Batch job submission failed: Socket timed out on send/recv "
     "operation"),
    ("slurm", "sbatch: error: Batch job submission failed: Unable to contact slurm controller "
     "(connect failure)"),
    ("slurm", "sbatch: error: Batch job submission failed: Resource temporarily unavailable"),
    ("pbs-pro", sample("pbs/qsub_pro_connect.txt")),
    ("pbs-pro", "qsub: End of File\n"),
    ("pbs-pro", "pbs_iff: cannot read reply from pbs_server\nNo Permission.\n"),
    ("pbs-torque", "sbatch: error: Batch job submission failed: Socket timed out on send/recv "
     "operation"),
]  # fmt: skip


@pytest.mark.parametrize(("case_id", "stderr"), TRANSIENT)
def test_transient_submit_errors(case_id, stderr):
    error = failed_submit(BY_ID[case_id], stderr=stderr)
    assert error.transient is True and "retry" in error.hint


@every_backend
def test_unknown_submit_error_is_permanent_and_keeps_the_message(case):
    program = case.submit_program
    error = failed_submit(case, stderr=f"{program}: something new went wrong\n", rc=7)
    assert error.transient is False
    assert error.message == f"{program} failed: something new went wrong"
    assert "hpcflow render" in error.hint
    assert failed_submit(case, rc=9).message == f"{program} failed: {program} exited with 9"


@every_backend
def test_submit_limits_are_not_other_refusals(case):
    assert not failed_submit(case, *case.no_such_partition).limit


@every_backend
def test_poll_asks_once_for_every_id(case):
    lookups = {program: list(answers) for program, answers in case.purged_lookup.items()}
    runner = ScriptedRunner({case.poll_program: [(0, "", "")], **lookups})
    backend = backend_of(case, runner)
    assert backend.poll([]) == {} and runner.argvs == []  # nothing to ask: no call
    assert backend.poll(["7", "8", "7"]) == {}
    (argv,) = [argv for argv in runner.argvs if argv[0] == case.poll_program]
    assert argv[0] == case.poll_program
    assert " ".join(argv).count("7") == 1 and "8" in " ".join(argv)


@every_backend
def test_poll_raises_real_failures(case):
    runner = ScriptedRunner({case.poll_program: [
        case.failed_poll, CommandTimedOut((case.poll_program,), 30, "", "")
    ]})  # fmt: skip
    backend = backend_of(case, runner)
    with pytest.raises(SchedulerCommandError) as info:
        backend.poll(["1"])
    assert info.value.returncode == case.failed_poll[0]
    with pytest.raises(CommandTimedOut):
        backend.poll(["1"])


@every_backend
def test_cancel_is_one_call_and_ignores_ended_or_unknown_jobs(case):
    runner = ScriptedRunner({case.cancel_program: [*case.harmless_cancels, case.failed_cancel]})
    backend = backend_of(case, runner)
    backend.cancel(["10", "11", "10"])
    assert runner.argvs[0] == (case.cancel_program, "10", "11")  # each id once
    for _ in case.harmless_cancels[1:]:
        backend.cancel(["12"])
    with pytest.raises(SchedulerCommandError):
        backend.cancel(["14"])
    backend.cancel([])  # nothing to cancel: no call
    assert runner.calls[case.cancel_program] == len(case.harmless_cancels) + 1


def test_harmless_errors_read_every_line():
    result = CommandResult(("x",), 1, "Unknown Job Id 1\n", "\nunknown job id 2\n", 0.0)
    assert HarmlessErrors(("unknown job id",), read_stdout=True, fold_case=True).covers(result)
    assert not HarmlessErrors(("unknown job id",), read_stdout=True).covers(result)  # case
    assert HarmlessErrors(("unknown job id",)).covers(result)  # stderr only
    assert HarmlessErrors(("x",)).covers(replace(result, stdout="", stderr=""))  # silent
    mixed = replace(result, stderr="unknown job id 2\npermission denied\n")
    assert not HarmlessErrors(("unknown job id",)).covers(mixed)


class Asker(BatchBackend):
    """The smallest batch backend: answers the base's questions, for the base's rules."""

    name = system = "asker"
    templates_package = "hpcflow.backends.slurm"
    pilot_template = job_template = "pilot.sbatch.j2"
    busy_hint = "busy"
    transient_errors = ()
    permanent_errors = ()
    harmless_cancel = HarmlessErrors(())

    def __init__(self, runner: CommandRunner, refusals: int = 0) -> None:
        super().__init__(runner)
        self.refusals = refusals
        self.missing: list[list[str]] = []

    def directives(self, request):
        return []

    def submit_argv(self, script, request):
        return ["ask-submit", str(script)]

    def parse_submit(self, stdout):
        return stdout.strip()

    def submit_error_text(self, result):
        return result.stderr

    def submit_error_message(self, text):
        return text.strip()

    def poll_argv(self, ids):
        return ["ask", f"--way={self.refusals}", *ids]

    def parse_poll(self, result, ids):
        if self.refusals:
            self.refusals -= 1
            return None
        return {i: AllocationStatus(i, slurm.to_state("RUNNING"), "RUNNING") for i in ids[:1]}

    def poll_missing(self, ids):
        self.missing.append(ids)
        return {}

    def cancel_argv(self, ids):
        return ["ask-cancel", *ids]


def test_a_refused_status_question_is_asked_once_more_the_other_way():
    runner = ScriptedRunner({"ask": [(2, "", "unknown option"), (0, "", "")]})
    backend = Asker(runner, refusals=1)
    assert list(backend.poll(["1", "2"])) == ["1"]
    assert [argv[1] for argv in runner.argvs] == ["--way=1", "--way=0"]
    assert backend.missing == [["2"]]  # the ids it did not know, asked elsewhere
    runner = ScriptedRunner({"ask": [(2, "", "unknown option")] * 3})
    with pytest.raises(SchedulerCommandError):
        Asker(runner, refusals=5).poll(["1"])
    assert runner.calls["ask"] == 2  # never more than twice


def test_submit_names_the_program_and_uses_the_submit_timeout(tmp_path):
    seen: list[float | None] = []

    class Timing(ScriptedRunner):
        def run(self, argv, *, timeout=None, input=None):
            seen.append(timeout)
            return super().run(argv, timeout=timeout, input=input)

    runner = Timing({"ask-submit": [(0, "42\n", ""), (3, "", "no\n"),
                                    CommandTimedOut(("ask-submit",), 5, "", "")]})  # fmt: skip
    backend = Asker(runner)
    backend.submit_timeout, backend.query_timeout = 5.0, 1.0
    assert backend.submit(tmp_path / "s", request()) == "42"
    with pytest.raises(SubmitError, match="ask-submit failed: no"):
        backend.submit(tmp_path / "s", request())
    with pytest.raises(SubmitError, match="ask-submit did not answer within 5 s") as info:
        backend.submit(tmp_path / "s", request())
    assert info.value.transient and info.value.hint == "busy"
    assert seen == [5.0, 5.0, 5.0]
