"""RunPaths names every file of a run directory, and no other module spells those names."""

from __future__ import annotations

import ast
from fnmatch import fnmatch
from pathlib import Path

import pytest

from hpcflow.store.paths import RunPaths
from hpcflow.transport.certificates import credentials_in

ROOT = Path(__file__).resolve().parents[2]
RUN = Path("/scratch/run")


@pytest.mark.parametrize(
    ("member", "relative"),
    [
        ("run_info", "run.json"),
        ("pilot_config", "pilot.json"),
        ("driver_log", "driver.log"),
        ("scheduler_address", "scheduler.json"),
        ("workers_record", "workers.json"),
        ("report", "report.html"),
        ("tls_dir", "tls"),
        ("tls_ca", "tls/ca.pem"),
        ("tls_cert", "tls/cert.pem"),
        ("tls_key", "tls/key.pem"),
        ("worker_job_script", "workers/job.sh"),
        ("job_elements_dir(7)", "jobs/7"),
        ("job_started(7, 2)", "jobs/7/2.started.json"),
        ("job_outcome(7, 2)", "jobs/7/2.outcome.json"),
        ("value(make)", "tasks/make/value.pickle"),
    ],
)
def test_run_paths_names_each_file_of_a_run(member: str, relative: str) -> None:
    name, _, args = member.partition("(")
    value = getattr(RunPaths(RUN), name)
    if args:
        given = args.rstrip(")").split(",")
        value = value(*(int(a) if a.strip().isdigit() else a for a in given))
    assert Path(value) == RUN / relative
    documented = getattr(RunPaths, name).__doc__
    assert documented and documented.strip(), f"RunPaths.{name} needs a docstring"


def test_the_run_credentials_are_the_files_run_paths_names(tmp_path: Path) -> None:
    paths, creds = RunPaths(tmp_path), credentials_in(tmp_path)
    assert (creds.directory, creds.ca_file, creds.cert_file, creds.key_file) == (
        paths.tls_dir,
        paths.tls_ca,
        paths.tls_cert,
        paths.tls_key,
    )


def _file_names() -> set[str]:
    """The names of the files RunPaths knows (those with a suffix: bare folder names such
    as ``tasks`` are ordinary words elsewhere)."""
    paths = RunPaths(RUN)
    names = set()
    for attr, member in vars(RunPaths).items():
        if isinstance(member, property):
            path = getattr(paths, attr)
            if path.suffix:
                names.add(path.name)
    return names


#: (module, name) pairs that are not run-directory paths.
ALLOWED = {
    # The user's project: ``hpcflow init`` writes its workflow.yaml, not a run's copy.
    ("hpcflow/cli/init.py", "workflow.yaml"),
    ("hpcflow/api/scaffold.py", "workflow.yaml"),
    # The file an included folder holds: the user's, not a run's copy.
    ("hpcflow/spec/includes.py", "workflow.yaml"),
}
#: Modules under rewrite in their own change (issue 16): they are to take ``job.sh`` and
#: ``scheduler.json`` from RunPaths (worker_job_script, scheduler_address). Remove each
#: pattern once its modules do.
#: Modules not yet moved onto RunPaths (none left).
PENDING: tuple[str, ...] = ()


def test_no_module_but_run_paths_spells_a_run_file_name() -> None:
    names = _file_names()
    assert {"run.json", "scheduler.json", "workers.json", "ca.pem", "key.pem"} <= names
    found = []
    for path in sorted((ROOT / "hpcflow").rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        if module == "hpcflow/store/paths.py" or any(fnmatch(module, p) for p in PENDING):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and node.value in names
                and id(node) not in docstrings
                and (module, node.value) not in ALLOWED
            ):
                found.append(f"{module}:{node.lineno}: {node.value!r}")
    assert not found, "build these paths with RunPaths:\n" + "\n".join(found)
