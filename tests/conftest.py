"""Shared fixtures: an isolated HPCFLOW_HOME, and a helper that runs the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from hpcflow.worker.calls import TaskCall

REPO = Path(__file__).resolve().parent.parent

#: In CI a skip is a failure unless it names hardware (tests/strict_skips.py).
pytest_plugins = ["tests.strict_skips"]

#: Values that would run commands, break quoting or escape folders if mishandled.
HOSTILE_VALUES = [
    "a b",
    "it's",
    'say "hi"',
    "x; touch CANARY",
    "$(touch CANARY)",
    "`touch CANARY`",
    "a\nb",
    "../../escape",
    "/abs/path",
    "&& touch CANARY",
    "| touch CANARY",
    "${IFS}touch${IFS}CANARY",
]


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_cli(
    args: list[str] | tuple[str, ...],
    env: dict[str, str],
    cwd: Path | None = None,
    timeout: float = 300,
) -> CliResult:
    """``hpcflow ARGS...`` as a real process in a session of its own. On a timeout the
    whole session is killed (the driver, local workers, ``srun`` steps it started), not
    only the command, so that a hung test leaves nothing that loads the next ones."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.cli.main", *args],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        raise
    return CliResult(proc.returncode, out, err)


@pytest.fixture(autouse=True)
def _no_task_mark_left_behind():
    """A test that runs a Python task inline (in this process, as a worker does) marks
    this process's own environment with its guardian's token (``MARK_VAR``); every run the
    suite starts afterwards would carry that mark into its allocations and jobs. Under
    pytest-xdist a worker that ran such a test first then had its later cluster runs'
    leftovers ended by mark, the new allocation's own ranks with them. Restore it."""
    from hpcflow.store.process import MARK_VAR

    before = os.environ.get(MARK_VAR)
    yield
    if before is None:
        os.environ.pop(MARK_VAR, None)
    else:
        os.environ[MARK_VAR] = before


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """Environment for CLI runs: a private HPCFLOW_HOME and a wide, plain console."""
    home = tmp_path / "hpcflow-home"
    return {
        **os.environ,
        "HPCFLOW_HOME": str(home),
        "COLUMNS": "200",
        "NO_COLOR": "1",
        "TERM": "dumb",
    }


@pytest.fixture
def hpcflow(env: dict[str, str]):
    """Run ``hpcflow ARGS...`` as a real process; returns a CliResult."""

    def run(*args: str, cwd: Path | None = None, timeout: float = 300) -> CliResult:
        return run_cli(args, env, cwd, timeout)

    return run


@pytest.fixture
def example(tmp_path: Path):
    """Copy one of workflows/NAME into tmp_path and return its workflow.yaml."""

    def copy(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(
            REPO / "workflows" / name,
            target,
            ignore=shutil.ignore_patterns(".hpcflow", "results", "__pycache__"),
        )
        return target / "workflow.yaml"

    return copy


def write_workflow(directory: Path, text: str, name: str = "workflow.yaml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    return path


def task_call(directory: Path, index: int, command: str, **changes: object) -> TaskCall:
    """A shell task's call as the driver makes it: logs under ``directory/logs``."""
    logs = directory / "logs"
    call = TaskCall(
        index=index, attempt=1, kind="shell", command=command, argv=None, python=None,
        kwargs=None, workdir=str(directory), env=None, timeout=None, inputs=(), outputs=(),
        stdout=str(logs / f"{index}.out"), stderr=str(logs / f"{index}.err"),
        result=str(logs / f"{index}.json"), quarantine_dir=str(directory / "q" / str(index)),
    )  # fmt: skip
    for name, value in changes.items():
        setattr(call, name, value)
    return call


def processes_with(marker: str) -> list[psutil.Process]:
    """Live processes whose command line contains ``marker`` (to prove nothing is left)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(marker in part for part in (proc.info["cmdline"] or [])):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def left_with(marker: str, timeout: float = 15.0) -> list[psutil.Process]:
    """Processes with ``marker`` that are still alive after up to ``timeout`` seconds (a
    killed process takes a moment to go on a busy machine): [] once all have gone."""
    deadline = time.monotonic() + timeout
    while True:
        found = processes_with(marker)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def status_json(env: dict[str, str], cwd: Path | None = None, *refs: str) -> dict:
    """``hpcflow status --json [REF]`` as a real process (from ``cwd``), parsed."""
    result = run_cli(("status", "--json", *refs), env, cwd, timeout=60)
    assert result.returncode == 0, result.output
    return json.loads(result.stdout)


def pytest_configure(config: pytest.Config) -> None:
    """Handle SIGINT in the test process even when it was started with SIGINT ignored
    (in the background by a script): the programs the tests start, and then interrupt,
    would inherit the ignored signal (a handled one is reset to the default on exec)."""
    import signal

    signal.signal(signal.SIGINT, signal.default_int_handler)
