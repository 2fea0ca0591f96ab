"""The PBS batch scripts (PBS Pro and Torque): golden files, shell syntax, hostile values
run through bash, and the checks on every value that reaches a #PBS line or qsub.

Regenerate the golden files after an intended template change with
``HPCFLOW_UPDATE_GOLDEN=1 python -m pytest tests/unit/backends/test_pbs_render.py``
and review the diff.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import jinja2
import pytest

from hpcflow.backends._commands import CommandRunner
from hpcflow.backends._render import Renderer
from hpcflow.backends.base import AllocationRequest
from hpcflow.backends.pbs import PbsBackend
from hpcflow.backends.pbs.backend import (
    MAX_JOB_NAME,
    cpus_per_node,
    directive_value,
    format_walltime,
    job_name,
    memory_mb,
    needs_oversubscribe,
    qsub_path,
    ranks_per_node,
    validate_extra_directive,
)
from hpcflow.backends.registry import get_backend
from hpcflow.errors import ProfileError, RunError
from hpcflow.settings.profile import Profile
from tests.conftest import HOSTILE_VALUES

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "pbs"
UPDATE = os.environ.get("HPCFLOW_UPDATE_GOLDEN") == "1"
FLAVORS = ("pro", "torque")

RUN = Path("/scratch/alice/wf/.hpcflow/runs/20261129-101500-ab12")
HOSTILE_DIR = Path('/scratch/it\'s a "dir"; $(touch CANARY) `x` 50%')


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
        ntasks=10,
        cpus_per_task=8,
        gpus_per_node=2,
        memory_per_node=16 * 2**30,
        walltime=2 * 86400 + 3 * 3600 + 4 * 60 + 5,
        partition="gpu",
        account="proj-42",
        extra_directives=["-m abe", "-W group_list=hpc"],
        setup_lines=["module load cuda/12.2", "source /opt/site/env.sh"],
        env={"OMPI_MCA_btl": "self,tcp", "HPCFLOW_LOG_LEVEL": "debug"},
        command=["mpirun", "-n", "10", "python", "-m", "hpcflow.bootstrap", str(RUN)],
    ),
    # The pilot on one 2-CPU node: 3 ranks share the cores.
    "overcommit_short": request(
        ntasks=3, cpus_per_task=2, overcommit=True, walltime=59.2, workdir=Path("/work")
    ),
    # Everything hostile that may reach the script: names, the working directory (only
    # in a shell line), environment values, the command. The log paths go to qsub and
    # #PBS lines and must be plain (see test_paths_that_qsub_cannot_carry_are_refused).
    "hostile": request(
        run_id="run'; touch CANARY",
        job_name="a'; echo foo\n0 $(touch CANARY)",
        workdir=HOSTILE_DIR,
        env={"VALUE": "x; touch CANARY", "QUOTES": 'it\'s "quoted"', "NL": "a\nb"},
        command=["echo", "$(touch CANARY)", "a b", "it's", "`touch CANARY`"],
    ),
    # Jobs mode: one task's sweep as an array (PBS Pro -J, Torque -t) with a concurrency
    # cap, after two jobs.
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
        depends_on=("101.pbs", "102[].pbs"),
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
        workdir=HOSTILE_DIR,
        env={"VALUE": "x; touch CANARY", "QUOTES": 'it\'s "quoted"', "NL": "a\nb"},
        command=["echo", "$(touch CANARY)", "a b", "it's", "`touch CANARY`"],
        task_name="t'; $(touch CANARY)\nx",
        array_size=3,
    ),
}


@pytest.fixture(scope="module", params=FLAVORS)
def backend(request) -> PbsBackend:
    return PbsBackend(CommandRunner(), flavor=request.param)


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_render_matches_golden(flavor, name):
    script = PbsBackend(CommandRunner(), flavor=flavor).render(REQUESTS[name])
    golden = GOLDEN / f"{name}.{flavor}.pbs"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(script)
    assert golden.is_file(), f"missing {golden}; run with HPCFLOW_UPDATE_GOLDEN=1"
    assert script == golden.read_text()


def test_resource_lines_per_flavor():
    req = REQUESTS["multinode_gpu"]
    pro = PbsBackend(CommandRunner(), flavor="pro").render(req)
    assert "#PBS -l select=4:ncpus=24:mpiprocs=3:ngpus=2:mem=16384mb\n" in pro
    assert "#PBS -l place=scatter\n" in pro
    assert "#PBS -l walltime=51:04:05\n" in pro
    torque = PbsBackend(CommandRunner(), flavor="torque").render(req)
    assert "#PBS -l nodes=4:ppn=24:gpus=2\n" in torque
    assert "#PBS -l mem=65536mb\n" in torque  # Torque's mem is the whole job's
    assert "place=" not in torque and "select=" not in torque
    for script in (pro, torque):
        assert "#PBS -N train_sweep\n#PBS -o " in script
        assert "#PBS -q gpu\n" in script and "#PBS -A proj-42\n" in script
        assert "#PBS -m abe\n#PBS -W group_list=hpc\n" in script


def test_overcommit_lets_mpirun_oversubscribe_only_where_slots_are_short():
    req = REQUESTS["overcommit_short"]
    pro = PbsBackend(CommandRunner(), flavor="pro").render(req)
    assert "#PBS -l select=1:ncpus=2:mpiprocs=3\n" in pro  # 3 slots listed: enough
    assert "oversubscribe" not in pro
    torque = PbsBackend(CommandRunner(), flavor="torque").render(req)
    assert "#PBS -l nodes=1:ppn=2\n" in torque  # 2 slots for 3 ranks
    assert "\nexport OMPI_MCA_rmaps_base_oversubscribe=1\n" in torque
    # Three nodes of 2 slots hold the 5 ranks of a 3-worker pilot: nothing to allow.
    spread = replace(req, nodes=3, ntasks=5)
    assert not needs_oversubscribe(spread, "torque")
    assert not needs_oversubscribe(replace(req, overcommit=False), "torque")


def test_shape_arithmetic():
    req = request(nodes=3, ntasks=7, cpus_per_task=4)
    assert ranks_per_node(req) == 3
    assert cpus_per_node(req) == 12
    assert cpus_per_node(replace(req, overcommit=True)) == 4


def hostile_requests() -> list[AllocationRequest]:
    """One request per hostile value, placed everywhere a free-form value can go."""
    return [
        request(run_id=value, job_name=value, workdir=Path("/scratch") / value.replace("/", "_"),
                env={"HOSTILE": value}, command=["echo", value], setup_lines=[])
        for value in HOSTILE_VALUES
    ]  # fmt: skip


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_every_rendered_script_is_valid_bash(backend, tmp_path):
    scripts = [backend.render(r) for r in [*REQUESTS.values(), *hostile_requests()]]
    for n, script in enumerate(scripts):
        path = tmp_path / f"{n}.pbs"
        path.write_text(script)
        proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{proc.stderr}\n{script}"


def test_pbs_lines_come_before_any_command(backend):
    """PBS (and sbatch reading #PBS) stop reading directives at the first command."""
    for script in (backend.render(r) for r in REQUESTS.values()):
        lines = script.splitlines()
        last_directive = max(i for i, line in enumerate(lines) if line.startswith("#PBS"))
        before = [line for line in lines[1:last_directive] if line.strip()]
        assert all(line.startswith("#") for line in before), script


def test_job_name_and_comment_cannot_inject_lines(backend):
    script = backend.render(REQUESTS["hostile"])
    assert "#PBS -N a_echo_foo_0_touch_CANARY\n" in script
    assert "# hpcflow allocation for run run_touch_CANARY;" in script
    # A line that mentions CANARY outside quotes and comments would be an injection.
    for line in script.splitlines():
        if "CANARY" in line and not line.startswith("#"):
            assert "'" in line, line


#: Pilot allocation (None) and jobs mode's per-task job script (a hostile task name).
JOB_KINDS = [None, "sim'; $(touch CANARY)\nx"]


@pytest.mark.parametrize("task_name", JOB_KINDS, ids=["pilot", "job"])
def test_hostile_script_runs_through_real_bash(backend, tmp_path, task_name):
    """Run the rendered script with bash (#PBS lines are comments there): every argument
    and environment value arrives byte for byte, the working directory is the hostile
    one, and nothing else runs."""
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
        script = tmp_path / f"s{n}.pbs"
        script.write_text(backend.render(req))
        proc = subprocess.run(
            ["bash", str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        seen = json.loads(out.read_text())
        assert seen == {"argv": [value, "plain"], "env": value, "cwd": str(work)}
    assert not list(tmp_path.rglob("CANARY"))
    assert not Path("CANARY").exists()


def test_paths_that_qsub_cannot_carry_are_refused(backend, tmp_path):
    unsafe = [v for v in HOSTILE_VALUES if not re.fullmatch(r"[\w./-]+", v)]
    assert len(unsafe) >= 8
    for value in [*unsafe, "host:path", "50%", "a\\b", "~user"]:
        bad = Path("/scratch") / value.replace("/", "_") / "out.log"
        with pytest.raises(RunError, match="PBS cannot be given the path") as info:
            backend.render(request(stdout=bad))
        assert "letters, digits" in info.value.hint
        with pytest.raises(RunError):
            qsub_path(bad)
    # submit refuses before running anything (the runner would count a call).
    runner = CommandRunner()
    pbs = PbsBackend(runner, flavor=backend.flavor)
    with pytest.raises(RunError):
        pbs.submit(tmp_path / "a b.sh", request())
    assert sum(runner.calls.values()) == 0
    assert qsub_path("/scratch/a-b_c.d/x+y,z@w=1/out.log") == "/scratch/a-b_c.d/x+y,z@w=1/out.log"


def test_queue_and_account_must_be_plain(backend):
    assert directive_value("workq@pbs01", "partition") == "workq@pbs01"
    for bad in ("a b", "debug\n#PBS -A other", "x;y", "'q'", "$(x)"):
        with pytest.raises(ProfileError, match="partition"):
            backend.render(request(partition=bad))
        with pytest.raises(ProfileError, match="account"):
            backend.render(request(account=bad))


def test_slurm_only_settings_are_refused(backend):
    with pytest.raises(ProfileError, match="qos") as info:
        backend.render(request(qos="high"))
    assert "partition" in info.value.hint
    with pytest.raises(ProfileError, match="constraint") as info:
        backend.render(request(constraint="a100"))
    assert "-l feature=value" in info.value.hint


def test_typed_values_are_checked(backend):
    for field, value in (("nodes", 0), ("ntasks", 0), ("cpus_per_task", 0),
                         ("gpus_per_node", -1), ("walltime", 0), ("memory_per_node", -1),
                         ("nodes", True), ("ntasks", 1.5)):  # fmt: skip
        with pytest.raises(ProfileError, match=field):
            backend.render(request(**{field: value}))
    with pytest.raises(ProfileError, match="not a valid shell identifier"):
        backend.render(request(env={"A=B; touch CANARY; X": "x"}))
    with pytest.raises(ValueError):
        backend.render(request(command=[]))


def test_extra_directives_are_validated(backend):
    for bad in ("-m abe\n#PBS -q other", "-r\rn", "-V\x00", "-l a b", "echo hi", "--foo=bar",
                "-l 'x'", '-l "x"', "-l a\\b", "#PBS -V", "", "-", "-ab c d"):  # fmt: skip
        with pytest.raises(ProfileError) as info:
            backend.render(request(extra_directives=[bad]))
        assert info.value.hint
    script = backend.render(request(extra_directives=["-V", "-r n", "-l software=abaqus"]))
    assert "#PBS -V\n#PBS -r n\n#PBS -l software=abaqus\n" in script
    assert validate_extra_directive("-j oe") == "-j oe"


def test_extra_directives_may_not_repeat_typed_settings(backend):
    cases = [
        (request(partition="debug"), "-q gpu", "partition setting"),
        (request(account="a"), "-A b", "account setting"),
        (request(), "-N other", "job_name setting"),
        (request(), "-o /tmp/x", "stdout setting"),
        (request(walltime=60), "-l walltime=1:00:00", "walltime"),
        (request(), "-l select=2:ncpus=4", "nodes"),
        (request(), "-l nodes=2:ppn=4", "nodes"),
        (request(memory_per_node=2**30), "-l software=x,mem=1gb", "memory_per_node"),
    ]
    for req, extra, hint in cases:
        with pytest.raises(ProfileError) as info:
            backend.render(replace(req, extra_directives=[extra]))
        assert hint in info.value.hint, (extra, info.value.hint)
    # Not computed from a typed value: allowed.
    backend.render(request(extra_directives=["-q gpu", "-l mem=1gb"]))


def test_an_extra_place_replaces_scatter():
    pro = PbsBackend(CommandRunner(), flavor="pro")
    script = pro.render(request(nodes=2, ntasks=4, extra_directives=["-l place=scatter:excl"]))
    assert script.count("place=") == 1 and "#PBS -l place=scatter:excl\n" in script


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(1, "0:00:01"), (59.2, "0:01:00"), (3600, "1:00:00"), (86399, "23:59:59"),
     (86400, "24:00:00"), (90061, "25:01:01"), (10 * 86400 + 5, "240:00:05")],
)  # fmt: skip
def test_format_walltime(seconds, text):
    assert format_walltime(seconds) == text


def test_memory_and_names():
    assert memory_mb(1) == 1
    assert memory_mb(2**20 + 1) == 2
    assert memory_mb(16 * 2**30) == 16384
    assert job_name("hello world!") == "hello_world"
    assert job_name("a'; echo foo\n0") == "a_echo_foo_0"
    assert job_name("$()") == "hpcflow"
    assert job_name("20261129-run") == "j20261129-run"  # PBS wants a leading letter
    assert len(job_name("x" * 500)) == MAX_JOB_NAME


def test_templates_are_strict():
    renderer = Renderer("hpcflow.backends.pbs")
    for name in ("pilot.pbs.j2", "pilot.torque.j2"):
        with pytest.raises(jinja2.UndefinedError):
            renderer.render(name, {})


def test_registry_picks_the_flavor_from_the_profile():
    assert get_backend("pbs").flavor == "pro"  # type: ignore[attr-defined]
    torque = Profile(name="t", backend="pbs", pbs_flavor="torque")
    backend = get_backend("pbs", profile=torque)
    assert backend.name == "pbs" and backend.flavor == "torque"  # type: ignore[attr-defined]
    assert Profile(name="p", backend="pbs").pbs_flavor == "pro"
    with pytest.raises(ValueError):
        Profile(name="x", pbs_flavor="sge")
    with pytest.raises(ProfileError, match="flavor"):
        PbsBackend(CommandRunner(), flavor="sge")  # type: ignore[arg-type]
