"""``snakemake --executor hpcflow --hpcflow-mode elastic`` on the real local test SLURM.

The Dask scheduler runs in the Snakemake process; worker jobs (dask-jobqueue) are
submitted while Snakemake jobs wait and cancelled when Snakemake ends. Worker jobs are
kept small for the 2-core test machine (1 core, at most 2 of them).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from hpcflow.modes.elastic_watch import read_samples
from tests.integration.slurm.test_snakemake_pilot import counting_wrappers, hpcflow_status
from tests.snakemake.helpers import (
    clean_env,
    fanout_snakefile,
    run_dirs,
    run_snakemake,
    sum_of_squares,
    write_snakefile,
)

pytest.importorskip("snakemake")

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

SMALL = {
    "HPCFLOW_CPUS_PER_NODE": "1",
    "HPCFLOW_MIN_WORKERS": "1",
    "HPCFLOW_MAX_WORKERS": "2",
    "HPCFLOW_ADAPT_INTERVAL": "1",
    "HPCFLOW_ADAPT_WAIT_COUNT": "2",
}


def test_elastic_worker_jobs_run_the_jobs_and_are_gone_afterwards(
    tmp_path: Path, env, slurm_cluster
):
    n = 8
    workdir = tmp_path / "wf"
    # Each square also says where it ran: its host and the SLURM job around it.
    write_snakefile(
        workdir,
        fanout_snakefile(n).replace(
            '> {output}"',
            "> {output} && mkdir -p results/where && "
            'echo $(hostname) ${{SLURM_JOB_ID:-none}} > results/where/{wildcards.i}.txt"',
            1,
        ),
    )
    env = {**clean_env(env), **slurm_cluster.extra_env, **SMALL}
    calls_log = counting_wrappers(tmp_path, env["PATH"])
    env["PATH"] = f"{tmp_path / 'bin'}:{env['PATH']}"
    result = run_snakemake(
        "--executor", "hpcflow", "--jobs", "20", "--group-components", f"fan={n}",
        "--hpcflow-mode", "elastic", "--hpcflow-profile", "slurm-test",
        cwd=workdir, env=env, timeout=240,
    )  # fmt: skip
    (run_dir,) = run_dirs(workdir)
    logs = "\n".join(p.read_text()[-2000:] for p in sorted((run_dir / "workers").glob("*.err")))
    assert result.returncode == 0, result.output[-4000:] + logs
    assert (workdir / "results" / "total.txt").read_text().strip() == str(sum_of_squares(n))
    # Worker jobs came (at most max_workers at a time) and none is left behind.
    samples = read_samples(run_dir / "elastic.jsonl")
    assert max(s["workers"] for s in samples) >= 1
    assert max(s["requested"] for s in samples) <= 2
    calls = calls_log.read_text().split()
    # Every square ran on a node of the cluster inside a worker job that hpcflow submitted
    # (the jobs' own record), never on the submit side.
    where = [(workdir / "results" / "where" / f"{i}.txt").read_text().split() for i in range(n)]
    assert all(re.fullmatch(r"n\d+", host) for host, _ in where), where
    job_ids = {job for _, job in where}
    assert "none" not in job_ids, where
    assert 1 <= len(job_ids) <= calls.count("sbatch"), (where, calls)
    # The worker jobs end a moment after the run: wait for SLURM to stop listing them.
    deadline = time.monotonic() + 60
    while run_dir.name in slurm_cluster.run(["squeue", "-h", "-o", "%j"], check=False).stdout:
        assert time.monotonic() < deadline, "worker jobs still queued 60 s after the run"
        time.sleep(0.3)
    snap = hpcflow_status(run_dir, env)
    assert snap["status"] == "succeeded", snap
    assert snap["counts"]["total"] == {"succeeded": 1}
    assert (run_dir / "workers" / "job.sh").exists()
    # The worker jobs ran the Snakemake jobs through their warm runners.
    assert list((run_dir / "warm").glob("*.log"))
