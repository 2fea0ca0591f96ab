"""A short seeded fault campaign (tests/fault/campaign.py): random faults at random
instants in a 46-task workflow (the driver killed, a task killed, the disk filled), each
followed by a re-run, checked from the lines the tasks themselves wrote. The recorded long
campaign is in docs/reliability.md."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.fault.campaign import (
    SLOTS,
    Faulted,
    Line,
    _first_run_problem,
    campaign,
    check,
    expected_outputs,
    kinds,
)
from tests.fault.campaign_cluster import run_cluster_iteration

#: Iterations in the suite; `python -m tests.fault.campaign --iterations 200` runs more.
#: This seed draws each (engine, fault) of the local campaign once.
ITERATIONS = 6
SEED = 20261222


def test_a_short_seeded_campaign_has_no_violations(tmp_path: Path) -> None:
    done = campaign(ITERATIONS, SEED, tmp_path)
    assert sorted((it.engine, it.fault) for it in done) == sorted(kinds("local"))
    # Each fault struck the run while it ran; the disk fault filled a disk.
    struck = {it.fault: it.struck for it in done if it.struck}
    assert len(struck) == 3, [it.struck for it in done]
    filled = [int(it.struck.split("(")[1].split()[0]) for it in done if it.fault == "disk"]
    assert filled and min(filled) > 0, [it.struck for it in done]
    problems = [(it.number, it.engine, it.fault, it.verdict.violations) for it in done]
    assert not any(v for *_, v in problems), problems


def test_a_full_disk_run_must_end_with_a_clear_error() -> None:
    """The disk fault's check on the run it struck: an exit 0, a traceback or an error
    that names neither the full disk nor failed tasks is reported."""

    def first(rc: int, err: str) -> Faulted:
        return Faulted("disk filled (8 bytes)", 1.0, 2.0, rc, err, 0, "", [])

    clear = "error: the run stopped: the disk is full (database or disk is full)\n"
    assert _first_run_problem("disk", first(2, clear)) == ""
    assert "clear error" in _first_run_problem("disk", first(0, ""))
    assert "clear error" in _first_run_problem("disk", first(2, "Traceback (most recent"))
    assert "clear error" in _first_run_problem("disk", first(1, "error: something\n"))


def _write_outputs(folder: Path) -> None:
    for name, text in expected_outputs().items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def test_the_checks_catch_what_they_name(tmp_path: Path) -> None:
    """The checker itself: overlapping attempts, an orphan ending or still beating after
    the re-run began, too many ended tasks run again, and a wrong output are each
    reported; a killed attempt that went quiet is not."""
    from tests.fault.campaign import TASKS

    _write_outputs(tmp_path)
    fault, rerun = 100.0, 110.0
    clean = [Line("start", t, f"{t}-a", 1.0) for t in TASKS] + [
        Line("end", t, f"{t}-a", 2.0) for t in TASKS
    ]
    assert check(clean, fault, rerun, tmp_path).violations == []

    overlap = clean + [Line("start", "sh1", "b", 1.5), Line("end", "sh1", "b", 3.0)]
    assert any("alive at once" in v for v in check(overlap, fault, rerun, tmp_path).violations)

    orphan = clean + [Line("start", "sh2", "o", 99.0), Line("end", "sh2", "o", 111.0)]
    assert any("ended after" in v for v in check(orphan, fault, rerun, tmp_path).violations)

    # A killed attempt is alive until its last beat: still beating after the re-run's
    # attempt began is an overlap; quiet before it is not.
    killed = [Line("start", "sh3", "k", 99.0), Line("beat", "sh3", "k", 99.5)]
    rerun_attempt = [Line("start", "sh3", "r", 111.0), Line("end", "sh3", "r", 112.0)]
    quiet = clean + killed + rerun_attempt
    assert check(quiet, fault, rerun, tmp_path).violations == []
    beating = quiet + [Line("beat", "sh3", "k", 111.5)]
    assert any("alive at once" in v for v in check(beating, fault, rerun, tmp_path).violations)

    again = clean + [Line("start", t, f"{t}-r", 120.0) for t in TASKS[: SLOTS + 1]]
    assert any("ran again" in v for v in check(again, fault, rerun, tmp_path).violations)

    (tmp_path / "last.txt").write_text("wrong\n")
    assert any("last.txt" in v for v in check(clean, fault, rerun, tmp_path).violations)


@pytest.mark.slurm
def test_a_short_seeded_cluster_campaign_has_no_violations(tmp_path: Path, slurm_cluster) -> None:
    """Three of the cluster faults (tests/fault/campaign_cluster.py), in pilot mode on the
    session's test cluster: the driver killed, the workers' srun killed, the submitting
    side killed; each followed by a re-run and checked from the tasks' own lines."""
    faults = ("pilot-driver", "launch", "follower")
    done = [
        run_cluster_iteration(n, random.Random(f"{SEED}:{n}"), tmp_path, slurm_cluster, f)
        for n, f in enumerate(faults)
    ]
    assert [it.fault for it in done] == list(faults)
    # Each fault struck a process of the run while it ran (not a run already over).
    struck = [it.struck.split()[0] if it.struck else "" for it in done]
    assert struck == ["driver", "srun", "follower"], [it.struck for it in done]
    problems = [(it.number, it.fault, it.verdict.violations) for it in done]
    assert not any(v for *_, v in problems), problems
