"""Run one measurement: a fresh child process, timed end to end.

The child is started in a new session (``start_new_session=True``) so that
its whole process tree can be found (same session id, or a descendant), its
peak resident memory sampled, and everything killed on a time-out or left
over after it exits.
"""

from __future__ import annotations

import glob
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

try:
    import psutil
except ImportError:  # fall back to the peers venv's copy (same python)
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path.extend(
        glob.glob(os.path.join(_here, ".venv-peers", "lib", "python*", "site-packages"))
    )
    import psutil  # noqa: E402

SAMPLE_INTERVAL = 0.2


@dataclass
class Measurement:
    argv: list[str]
    rc: int | None = None
    wall_s: float = 0.0
    cpu_s: float = 0.0  # user+sys of the reaped process tree
    timed_out: bool = False
    launch_error: str | None = None
    peak_rss_mb: float = 0.0  # summed RSS of the tree, max over samples
    peak_root_rss_mb: float = 0.0  # the child process itself (hpcflow: the driver), sampled
    peak_rest_rss_mb: float = 0.0  # the rest of the tree (workers, task processes), sampled
    root_maxrss_mb: float = 0.0  # the child process's own ru_maxrss (exact, from wait4)
    peak_procs: int = 0
    samples: int = 0
    leftover_procs: int = 0  # still alive after the child exited (killed)
    stdout_tail: str = ""
    stderr_tail: str = ""
    extra: dict[str, object] = field(default_factory=dict)


def _session_members(sid: int, root: int, workdir: str) -> list[int]:
    """Processes of the measured run: same session, descendants of the
    child, or running in its work directory (catches daemonised workers)."""
    pids = set()
    for pid in psutil.pids():
        try:
            if os.getsid(pid) == sid:
                pids.add(pid)
        except OSError:
            pass
    try:
        pids.update(c.pid for c in psutil.Process(root).children(recursive=True))
    except psutil.Error:
        pass
    pids.add(root)
    return sorted(pids)


def _in_workdir(workdir: str) -> list[int]:
    me = os.getpid()
    found = []
    real = os.path.realpath(workdir)
    for p in psutil.process_iter(["pid"]):
        if p.pid == me:
            continue
        try:
            cwd = p.cwd()
        except psutil.Error:
            continue
        if cwd == real or cwd.startswith(real + os.sep):
            found.append(p.pid)
    return found


def _tree_rss(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.Error:
            pass
    return total


def _kill_all(pids: list[int]) -> int:
    procs = []
    for pid in pids:
        if pid == os.getpid():
            continue
        try:
            p = psutil.Process(pid)
            p.terminate()
            procs.append(p)
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=2)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=2)
    return len(procs)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _tail(path: str, limit: int = 1500) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def run_measured(
    argv: list[str], cwd: str, env: dict[str, str], timeout: float, logdir: str
) -> Measurement:
    m = Measurement(argv=list(argv))
    out_path = os.path.join(logdir, "stdout.txt")
    err_path = os.path.join(logdir, "stderr.txt")
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        except OSError as exc:
            m.launch_error = f"{type(exc).__name__}: {exc}"
            m.wall_s = time.perf_counter() - t0
            return m
        sid = proc.pid  # session leader
        stop = threading.Event()

        def sampler():
            while not stop.is_set():
                pids = _session_members(sid, proc.pid, cwd)
                root = _tree_rss([proc.pid])
                rss = _tree_rss([p for p in pids if p != proc.pid]) + root
                m.samples += 1
                m.peak_rss_mb = max(m.peak_rss_mb, rss / 2**20)
                m.peak_root_rss_mb = max(m.peak_root_rss_mb, root / 2**20)
                m.peak_rest_rss_mb = max(m.peak_rest_rss_mb, (rss - root) / 2**20)
                m.peak_procs = max(m.peak_procs, len(pids))
                stop.wait(SAMPLE_INTERVAL)

        # Reap the child with wait4 (not Popen.wait) to get its own rusage: ru_maxrss of
        # just this process, which RUSAGE_CHILDREN cannot give (it is a max over all).
        reaped = threading.Event()
        status: dict[str, object] = {}

        def reaper():
            _pid, st, ru = os.wait4(proc.pid, 0)
            status["rc"] = os.waitstatus_to_exitcode(st)
            status["maxrss_kb"] = ru.ru_maxrss
            status["t"] = time.perf_counter()
            reaped.set()

        th = threading.Thread(target=sampler, daemon=True)
        th.start()
        rth = threading.Thread(target=reaper, daemon=True)
        rth.start()
        if reaped.wait(timeout):
            m.wall_s = float(status["t"]) - t0  # type: ignore[arg-type]
        else:
            m.wall_s = time.perf_counter() - t0
            m.timed_out = True
            try:
                os.killpg(sid, signal.SIGTERM)
            except OSError:
                pass
            if not reaped.wait(3):
                try:
                    os.killpg(sid, signal.SIGKILL)
                except OSError:
                    pass
                reaped.wait()
        rth.join()
        m.rc = int(status["rc"])  # type: ignore[call-overload]
        proc.returncode = m.rc  # reaped above; keep Popen from waiting again
        m.root_maxrss_mb = int(status["maxrss_kb"]) / 1024  # type: ignore[call-overload]
        stop.set()
        th.join()
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    m.cpu_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    # Anything still running from this measurement must not disturb the next.
    left = set(_session_members(sid, proc.pid, cwd)) | set(_in_workdir(cwd))
    left.discard(proc.pid)
    left = {p for p in left if _alive(p)}
    if left:
        m.leftover_procs = _kill_all(sorted(left))
    m.stdout_tail = _tail(out_path)
    m.stderr_tail = _tail(err_path)
    return m
