"""A "backend" for the allocation hpcflow already runs in (SLURM_JOB_ID / PBS_JOBID set):
``submit`` starts the launcher at once as a child process, ``poll`` watches it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from hpcflow.backends._commands import CommandRunner
from hpcflow.backends._render import Renderer, validate_env_name
from hpcflow.backends.base import AllocationRequest, AllocationState, AllocationStatus
from hpcflow.launchers.environment import job_id


class AllocationBackend:
    """Runs the pilot's ranks in the current allocation."""

    name = "allocation"

    def __init__(self, runner: CommandRunner) -> None:
        self.runner = runner
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        self._templates = Renderer(__package__ or "hpcflow.backends.allocation")

    def render(self, request: AllocationRequest) -> str:
        env = [(validate_env_name(k), v) for k, v in request.env.items()]
        return self._templates.render(
            "run.sh.j2",
            {
                "run_id": request.run_id,
                "job_id": job_id() or "?",
                "workdir": str(request.workdir or request.run_dir),
                "setup_lines": list(request.setup_lines),
                "env": env,
                "command": list(request.command),
            },
        )

    def submit(self, script: Path, request: AllocationRequest) -> str:
        request.stdout.parent.mkdir(parents=True, exist_ok=True)
        child = self.runner.spawn(
            ["bash", str(script)], stdout=request.stdout, stderr=request.stderr
        )
        native_id = f"{job_id() or 'local'}.{child.pid}"
        self._children[native_id] = child
        return native_id

    def poll(self, native_ids: Sequence[str]) -> dict[str, AllocationStatus]:
        out: dict[str, AllocationStatus] = {}
        for native_id in native_ids:
            child = self._children.get(native_id)
            if child is None:
                continue
            code = child.poll()
            if code is None:
                out[native_id] = AllocationStatus(native_id, AllocationState.RUNNING, "RUNNING")
            elif code == 0:
                out[native_id] = AllocationStatus(
                    native_id, AllocationState.COMPLETED, "COMPLETED", exit_code=0
                )
            else:
                out[native_id] = AllocationStatus(
                    native_id,
                    AllocationState.FAILED,
                    "FAILED",
                    f"the launcher exited with {code}",
                    code,
                )
        return out

    def cancel(self, native_ids: Sequence[str]) -> None:
        for native_id in native_ids:
            child = self._children.get(native_id)
            if child is None or child.poll() is not None:
                continue
            os.killpg(child.pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
