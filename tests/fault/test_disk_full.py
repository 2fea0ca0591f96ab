"""Fault 7: the run directory's disk fills up mid-run.

The run stops with a clear error (no traceback), its state stays readable, and after
space is freed the same command resumes: every task ends done, none that succeeded and
was recorded runs again.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import write_workflow

WF = """
name: full
tasks:
  - name: fill
    foreach: {i: {range: [0, 12]}}
    command: head -c 60000 /dev/zero > {outputs}
    outputs: ["out/{i}.bin"]
"""


@pytest.fixture
def small_disk(tmp_path):
    """A 600 KiB tmpfs: room for a few task outputs and the run's state, not all."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(mount_point)],
        capture_output=True, text=True,
    )  # fmt: skip
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {made.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def _run(workdir, env):
    return subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", "run", "workflow.yaml", "-q"],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def test_full_disk_stops_cleanly_and_resumes(small_disk, env):
    write_workflow(small_disk, WF)
    first = _run(small_disk, env)
    assert first.returncode != 0
    assert "Traceback" not in first.stderr, first.stderr
    assert "disk is full" in first.stderr and "hint:" in first.stderr, first.stdout + first.stderr
    # The state is still readable.
    status = subprocess.run(
        [sys.executable, "-m", "hpcflow.cli.main", "status", "--json"],
        cwd=small_disk, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert status.returncode == 0, status.stderr
    # Free space, run again: it resumes and finishes.
    subprocess.run(["mount", "-o", "remount,size=8m", str(small_disk)], check=True)
    second = _run(small_disk, env)
    assert second.returncode == 0, second.stdout + second.stderr
    ran, cached = map(int, re.search(r"(\d+) ran, (\d+) up to date", second.stdout).groups())
    assert ran + cached == 12 and cached >= 1, second.stdout
    sizes = [p.stat().st_size for p in (small_disk / "out").iterdir()]
    assert sorted(sizes) == [60000] * 12


WF_LAST = """
name: last
tasks:
  - name: fill
    command: >-
      if [ -e filled ]; then echo ok > {outputs}; else
      touch filled; head -c 100000000 /dev/zero > filler.bin; exit 1; fi
    outputs: [ok.txt]
"""


def test_a_disk_filled_by_the_last_task_stops_cleanly_and_resumes(small_disk, env):
    """The disk fills while the run's last task runs (found by the fault campaign): the
    driver's loop ends with nothing it must write at once, so the first write that meets
    the full disk is the run's last status. It must say the disk is full, as any other
    write does, not print a traceback; after space is freed the same command finishes."""
    write_workflow(small_disk, WF_LAST)
    first = _run(small_disk, env)
    assert "Traceback" not in first.stderr, first.stderr
    assert first.returncode == 2, first.stdout + first.stderr
    assert "disk is full" in first.stderr and "hint:" in first.stderr, first.stderr
    (small_disk / "filler.bin").unlink()
    second = _run(small_disk, env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert (small_disk / "ok.txt").read_text() == "ok\n"
