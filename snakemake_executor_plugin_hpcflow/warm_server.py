"""The warm runner: Snakemake imported and the workflow loaded once, a fork per job.

``python -m snakemake_executor_plugin_hpcflow.warm_server FD`` is started by a worker
(:mod:`snakemake_executor_plugin_hpcflow.warm`) with one end of a message socket as
``FD``. Its first message is the argv of a job's command (``--mode remote`` or
``subprocess``); the runner passes it to Snakemake's own command line
(``snakemake.cli.parse_args`` and ``args_to_api``), which builds the settings, parses the
Snakefile and creates the DAG API exactly as ``python -m snakemake`` does. At the point
where that process would execute its job (``DAGApi.execute_workflow``) the runner stops
and serves instead:

- each job request must have the arguments the runner loaded, but for the per-job
  options (:data:`~snakemake_executor_plugin_hpcflow.jobcommand.PER_JOB_OPTIONS`, word
  for word); otherwise the answer is *fallback* and the job runs its command as it is.
  It is parsed with the same parser;
- otherwise the runner forks; the child starts a session of its own (so the worker can
  kill its process group), puts the job's pipes on stdout and stderr, sets the per-job
  values into the settings ``args_to_api`` made (target jobs, allowed rules, attempt,
  threads, group id, unneeded temp files, files to wait for) and calls Snakemake's
  ``execute_workflow`` with the runner's arguments. Everything after that point (the
  DAG of the job, its ``shell:``/``run:``/``script:``/``wrapper:``, log, benchmark,
  temp and protected outputs, metadata) is Snakemake's own code, as in a fresh process.
  The child ends with ``os._exit`` and the exit status ``python -m snakemake`` would
  have: 0, or 1 after printing the error as Snakemake does.

A crash or any state a job leaves stays in its child. The runner answers *stale* once
the Snakefile, a file it includes or a config file has changed since it was loaded, and
ends when its last job has; it also ends when its worker closes the control socket,
killing what it still runs.

The runner never starts a thread (forking a process with threads is unsafe); children
are followed through pidfds (polled every 50 ms where the kernel has none).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.util
import logging
import os
import selectors
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from snakemake_executor_plugin_hpcflow import warm_protocol as wire
from snakemake_executor_plugin_hpcflow import warm_script
from snakemake_executor_plugin_hpcflow.jobcommand import strip_per_job

log = logging.getLogger(__name__)


class _Job:
    """A job the runner has forked: its process and the socket its worker waits on."""

    def __init__(self, pid: int, sock: socket.socket, pidfd: int | None) -> None:
        self.pid = pid
        self.sock = sock
        self.pidfd = pidfd


class WarmServer:
    """One loaded workflow serving job requests from one worker (see the module text)."""

    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.parser: Any = None
        #: The argv loaded, without its per-job options: what every request must share.
        self.general: list[str] = []
        self.dag_api: Any = None
        self.kwargs: dict[str, Any] = {}
        self.execute: Any = None
        self.jobs: dict[int, _Job] = {}
        self.selector = selectors.DefaultSelector()
        self.watched: dict[str, tuple[int, int] | None] = {}
        self.stale = ""
        self.served = False
        #: ``sys.argv[0]`` of ``python -m snakemake`` (Snakemake shows it in its header).
        self.program = "snakemake"

    # -- loading ----------------------------------------------------------------------------

    def run(self) -> int:
        """Load the workflow from the first message, serve until the worker goes away."""
        hello, _ = wire.receive(self.control)
        if hello is None:
            return 0
        from snakemake import cli
        from snakemake.api import DAGApi

        try:
            parser, args = cli.parse_args(list(hello["argv"]))
        except BaseException as exc:  # argparse exits on what it cannot read
            wire.send(self.control, {"ready": False, "error": f"arguments: {exc!r}"})
            return 1
        self.parser = parser
        self.general = strip_per_job(hello["argv"])
        main_spec = importlib.util.find_spec("snakemake.__main__")
        self.program = (main_spec.origin if main_spec else None) or "snakemake"
        execute = DAGApi.execute_workflow

        def hold(dag_api: Any, **kwargs: Any) -> None:
            # Where `python -m snakemake` would run its job: serve jobs from here.
            self.dag_api, self.kwargs, self.execute = dag_api, kwargs, execute
            self.serve()

        # This process exists only to serve; the class is Snakemake's, patched here alone.
        DAGApi.execute_workflow = hold  # type: ignore[method-assign]
        try:
            cli.args_to_api(args, parser)
        finally:
            DAGApi.execute_workflow = execute  # type: ignore[method-assign]
        if not self.served:
            # args_to_api printed the reason (to this runner's log).
            wire.send(self.control, {"ready": False, "error": "the workflow did not load"})
            return 1
        return 0

    def serve(self) -> None:
        self.served = True
        self.watched = {path: _signature(path) for path in _watched_files(self.workflow)}
        log.info("loaded; answers stale once one of these changes: %s", ", ".join(self.watched))
        _warm_imports()
        warm_script.install()
        # What is loaded now lives as long as the runner: keep the children's collector
        # off it (a collection would write to every page they share with the runner).
        gc.collect()
        gc.freeze()
        wire.send(self.control, {"ready": True, "pid": os.getpid()})
        self.selector.register(self.control, selectors.EVENT_READ, None)
        while True:
            # Without pidfds, children are looked at every 50 ms.
            polled = [job for job in self.jobs.values() if job.pidfd is None]
            for key, _ in self.selector.select(0.05 if polled else None):
                if key.data is None:
                    if not self.accept():
                        self.shutdown()
                        return
                else:
                    self.reap(key.data)
            for job in polled:
                if job.pid in self.jobs:
                    self.reap(job, block=False)
            if self.stale and not self.jobs:
                return

    @property
    def workflow(self) -> Any:
        return self.dag_api.workflow_api._workflow

    # -- jobs -------------------------------------------------------------------------------

    def accept(self) -> bool:
        """Take one job request off the control socket; False once the worker is gone."""
        try:
            message, fds = wire.receive(self.control, maxfds=3)
        except OSError:
            return False
        if message is None:
            for fd in fds:
                os.close(fd)
            return False
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            return True
        job_sock = socket.socket(fileno=fds[0])
        out_w, err_w = fds[1], fds[2]
        try:
            self.start_job(job_sock, out_w, err_w)
        except OSError as exc:  # the worker gave up on it meanwhile
            log.warning("a job request failed: %s", exc)
            job_sock.close()
        finally:
            os.close(out_w)
            os.close(err_w)
        return True

    def start_job(self, job_sock: socket.socket, out_w: int, err_w: int) -> None:
        job_sock.settimeout(60)  # the worker sends the request right after the descriptors
        request, _ = wire.receive(job_sock)
        if request is None:
            job_sock.close()
            return
        if not self.stale:
            changed = [p for p, sig in self.watched.items() if _signature(p) != sig]
            if changed:
                self.stale = f"{changed[0]} changed since the warm runner loaded it"
        if self.stale:
            wire.send(job_sock, {"stale": self.stale})
            job_sock.close()
            return
        argv = list(request["argv"])
        if strip_per_job(argv) != self.general:
            wire.send(job_sock, {"fallback": "its options differ from the warm runner's"})
            job_sock.close()
            return
        try:
            args = self.parser.parse_args(argv)
        except BaseException as exc:  # argparse exits on what it cannot read
            wire.send(job_sock, {"fallback": f"its arguments do not parse: {exc!r}"})
            job_sock.close()
            return
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        pid = os.fork()
        if pid == 0:
            self.child(job_sock, out_w, err_w, argv, args, dict(request.get("env") or {}))
        job = _Job(pid, job_sock, _pidfd(pid))
        self.jobs[pid] = job
        if job.pidfd is not None:
            self.selector.register(job.pidfd, selectors.EVENT_READ, job)
        wire.send(job_sock, {"pid": pid})

    def reap(self, job: _Job, block: bool = True) -> None:
        """Tell the worker how ``job``'s process ended."""
        pid, status, usage = os.wait4(job.pid, 0 if block else os.WNOHANG)
        if pid == 0:
            return
        del self.jobs[job.pid]
        if job.pidfd is not None:
            self.selector.unregister(job.pidfd)
            os.close(job.pidfd)
        try:
            wire.send(job.sock, {"status": status, "maxrss": usage.ru_maxrss * 1024})
        except OSError:
            pass  # the worker stopped waiting (cancelled): nothing to tell
        job.sock.close()

    def shutdown(self) -> None:
        """The worker is gone: kill the jobs still running and reap them."""
        for job in list(self.jobs.values()):
            try:
                os.killpg(job.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.reap(job)

    # -- in the child -----------------------------------------------------------------------

    def child(
        self,
        job_sock: socket.socket,
        out_w: int,
        err_w: int,
        argv: list[str],
        args: Any,
        env: dict[str, str],
    ) -> None:
        """Run one job in this forked child, then end the process."""
        code = 1
        try:
            os.setsid()
            self.selector.close()
            self.control.close()
            job_sock.close()
            for job in self.jobs.values():
                job.sock.close()
                if job.pidfd is not None:
                    os.close(job.pidfd)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            for fd in (devnull, out_w, err_w):
                os.close(fd)
            os.environ.update(env)
            # What Snakemake shows as its command line (the log's header).
            sys.argv = [self.program, *argv]
            code = self.run_job(args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):  # a closed pipe: the worker has gone
                    stream.flush()
            os._exit(code)

    def run_job(self, args: Any) -> int:
        """What ``python -m snakemake ARGS`` does once ``args_to_api`` has loaded the
        workflow: this job's values into the settings, then ``execute_workflow``."""
        from snakemake import cli

        kwargs = self.kwargs
        dag_settings = self.dag_api.dag_settings
        dag_settings.target_jobs = args.target_jobs
        dag_settings.allowed_rules = args.allowed_rules
        execution = kwargs["execution_settings"]
        execution.attempt = args.attempt
        execution.use_threads = args.force_use_threads
        execution.wait_for_files = cli.parse_wait_for_files(args)
        kwargs["group_settings"].local_groupid = args.local_groupid
        self.dag_api.workflow_api.storage_settings.unneeded_temp_files = args.unneeded_temp_files
        workflow = self.workflow
        # What a fresh process would have of its own: a start time, a temporary folder,
        # and threads for Snakemake's async calls (those of the runner are not forked).
        workflow.start_time = datetime.now()
        own_tmp = tempfile.TemporaryDirectory(prefix="snakemake")
        workflow._snakemake_tmp_dir = own_tmp
        workflow._async_runners = {}
        workflow._async_executor = ThreadPoolExecutor()
        workflow._async_lock = threading.Lock()
        if len(args.target_jobs) == 1 and kwargs["scheduling_settings"].scheduler == "ilp":
            # One job to select: Snakemake's greedy selector takes it as the ILP would,
            # without starting a solver process (the ILP's own fallback, too).
            from snakemake.scheduling.greedy import SchedulerSettings

            kwargs["scheduling_settings"].scheduler = "greedy"
            kwargs["scheduler_settings"] = SchedulerSettings()
        api = self.dag_api.snakemake_api
        try:
            self.execute(self.dag_api, **kwargs)
            return 0
        except Exception as exc:
            api.print_exception(exc)
            return 1
        finally:
            api.logger_manager.stop()
            own_tmp.cleanup()


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` ends (None where the kernel or
    Python has none: the child is then polled)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _watched_files(workflow: Any) -> list[str]:
    """The local files the loaded workflow was read from: Snakefiles and config files."""
    paths: list[str] = []
    for source in workflow.included:
        try:
            path = source.get_path_or_uri(secret_free=True)
        except Exception as exc:  # not a plain file (a URL): nothing to watch
            log.debug("not watching %s: %s", source, exc)
            continue
        if isinstance(path, str) and os.path.isfile(path):
            paths.append(os.path.abspath(path))
    for path in workflow.configfiles:
        paths.append(os.path.abspath(str(path)))
    return paths


def _signature(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _warm_imports() -> None:
    """Import what running a job imports lazily, once here instead of in every child,
    and fill the caches of what Snakemake's header asks each time (``platform`` runs
    ``uname -p`` for it)."""
    import platform

    platform.platform()
    for name in (
        "snakemake.dag",
        "snakemake.jobs",
        "snakemake.persistence",
        "snakemake.scheduling.job_scheduler",
        "snakemake.scheduling.greedy",
        "snakemake.scheduling.milp",
        "snakemake.executors.local",
        "snakemake.executors.touch",
        "snakemake.executors.dryrun",
        "snakemake.shell",
        "snakemake.script",
        "snakemake.wrapper",
        "snakemake.benchmark",
        "snakemake.io",
        # Snakemake imports it for every script: job, to tell notebooks from scripts.
        "nbformat",
    ):
        try:
            importlib.import_module(name)
        except Exception as exc:  # a missing optional part: the child imports what it needs
            log.debug("warm import of %s failed: %s", name, exc)


def main(argv: list[str]) -> int:
    # This module's own lines only (Snakemake's logger propagates to the root one).
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s warm runner: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    control = socket.socket(fileno=int(argv[0]))
    started = time.monotonic()
    code = WarmServer(control).run()
    log.info("ended after %.1f s", time.monotonic() - started)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
