"""Run one measurement: a fresh child process, timed end to end.

The child is started in a new session (``start_new_session=True``) so that
its whole process tree can be found (same session id, or a descendant), its
peak resident memory sampled, and everything killed on a time-out or left
over after it exits.
"""

from __future__ import annotations

import glob
import json
import os
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


_LAUNCHER_CODE = r"""
import json, os, subprocess, sys, time
for line in sys.stdin:
    job = json.loads(line)
    try:
        with open(job["out"], "wb") as out, open(job["err"], "wb") as err:
            proc = subprocess.Popen(job["argv"], cwd=job["cwd"], env=job["env"],
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    start_new_session=True)
    except OSError as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        continue
    print(json.dumps({"pid": proc.pid}), flush=True)
    _pid, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = 0
    print(json.dumps({"rc": os.waitstatus_to_exitcode(status), "maxrss_kb": ru.ru_maxrss,
                      "cpu_s": ru.ru_utime + ru.ru_stime, "t": time.monotonic()}), flush=True)
"""


class _Launcher:
    """A small process that starts each measured command and reaps it with wait4.

    Linux keeps a process's peak RSS across fork and exec (``ru_maxrss`` of a child is at
    least its parent's size when it forked), so children of the bench process, which
    grows to hundreds of MB while it checks the 1M-task workloads, would all report that
    size. The launcher is started with the first measurement, while the bench is small,
    and stays small: its children report only their own peak.
    """

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER_CODE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def start(self, argv: list[str], cwd: str, env: dict[str, str], out: str, err: str) -> dict:
        if self.proc.stdin is None or self.proc.stdout is None:
            raise RuntimeError("the launcher's pipes are missing")
        job = {"argv": argv, "cwd": cwd, "env": env, "out": out, "err": err}
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def reaped(self) -> dict:
        """The measured command's end (blocks until the launcher reaped it)."""
        if self.proc.stdout is None:
            raise RuntimeError("the launcher's pipes are missing")
        return json.loads(self.proc.stdout.readline())


_LAUNCHER: _Launcher | None = None


def _launcher() -> _Launcher:
    global _LAUNCHER
    if _LAUNCHER is None or _LAUNCHER.proc.poll() is not None:
        _LAUNCHER = _Launcher()
    return _LAUNCHER


def run_measured(
    argv: list[str], cwd: str, env: dict[str, str], timeout: float, logdir: str
) -> Measurement:
    m = Measurement(argv=list(argv))
    out_path = os.path.join(logdir, "stdout.txt")
    err_path = os.path.join(logdir, "stderr.txt")
    launcher = _launcher()
    t0 = time.monotonic()
    started = launcher.start(list(argv), cwd, env, out_path, err_path)
    if "error" in started:
        m.launch_error = str(started["error"])
        m.wall_s = time.monotonic() - t0
        return m
    pid = int(started["pid"])
    sid = pid  # session leader
    stop = threading.Event()

    def sampler():
        while not stop.is_set():
            pids = _session_members(sid, pid, cwd)
            root = _tree_rss([pid])
            rss = _tree_rss([p for p in pids if p != pid]) + root
            m.samples += 1
            m.peak_rss_mb = max(m.peak_rss_mb, rss / 2**20)
            m.peak_root_rss_mb = max(m.peak_root_rss_mb, root / 2**20)
            m.peak_rest_rss_mb = max(m.peak_rest_rss_mb, (rss - root) / 2**20)
            m.peak_procs = max(m.peak_procs, len(pids))
            stop.wait(SAMPLE_INTERVAL)

    reaped = threading.Event()
    status: dict[str, object] = {}

    def reaper():
        status.update(launcher.reaped())
        reaped.set()

    th = threading.Thread(target=sampler, daemon=True)
    th.start()
    rth = threading.Thread(target=reaper, daemon=True)
    rth.start()
    if reaped.wait(timeout):
        m.wall_s = float(status["t"]) - t0  # type: ignore[arg-type]
    else:
        m.wall_s = time.monotonic() - t0
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
    m.root_maxrss_mb = int(status["maxrss_kb"]) / 1024  # type: ignore[call-overload]
    m.cpu_s = float(status["cpu_s"])  # type: ignore[arg-type]
    stop.set()
    th.join()
    # Anything still running from this measurement must not disturb the next.
    left = set(_session_members(sid, pid, cwd)) | set(_in_workdir(cwd))
    left.discard(pid)
    left = {p for p in left if _alive(p)}
    if left:
        m.leftover_procs = _kill_all(sorted(left))
    m.stdout_tail = _tail(out_path)
    m.stderr_tail = _tail(err_path)
    return m
