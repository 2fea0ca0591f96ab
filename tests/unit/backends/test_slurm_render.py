"""The SLURM batch script: golden files, shell syntax, hostile values run through bash.

Regenerate the golden files after an intended template change with
``HPCFLOW_UPDATE_GOLDEN=1 python -m pytest tests/unit/backends/test_slurm_render.py``
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

from hpcflow.backends._commands import CommandRunner
from hpcflow.backends._render import (
    Renderer,
    sh,
    validate_env_name,
    validate_extra_directive,
)
from hpcflow.backends.base import AllocationRequest
from hpcflow.backends.slurm import SlurmBackend
from hpcflow.backends.slurm.backend import (
    directive_path,
    directive_value,
    format_walltime,
    job_name,
    memory_mib,
)
from hpcflow.errors import ProfileError, RunError
from tests.conftest import HOSTILE_VALUES

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "slurm"
UPDATE = os.environ.get("HPCFLOW_UPDATE_GOLDEN") == "1"

RUN = Path("/scratch/alice/wf/.hpcflow/runs/20261129-101500-ab12")


def request(**overrides) -> AllocationRequest:
    base = AllocationRequest(
        run_id="20261129-101500-ab12",
        job_name="hpcflow-hello",
        run_dir=RUN,
        stdout=RUN / "allocation.out",
        stderr=RUN / "allocation.err",
        command=["python", "-m", "hpcflow.bootstrap", str(RUN)],
    )
    return replace(base, **overrides)


REQUESTS = {
    "minimal": request(),
    "multinode_gpu": request(
        job_name="train sweep",
        nodes=4,
        ntasks=8,
        cpus_per_task=2,
        gpus_per_node=2,
        memory_per_node=16 * 2**30,
        walltime=2 * 86400 + 3 * 3600 + 4 * 60 + 5,
        partition="gpu",
        account="proj-42",
        qos="high",
        constraint="a100&ib",
        extra_directives=["--exclusive", "--mail-type=END,FAIL"],
        setup_lines=["module load cuda/12.2", "source /opt/site/env.sh"],
        env={"OMPI_MCA_btl": "self,tcp", "HPCFLOW_LOG_LEVEL": "debug"},
        command=["srun", "--kill-on-bad-exit=0", "python", "-m", "hpcflow.bootstrap", str(RUN)],
    ),
    "overcommit_short": request(ntasks=6, overcommit=True, walltime=59.2, workdir=Path("/work")),
    "hostile": request(
        run_id="run'; touch CANARY",
        job_name="a'; echo foo\n0 $(touch CANARY)",
        run_dir=Path('/scratch/it\'s a "dir"; $(touch CANARY)'),
        stdout=Path('/scratch/it\'s a "dir"; $(touch CANARY)/out 100%.log'),
        stderr=Path('/scratch/it\'s a "dir"; $(touch CANARY)/err `x`.log'),
        env={"VALUE": "x; touch CANARY", "QUOTES": 'it\'s "quoted"', "NL": "a\nb"},
        command=["echo", "$(touch CANARY)", "a b", "it's", "`touch CANARY`"],
    ),
    # Jobs mode: one task's sweep as an array with a concurrency cap, after two jobs.
    "job_array": request(
        job_name="hpcflow-20261129-101500-ab12-simulate",
        stdout=RUN / "jobs" / "3.out",
        stderr=RUN / "jobs" / "3.err",
        cpus_per_task=2,
        memory_per_node=100 * 2**20,
        walltime=360,
        partition="debug",
        command=["python", "-m", "hpcflow.runtime.jobtask", str(RUN), "3"],
        task_name="simulate",
        array_size=200,
        array_parallelism=8,
        depends_on=("101", "102"),
    ),
    # Jobs mode: one MPI task (4 ranks over 2 nodes), no array.
    "job_mpi": request(
        job_name="hpcflow-20261129-101500-ab12-allreduce",
        stdout=RUN / "jobs" / "1.out",
        stderr=RUN / "jobs" / "1.err",
        nodes=2,
        ntasks=4,
        command=["python", "-m", "hpcflow.runtime.jobtask", str(RUN), "1"],
        task_name="allreduce",
    ),
    "job_hostile": request(
        run_id="run'; touch CANARY",
        job_name="a'; echo foo\n0 $(touch CANARY)",
        run_dir=Path('/scratch/it\'s a "dir"; $(touch CANARY)'),
        stdout=Path('/scratch/it\'s a "dir"; $(touch CANARY)/out 100%.log'),
        stderr=Path('/scratch/it\'s a "dir"; $(touch CANARY)/err `x`.log'),
        env={"VALUE": "x; touch CANARY", "QUOTES": 'it\'s "quoted"', "NL": "a\nb"},
        command=["echo", "$(touch CANARY)", "a b", "it's", "`touch CANARY`"],
        task_name="t'; $(touch CANARY)\nx",
        array_size=3,
    ),
}


@pytest.fixture(scope="module")
def backend() -> SlurmBackend:
    return SlurmBackend(CommandRunner())


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_render_matches_golden(backend, name):
    script = backend.render(REQUESTS[name])
    golden = GOLDEN / f"{name}.sbatch"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(script)
    assert golden.is_file(), f"missing {golden}; run with HPCFLOW_UPDATE_GOLDEN=1"
    assert script == golden.read_text()


def hostile_requests() -> list[AllocationRequest]:
    """One request per hostile value, placed everywhere a value can go."""
    out = []
    for value in HOSTILE_VALUES:
        path_safe = "\n" not in value
        folder = Path("/scratch") / value.replace("/", "_") if path_safe else RUN
        out.append(
            request(
                run_id=value,
                job_name=value,
                run_dir=folder,
                stdout=folder / f"{value.replace('/', '_')}.out" if path_safe else RUN / "o",
                env={"HOSTILE": value},
                command=["echo", value],
                constraint=value if path_safe else None,
            )
        )
    return out


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_every_rendered_script_is_valid_bash(backend, tmp_path):
    scripts = [backend.render(r) for r in [*REQUESTS.values(), *hostile_requests()]]
    for n, script in enumerate(scripts):
        path = tmp_path / f"{n}.sbatch"
        path.write_text(script)
        proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{proc.stderr}\n{script}"


def test_sbatch_lines_come_before_any_command(backend):
    """sbatch stops reading #SBATCH at the first command line."""
    for script in (backend.render(r) for r in REQUESTS.values()):
        lines = script.splitlines()
        last_directive = max(i for i, line in enumerate(lines) if line.startswith("#SBATCH"))
        before = [line for line in lines[1:last_directive] if line.strip()]
        assert all(line.startswith("#") for line in before), script


