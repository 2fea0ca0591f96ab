"""What the batch-backend unit tests share: one request builder, each backend's requests
(the golden files' inputs), a runner that answers from a script, and the backends as
test parameters (PSI/J's ``execparams``): one :class:`Case` per backend and flavor."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hpcflow.backends._commands import CommandResult, CommandRunner
from hpcflow.backends.base import AllocationRequest
from hpcflow.backends.batch import BatchBackend
from hpcflow.backends.pbs import PbsBackend
from hpcflow.backends.slurm import SlurmBackend
from tests.conftest import HOSTILE_VALUES

SAMPLES = Path(__file__).resolve().parent / "samples"
GOLDEN = Path(__file__).resolve().parents[2] / "golden"
RUN = Path("/scratch/alice/wf/.hpcflow/runs/20261129-101500-ab12")
HOSTILE_DIR = Path('/scratch/it\'s a "dir"; $(touch CANARY) `x` 50%')


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


def request(**overrides: Any) -> AllocationRequest:
    base = AllocationRequest(
        run_id="20261129-101500-ab12",
        job_name="hpcflow-hello",
        run_dir=RUN,
        stdout=RUN / "allocation.out",
        stderr=RUN / "allocation.err",
        command=["python", "-m", "hpcflow.bootstrap", str(RUN)],
    )
    return replace(base, **overrides)


# -- the golden files' requests ---------------------------------------------------------

#: A big pilot; each backend adds its own shape and directives.
MULTINODE = dict(
    job_name="train sweep",
    nodes=4,
    gpus_per_node=2,
    memory_per_node=16 * 2**30,
    walltime=2 * 86400 + 3 * 3600 + 4 * 60 + 5,
    partition="gpu",
    account="proj-42",
    setup_lines=["module load cuda/12.2", "source /opt/site/env.sh"],
    env={"OMPI_MCA_btl": "self,tcp", "HPCFLOW_LOG_LEVEL": "debug"},
)
#: Everything hostile that may reach the script: names, environment values, the command.
HOSTILE = dict(
    run_id="run'; touch CANARY",
    job_name="a'; echo foo\n0 $(touch CANARY)",
    env={"VALUE": "x; touch CANARY", "QUOTES": 'it\'s "quoted"', "NL": "a\nb"},
    command=["echo", "$(touch CANARY)", "a b", "it's", "`touch CANARY`"],
)
#: SLURM quotes hostile log paths for #SBATCH. PBS refuses them (qsub and #PBS lines need
#: plain paths: see test_paths_that_qsub_cannot_carry_are_refused), so there the hostile
#: folder is the working directory, which only a shell line sees.
SLURM_HOSTILE_PATHS = dict(
    run_dir=Path('/scratch/it\'s a "dir"; $(touch CANARY)'),
    stdout=Path('/scratch/it\'s a "dir"; $(touch CANARY)/out 100%.log'),
    stderr=Path('/scratch/it\'s a "dir"; $(touch CANARY)/err `x`.log'),
)
PBS_HOSTILE_PATHS = dict(workdir=HOSTILE_DIR)
#: Jobs mode: a hostile task name, as a small array.
HOSTILE_JOB = dict(task_name="t'; $(touch CANARY)\nx", array_size=3)
#: Jobs mode: one task's sweep as an array (SLURM --array, PBS Pro -J, Torque -t) with a
#: concurrency cap, after two jobs (each backend spells their ids).
JOB_ARRAY = dict(
    job_name="hpcflow-20261129-101500-ab12-simulate",
    stdout=RUN / "jobs" / "3.out",
    stderr=RUN / "jobs" / "3.err",
    cpus_per_task=2,
    memory_per_node=100 * 2**20,
    walltime=360,
    partition="debug",
    command=["python", "-m", "hpcflow.modes.jobtask", str(RUN), "3"],
    task_name="simulate",
    array_size=200,
    array_parallelism=8,
)
#: Jobs mode: one MPI task (4 ranks over 2 nodes), no array.
JOB_MPI = dict(
    job_name="hpcflow-20261129-101500-ab12-allreduce",
    stdout=RUN / "jobs" / "1.out",
    stderr=RUN / "jobs" / "1.err",
    nodes=2,
    ntasks=4,
    command=["python", "-m", "hpcflow.modes.jobtask", str(RUN), "1"],
    task_name="allreduce",
)

SLURM_REQUESTS = {
    "minimal": request(),
    "multinode_gpu": request(
        **MULTINODE,
        ntasks=8,
        cpus_per_task=2,
        qos="high",
        constraint="a100&ib",
        extra_directives=["--exclusive", "--mail-type=END,FAIL"],
        command=["srun", "--kill-on-bad-exit=0", "python", "-m", "hpcflow.bootstrap", str(RUN)],
    ),
    "overcommit_short": request(ntasks=6, overcommit=True, walltime=59.2, workdir=Path("/work")),
    "hostile": request(**HOSTILE, **SLURM_HOSTILE_PATHS),
    "job_array": request(**JOB_ARRAY, depends_on=("101", "102")),
    "job_mpi": request(**JOB_MPI),
    "job_hostile": request(**HOSTILE, **SLURM_HOSTILE_PATHS, **HOSTILE_JOB),
}

PBS_REQUESTS = {
    "minimal": request(),
    "multinode_gpu": request(
        **MULTINODE,
        ntasks=10,
        cpus_per_task=8,
        extra_directives=["-m abe", "-W group_list=hpc"],
        command=["mpirun", "-n", "10", "python", "-m", "hpcflow.bootstrap", str(RUN)],
    ),
    # The pilot on one 2-CPU node: 3 ranks share the cores.
    "overcommit_short": request(
        ntasks=3, cpus_per_task=2, overcommit=True, walltime=59.2, workdir=Path("/work")
    ),
    "hostile": request(**HOSTILE, **PBS_HOSTILE_PATHS),
    "job_array": request(**JOB_ARRAY, depends_on=("101.pbs", "102[].pbs")),
    "job_mpi": request(**JOB_MPI),
    "job_hostile": request(**HOSTILE, **PBS_HOSTILE_PATHS, **HOSTILE_JOB),
}


def slurm_hostile_requests() -> list[AllocationRequest]:
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


def pbs_hostile_requests() -> list[AllocationRequest]:
    """One request per hostile value, placed everywhere a free-form value can go."""
    return [
        request(run_id=value, job_name=value, workdir=Path("/scratch") / value.replace("/", "_"),
                env={"HOSTILE": value}, command=["echo", value], setup_lines=[])
        for value in HOSTILE_VALUES
    ]  # fmt: skip


# -- a runner that answers from a script ---------------------------------------------------

#: One scripted answer: (exit status, stdout, stderr), or an exception to raise.
Answer = tuple[int, str, str] | Exception


class ScriptedRunner(CommandRunner):
    """Answers commands from a table (program → answers, in order) instead of running
    them; still counts calls, and records every argv."""

    def __init__(self, answers: dict[str, list[Answer]]) -> None:
        super().__init__()
        self.answers = answers
        self.argvs: list[tuple[str, ...]] = []

    def run(self, argv: Sequence[str], *, timeout=None, input=None) -> CommandResult:
        self.calls[argv[0]] += 1
        self.argvs.append(tuple(argv))
        answer = self.answers[argv[0]].pop(0)
        if isinstance(answer, Exception):
            raise answer
        returncode, out, err = answer
        return CommandResult(tuple(argv), returncode, out, err, 0.0)


# -- the backends as test parameters ----------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One backend (and flavor) with the words the shared tests need from it."""

    id: str
    make: Callable[[CommandRunner], BatchBackend]
    requests: dict[str, AllocationRequest]
    hostile_requests: Callable[[], list[AllocationRequest]]
    #: The golden file of a request name, below tests/golden.
    golden: Callable[[str], str]
    #: What starts a directive line in the script.
    prefix: str
    #: The hostile request's job-name directive, as the script must print it.
    hostile_job_name: str
    #: Extra directives that must be refused, and good ones (printed as given).
    bad_extras: Sequence[str]
    good_extras: Sequence[str]
    #: (request overrides, extra directive, words of the hint) of extras that repeat a
    #: typed setting, and extras that are fine when no typed setting stands behind them.
    repeated_extras: Sequence[tuple[dict[str, Any], str, str]]
    free_extras: Sequence[str]
    #: The submit program; what it prints for a good submission and the id read from it;
    #: its (stdout, stderr) for a job in a partition that does not exist.
    submit_program: str
    submitted: tuple[str, str]
    no_such_partition: tuple[str, str]
    #: The status and cancel programs.
    poll_program: str
    cancel_program: str
    #: (exit status, stdout, stderr) of cancels that must pass (the job ended, or is
    #: unknown), and one that must raise.
    harmless_cancels: Sequence[tuple[int, str, str]] = field(default_factory=list)
    failed_cancel: tuple[int, str, str] = (1, "", "")
    #: A status command that failed for real (not "unknown ids").
    failed_poll: tuple[int, str, str] = (1, "", "")
    #: Answers of the second source asked for ids the status command does not know.
    purged_lookup: dict[str, list[Answer]] = field(default_factory=dict)


