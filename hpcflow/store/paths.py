"""RunPaths: the one place that knows where everything of a run lives."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

#: The file of a value key: the user's, in :func:`hpcflow_home`; a run's copy, in its folder.
VALUE_KEY = "value.key"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.=-]+")
_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,99}")
#: The characters of a sweep instance's id that its folder's name writes as dots.
_DOTS = str.maketrans({"[": ".", ",": ".", "]": None})


def task_slug(task_id: str) -> str:
    """A file-system-safe, readable, unique directory name for a task id.

    ``simulate[seed=3,sample=a]`` → ``simulate.seed=3.sample=a-<hash>``. Any id that is not
    already plain gets a hash suffix, so two ids never share a folder and names such as
    ``../x`` or ``/etc`` cannot leave the run directory.
    """
    if _PLAIN.fullmatch(task_id):
        return task_id
    readable = _UNSAFE.sub("_", task_id.translate(_DOTS)).strip("._")[:80] or "task"
    digest = hashlib.sha1(
        task_id.encode("utf-8", "surrogatepass"), usedforsecurity=False
    ).hexdigest()[:10]
    return f"{readable}-{digest}"


def workflow_key(workflow_file: Path) -> str:
    """A stable key for a workflow file: its stem plus a hash of its absolute path."""
    resolved = str(workflow_file.resolve())
    digest = hashlib.sha1(resolved.encode(), usedforsecurity=False).hexdigest()[:10]
    stem = _UNSAFE.sub("_", workflow_file.stem)[:40] or "workflow"
    return f"{stem}-{digest}"


@dataclass(frozen=True)
class StateRoot:
    """``.hpcflow/`` beside a workflow: its runs, its lock and its memo of finished tasks."""

    root: Path

    @classmethod
    def beside(cls, workflow_file: Path) -> StateRoot:
        """The state folder of the workflow in ``workflow_file``."""
        return cls.in_folder(workflow_file.resolve().parent)

    @classmethod
    def in_folder(cls, folder: Path) -> StateRoot:
        """The state folder of workflows in ``folder`` (a Snakemake run's working folder)."""
        return cls(folder / ".hpcflow")

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    def lock_file(self, key: str) -> Path:
        return self.root / "locks" / f"{key}.lock"

    @property
    def memo_db(self) -> Path:
        return self.root / "memo.sqlite"

    @property
    def images(self) -> Path:
        """Where container images pulled for the workflow's runs go (unless the profile
        names a container_cache)."""
        return self.root / "images"

    def journal_dir(self, key: str) -> Path:
        """Where the processes of a workflow's runs journal each success as it happens."""
        return self.root / "journal" / key

    def journal_prefix(self, key: str, run_id: str) -> str:
        """The start of run ``run_id``'s journal file names (a plain string: sent to workers)."""
        return f"{self.journal_dir(key)}/{run_id}"


@dataclass(frozen=True)
class RunPaths:
    """Every path inside one run directory."""

    run_dir: Path

    @property
    def workflow_copy(self) -> Path:
        """The workflow as it was when the run started (what a resume re-reads)."""
        return self.run_dir / "workflow.yaml"

    @property
    def sweep_sources(self) -> Path:
        """What the sweeps' from_files/from_table read when the run was planned: its
        allocations rebuild the same instances from it."""
        return self.run_dir / "sources.json"

    @property
    def instance_order(self) -> Path:
        """The ids of a run's task instances in the order it numbers them, once the run
        planned tasks during the run (a fan-out): every allocation numbers them alike."""
        return self.run_dir / "instances.json"

    @property
    def included_files(self) -> Path:
        """The texts of the workflow's included files when the run was planned, by
        resolved path: its allocations read these, not files that may have changed."""
        return self.run_dir / "includes.json"

    @property
    def run_info(self) -> Path:
        """Who started the run, from where, with what options and walltime."""
        return self.run_dir / "run.json"

    @property
    def plan(self) -> Path:
        """The resolved plan of each task definition, as `hpcflow report` shows it."""
        return self.run_dir / "plan.json"

    @property
    def state_db(self) -> Path:
        """The run's tasks and attempts; written only by the run's driver."""
        return self.run_dir / "state.sqlite"

    @property
    def state_snapshot(self) -> Path:
        """The last published whole commit of ``state.sqlite``, what readers read while
        its driver may write (:mod:`hpcflow.store.snapshot`)."""
        return self.run_dir / "state.snapshot"

    @property
    def submit_db(self) -> Path:
        """Written only by the process that submits and follows the run's allocations."""
        return self.run_dir / "submit.sqlite"

    @property
    def cancel_request(self) -> Path:
        """Left by ``hpcflow cancel``; the run's driver sees it and stops the run."""
        return self.run_dir / "cancel.request"

    @property
    def driver_log(self) -> Path:
        """The driver's log: what it decided, and why a run failed."""
        return self.run_dir / "driver.log"

    @property
    def tasks_dir(self) -> Path:
        """One folder per task: each attempt's stdout, stderr and result."""
        return self.run_dir / "tasks"

    @property
    def logs_dir(self) -> Path:
        """``task_logs: per-worker``: each worker process's one file of its tasks' stdout
        and stderr, as records (:mod:`hpcflow.store.tasklogs`)."""
        return self.run_dir / "logs"

    @property
    def quarantine_dir(self) -> Path:
        """Where the outputs of failed attempts are moved, one folder per attempt."""
        return self.run_dir / "quarantine"

    @property
    def worker_code(self) -> Path:
        """hpcflow's own worker code, zipped, for python tasks that start inside another
        environment (a container, a venv): their interpreter imports it from here."""
        return self.run_dir / "hpcflow-worker.zip"

    @property
    def pilot_config(self) -> Path:
        """Pilot mode: the worker layout and transport every rank of an allocation reads."""
        return self.run_dir / "pilot.json"

    def pilot_pool_config(self, pool: str) -> Path:
        """Pilot mode with several pools: what the workers of pool ``pool``'s own
        allocation read (the head allocation's ranks read :attr:`pilot_config`)."""
        return self.run_dir / f"pilot-{pool}.json"

    @property
    def scheduler_address(self) -> Path:
        """Pilot mode: where rank 0 publishes the scheduler's address and dashboard."""
        return self.run_dir / "scheduler.json"

    @property
    def worker_launch_end(self) -> Path:
        """Pilot mode: written by the head when the workers' launch (srun, mpirun) has
        ended, with its exit status, so the driver stops waiting for workers that will
        never come."""
        return self.run_dir / "worker-launch-ended.json"

    @property
    def workers_record(self) -> Path:
        """Pilot mode: each Dask worker's effective settings, written once they arrive."""
        return self.run_dir / "workers.json"

    @property
    def report(self) -> Path:
        """``hpcflow report``'s HTML page, unless it is told to write it elsewhere."""
        return self.run_dir / "report.html"

    # TLS transport: the run's own CA (directory 0700, files 0600; see transport.certificates).
    @property
    def tls_dir(self) -> Path:
        """The folder of the run's TLS files, readable by its owner only."""
        return self.run_dir / "tls"

    @property
    def tls_ca(self) -> Path:
        """The run's CA certificate (the CA's key is never written)."""
        return self.tls_dir / "ca.pem"

    @property
    def tls_cert(self) -> Path:
        """The one certificate the run's CA signed, presented by every process of the run."""
        return self.tls_dir / "cert.pem"

    @property
    def tls_key(self) -> Path:
        """The private key of :attr:`tls_cert`: whoever reads it may join the run's cluster."""
        return self.tls_dir / "key.pem"

    @property
    def allocations_dir(self) -> Path:
        """Pilot mode: each allocation's batch script and logs."""
        return self.run_dir / "allocations"

    def allocation_script(self, number: int) -> Path:
        """The batch script of pilot allocation ``number``."""
        return self.allocations_dir / f"{number}.sh"

    def allocation_stdout(self, number: int) -> Path:
        """Allocation ``number``'s stdout, as the batch system writes it."""
        return self.allocations_dir / f"{number}.out"

    def allocation_stderr(self, number: int) -> Path:
        """Allocation ``number``'s stderr, as the batch system writes it."""
        return self.allocations_dir / f"{number}.err"

    @property
    def elastic_log(self) -> Path:
        """Elastic mode: one JSON line per sample of the worker count."""
        return self.run_dir / "elastic.jsonl"

    @property
    def workers_dir(self) -> Path:
        """Elastic mode: the worker jobs' stdout/stderr."""
        return self.run_dir / "workers"

    @property
    def worker_job_script(self) -> Path:
        """Elastic mode: the batch script of the worker jobs, as submitted (for reference)."""
        return self.workers_dir / "job.sh"

    def pool_worker_job_script(self, pool: str) -> Path:
        """Elastic mode with several pools: the batch script of pool ``pool``'s worker jobs."""
        return self.workers_dir / f"job-{pool}.sh"

    # Jobs mode: one batch job (or array) per unit N of a task's instances.
    @property
    def jobs_dir(self) -> Path:
        """Jobs mode: each batch job's script, manifest and logs."""
        return self.run_dir / "jobs"

    def job_script(self, number: int) -> Path:
        """The batch script of job ``number``."""
        return self.jobs_dir / f"{number}.sh"

    def job_manifest(self, number: int) -> Path:
        """Which task instances (and first attempt numbers) job ``number`` runs."""
        return self.jobs_dir / f"{number}.json"

    def job_stdout(self, number: int) -> Path:
        """Job ``number``'s stdout, as the batch system writes it."""
        return self.jobs_dir / f"{number}.out"

    def job_stderr(self, number: int) -> Path:
        """Job ``number``'s stderr, as the batch system writes it."""
        return self.jobs_dir / f"{number}.err"

    def job_elements_dir(self, number: int) -> Path:
        """The markers of job ``number``'s elements (one listing finds them all)."""
        return self.jobs_dir / str(number)

    def job_started(self, number: int, element: int) -> Path:
        """Written by an element when it starts: its own native id, host and time."""
        return self.job_elements_dir(number) / f"{element}.started.json"

    def job_outcome(self, number: int, element: int) -> Path:
        """Written by an element when it ends: the outcomes of its attempts."""
        return self.job_elements_dir(number) / f"{element}.outcome.json"

    # One folder per task, one file per attempt and stream: a single mkdir per task keeps
    # tiny tasks cheap.
    def attempt_files(self, slug: str, attempt: int) -> tuple[str, str, str]:
        """(stdout, stderr, result) of one attempt, as plain strings (a hot path)."""
        stem = f"{self.run_dir}/tasks/{slug}/{attempt}"
        return stem + ".out", stem + ".err", stem + ".result.json"

    def stdout(self, slug: str, attempt: int) -> Path:
        """The stdout of one attempt (made only once it prints)."""
        return Path(self.attempt_files(slug, attempt)[0])

    def stderr(self, slug: str, attempt: int) -> Path:
        """The stderr of one attempt (made only once it prints)."""
        return Path(self.attempt_files(slug, attempt)[1])

    def result(self, slug: str, attempt: int) -> Path:
        """A Python task's return value, as JSON (written atomically)."""
        return Path(self.attempt_files(slug, attempt)[2])

    def value(self, slug: str) -> str:
        """A python task's return value that other tasks receive (``from:``), pickled
        (written atomically by its last successful attempt; a plain string: a hot path)."""
        return f"{self.run_dir}/tasks/{slug}/value.pickle"

    @property
    def value_key(self) -> Path:
        """The run's copy of the user's value key (``0600``): what its workers sign and
        check value files with (:mod:`hpcflow.store.values`)."""
        return self.run_dir / VALUE_KEY

    def quarantine(self, slug: str, attempt: int) -> str:
        """Where outputs of a failed attempt are moved (a plain string: a hot path)."""
        return f"{self.run_dir}/quarantine/{slug}/{attempt}"


def hpcflow_home() -> Path:
    """Per-user state (the index of runs): ``$HPCFLOW_HOME`` or ``$XDG_STATE_HOME/hpcflow``."""
    env = os.environ.get("HPCFLOW_HOME")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return Path(xdg) / "hpcflow"
