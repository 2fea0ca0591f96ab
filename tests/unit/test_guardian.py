"""A process's tasks die with it, however it dies (hpcflow/worker/guardian.py), with real
processes: an owner starts a marked task and an unmarked one it registers, each in a
session of its own, and is SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil

from tests.fault.test_driver_killed import wait_for

OWNER = """
import subprocess, sys, time
from hpcflow.worker.guardian import GUARDIAN
marked = subprocess.Popen(["sleep", "60"], env=GUARDIAN.with_env(None), start_new_session=True)
# A task that cleared its environment: only its registered group can find it.
bare = subprocess.Popen(["sleep", "61"], env={}, start_new_session=True)
GUARDIAN.watch(bare.pid)
print(marked.pid, bare.pid, flush=True)
time.sleep(120)
"""


def living(pids: list[int]) -> list[int]:
    found = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                found.append(pid)
        except psutil.Error:
            continue
    return found


def test_tasks_die_with_their_owner_when_it_is_sigkilled():
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    pids: list[int] = []
    try:
        assert owner.stdout is not None
        pids = [int(p) for p in owner.stdout.readline().split()]
        assert len(pids) == 2 and living(pids) == pids
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
        wait_for(lambda: not living(pids), 30, f"the owner's tasks {pids} to die")
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        for pid in living(pids):
            os.kill(pid, signal.SIGKILL)


def test_tasks_run_on_while_their_owner_lives():
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    pids: list[int] = []
    try:
        assert owner.stdout is not None
        pids = [int(p) for p in owner.stdout.readline().split()]
        # The guardian runs, and nothing is killed while its owner lives.
        wait_for(
            lambda: any(
                "HPCFLOW_TASKS_OF" in " ".join(c.cmdline())
                for c in psutil.Process(owner.pid).children()
            ),
            30,
            "the guardian to start",
        )
        assert living(pids) == pids
    finally:
        owner.kill()
        owner.wait()
        wait_for(lambda: not living(pids), 30, f"the owner's tasks {pids} to die")