#: Extra directives each backend refuses, and (request overrides, extra directive, words
#: of the hint) of extras that repeat a typed setting.
SLURM_BAD_EXTRAS = ("--foo\n#SBATCH --bar", "--foo=a\rb", "--foo=a\x00", "--foo bar", "echo hi",
                    "--comment='a b'", "--x=\"y\"", "#SBATCH --foo", "", "--")  # fmt: skip
SLURM_REPEATED_EXTRAS = [
    ({"partition": "debug"}, "--partition=gpu", "partition setting"),
    ({"partition": "debug"}, "-pgpu", "partition setting"),
    ({}, "--output=/tmp/x", "stdout setting"),
]
PBS_BAD_EXTRAS = ("-m abe\n#PBS -q other", "-r\rn", "-V\x00", "-l a b", "echo hi", "--foo=bar",
                  "-l 'x'", '-l "x"', "-l a\\b", "#PBS -V", "", "-", "-ab c d")  # fmt: skip
PBS_REPEATED_EXTRAS = [
    ({"partition": "debug"}, "-q gpu", "partition setting"),
    ({"account": "a"}, "-A b", "account setting"),
    ({}, "-N other", "job_name setting"),
    ({}, "-o /tmp/x", "stdout setting"),
    ({"walltime": 60}, "-l walltime=1:00:00", "walltime"),
    ({}, "-l select=2:ncpus=4", "nodes"),
    ({}, "-l nodes=2:ppn=4", "nodes"),
    ({"memory_per_node": 2**30}, "-l software=x,mem=1gb", "memory_per_node"),
]