def test_job_name_and_comment_cannot_inject_lines(backend):
    script = backend.render(REQUESTS["hostile"])
    assert "#SBATCH --job-name=a_echo_foo_0_touch_CANARY\n" in script
    assert "# hpcflow allocation for run run_touch_CANARY;" in script
    # The only line that mentions CANARY outside quotes/comments would be an injection.
    for line in script.splitlines():
        if "CANARY" in line and not line.startswith("#"):
            assert "'" in line, line


#: Pilot allocation (None) and jobs mode's per-task job script (a hostile task name).
JOB_KINDS = [None, "sim'; $(touch CANARY)\nx"]


@pytest.mark.parametrize("task_name", JOB_KINDS, ids=["pilot", "job"])
def test_hostile_script_runs_through_real_bash(backend, tmp_path, task_name):
    """Run the rendered script with bash (the #SBATCH lines are comments there): every
    argument and environment value arrives byte for byte, and nothing else runs."""
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
        script = tmp_path / f"s{n}.sbatch"
        script.write_text(backend.render(req))
        proc = subprocess.run(
            ["bash", str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        seen = json.loads(out.read_text())
        assert seen == {"argv": [value, "plain"], "env": value, "cwd": str(work)}
    assert not list(tmp_path.rglob("CANARY"))
    assert not Path("CANARY").exists()


def test_paths_with_line_breaks_or_backslashes_are_refused(backend):
    for bad in ("/scratch/a\nb/out.log", "/scratch/a\rb/out.log", "/scratch/a\\b/out.log"):
        with pytest.raises(RunError, match="line break, NUL or backslash") as info:
            backend.render(request(stdout=Path(bad)))
        assert info.value.hint


def test_directive_values_are_one_token():
    assert directive_value("debug", "partition") == "debug"
    assert directive_value("a100&ib", "constraint") == '"a100&ib"'
    assert directive_value('say "hi" \\o/', "qos") == '"say \\"hi\\" \\\\o/"'
    with pytest.raises(ProfileError, match="partition"):
        directive_value("debug\n#SBATCH --account=other", "partition")
    assert directive_path("/tmp/a b/x.out") == '"/tmp/a b/x.out"'
    assert directive_path("/tmp/50%/%j.out") == "/tmp/50%%/%%j.out"


def test_typed_values_are_checked(backend):
    with pytest.raises(ProfileError, match="nodes"):
        backend.render(request(nodes=0))
    with pytest.raises(ProfileError, match="walltime"):
        backend.render(request(walltime=0))
    with pytest.raises(ProfileError, match="memory_per_node"):
        backend.render(request(memory_per_node=-1))
    with pytest.raises(ProfileError, match="account"):
        backend.render(request(account="a\nb"))
    with pytest.raises(ProfileError, match="not a valid shell identifier"):
        backend.render(request(env={"A-B": "x"}))
    with pytest.raises(ProfileError, match="not a valid shell identifier"):
        backend.render(request(env={"A=B; touch CANARY; X": "x"}))


def test_extra_directives_are_validated(backend):
    for bad in ("--foo\n#SBATCH --bar", "--foo=a\rb", "--foo=a\x00", "--foo bar", "echo hi",
                "--comment='a b'", "--x=\"y\"", "#SBATCH --foo", "", "--"):  # fmt: skip
        with pytest.raises(ProfileError) as info:
            backend.render(request(extra_directives=[bad]))
        assert info.value.hint
    script = backend.render(request(extra_directives=["--exclusive", "-s", "--gres=gpu:a100:1"]))
    assert "#SBATCH --exclusive\n#SBATCH -s\n#SBATCH --gres=gpu:a100:1\n" in script


def test_extra_directives_may_not_repeat_typed_settings(backend):
    with pytest.raises(ProfileError, match="partition setting"):
        backend.render(request(partition="debug", extra_directives=["--partition=gpu"]))
    with pytest.raises(ProfileError, match="partition setting"):
        backend.render(request(partition="debug", extra_directives=["-pgpu"]))
    with pytest.raises(ProfileError, match="stdout setting"):
        backend.render(request(extra_directives=["--output=/tmp/x"]))
    # Not set by a typed value: allowed.
    backend.render(request(extra_directives=["--partition=gpu"]))


def test_empty_command_is_a_bug(backend):
    with pytest.raises(ValueError):
        backend.render(request(command=[]))


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(1, "0:00:01"), (59.2, "0:01:00"), (3600, "1:00:00"), (86399, "23:59:59"),
     (86400, "1-00:00:00"), (90061, "1-01:01:01"), (10 * 86400 + 5, "10-00:00:05")],
)  # fmt: skip
def test_format_walltime(seconds, text):
    assert format_walltime(seconds) == text


def test_memory_and_names():
    assert memory_mib(1) == 1
    assert memory_mib(2**20) == 1
    assert memory_mib(2**20 + 1) == 2
    assert memory_mib(16 * 2**30) == 16384
    assert job_name("hello world!") == "hello_world"
    assert job_name("a'; echo foo\n0") == "a_echo_foo_0"
    assert job_name("$()") == "hpcflow"
    assert job_name("ok-name_1.2") == "ok-name_1.2"


def test_renderer_is_strict_and_has_one_quoting_filter(tmp_path):
    renderer = Renderer("hpcflow.backends.slurm")
    with pytest.raises(jinja2.UndefinedError):
        renderer.render("pilot.sbatch.j2", {})
    with pytest.raises(jinja2.TemplateNotFound):
        renderer.render("nosuch.j2", {})
    assert sh("it's") == "'it'\"'\"'s'"
    assert sh(3) == "3"
    assert validate_extra_directive("--foo=bar") == "--foo=bar"
    assert validate_env_name("_A1") == "_A1"