SLURM = Case(
    id="slurm",
    make=SlurmBackend,
    requests=SLURM_REQUESTS,
    hostile_requests=slurm_hostile_requests,
    golden=lambda name: f"slurm/{name}.sbatch",
    prefix="#SBATCH",
    hostile_job_name="#SBATCH --job-name=a_echo_foo_0_touch_CANARY\n",
    bad_extras=SLURM_BAD_EXTRAS,
    good_extras=("--exclusive", "-s", "--gres=gpu:a100:1"),
    repeated_extras=SLURM_REPEATED_EXTRAS,
    free_extras=("--partition=gpu",),
    submit_program="sbatch",
    submitted=(sample("sbatch_parsable.txt"), "28"),
    no_such_partition=("", sample("sbatch_invalid_partition.txt")),
    poll_program="squeue",
    cancel_program="scancel",
    harmless_cancels=[
        (
            1,
            "",
            "scancel: error: Kill job error on job id 5: Job/step already completing or "
            "completed\n",
        ),
        (1, "", "scancel: error: Kill job error on job id 5: Invalid job id specified\n"),
    ],
    failed_cancel=(1, "", "scancel: error: Unable to contact slurm controller\n"),
    failed_poll=(1, "", "squeue: error: Socket timed out\n"),
    purged_lookup={"sacct": [(1, "", sample("sacct_disabled.txt"))]},
)


def pbs_case(flavor: str) -> Case:
    return Case(
        id=f"pbs-{flavor}",
        make=lambda runner: PbsBackend(runner, flavor=flavor),  # type: ignore[arg-type]
        requests=PBS_REQUESTS,
        hostile_requests=pbs_hostile_requests,
        golden=lambda name: f"pbs/{name}.{flavor}.pbs",
        prefix="#PBS",
        hostile_job_name="#PBS -N a_echo_foo_0_touch_CANARY\n",
        bad_extras=PBS_BAD_EXTRAS,
        good_extras=("-V", "-r n", "-l software=abaqus"),
        repeated_extras=PBS_REPEATED_EXTRAS,
        free_extras=("-q gpu", "-l mem=1gb"),
        submit_program="qsub",
        submitted=("1234.pbs01\n", "1234.pbs01"),
        # SLURM's qsub wrapper prints sbatch's message on stdout.
        no_such_partition=(sample("pbs/qsub_invalid_queue.txt"), ""),
        poll_program="qstat",
        cancel_program="qdel",
        harmless_cancels=[
            (int(sample("pbs/qdel_running.rc")), sample("pbs/qdel_running.txt"), ""),
            (int(sample("pbs/qdel_ended.rc")), sample("pbs/qdel_ended.txt"), ""),  # silent
            (153, "", "qdel: Unknown Job Id 12.pbs01\n"),
            (35, "", "qdel: Job has finished 13.pbs01\n"),
        ],
        failed_cancel=(1, "qdel: Kill job error on job id 14: Access/permission denied\n", ""),
        failed_poll=(1, "", "qstat: cannot connect to server pbs01\n"),
    )


CASES = [SLURM, pbs_case("pro"), pbs_case("torque")]
CASE_IDS = [case.id for case in CASES]
