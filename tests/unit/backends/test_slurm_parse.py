"""SLURM output parsers fed REAL output (captured from the local 22.05 test cluster by
samples/capture.sh), the state and reason tables, wait-status decoding, the squeue/sacct
poll path, the command runner, and the poller (backoff, batching, error tolerance) with a
fake backend and a fake clock. Submit-error sorting and the submit/poll/cancel rules
shared with PBS are tested in test_batch_backends.py."""

from __future__ import annotations

import random
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from hpcflow.backends._commands import CommandRunner, CommandTimedOut
from hpcflow.backends.base import AllocationState, AllocationStatus
from hpcflow.backends.poller import LOST_REASON, Poller
from hpcflow.backends.slurm.backend import (
    SlurmBackend,
    parse_sacct,
    parse_sbatch_parsable,
    parse_squeue,
    parse_squeue_json,
)
from hpcflow.backends.slurm.states import (
    REASONS,
    STATE_MAP,
    decode_exit_pair,
    decode_wait_status,
    describe_reason,
    to_state,
)
from hpcflow.errors import SchedulerCommandError, SubmitError
from tests.unit.backends.cases import ScriptedRunner, sample

S = AllocationState


# -- squeue ---------------------------------------------------------------------


def test_parse_squeue_mixed_states():
    ids = sample("squeue_mixed_ids.txt").strip().split(",")
    got = parse_squeue(sample("squeue_mixed.txt"), ids)
    assert set(got) == set(ids)
    by_native = {s.native_id: s for s in got.values()}
    completed, failed, killed = by_native["29"], by_native["30"], by_native["31"]
    assert (completed.state, completed.exit_code, completed.nodes) == (S.COMPLETED, 0, "n1")
    assert completed.reason is None
    assert (failed.state, failed.exit_code) == (S.FAILED, 5)  # raw 1280
    assert failed.reason == REASONS["NonZeroExitCode"]
    assert (killed.state, killed.exit_code) == (S.FAILED, 137)  # kill -9: raw 9
    assert by_native["33"].state is S.RUNNING and by_native["33"].nodes == "n[1-2]"
    assert by_native["33"].exit_code is None  # only final states carry one
    assert by_native["34"].reason == REASONS["Resources"]
    assert by_native["35"].reason == REASONS["JobHeldUser"]
    assert by_native["36"].reason == REASONS["Dependency"]
    assert by_native["37"].reason == REASONS["DependencyNeverSatisfied"]
    assert by_native["38"].reason == f"{REASONS['ReqNodeNotAvail']} (UnavailableNodes:n4)"
    assert by_native["38"].state is S.QUEUED and by_native["38"].nodes is None
    assert by_native["39"].state is S.CANCELLED  # cancelled while pending


def test_parse_squeue_keeps_only_wanted_ids():
    got = parse_squeue(sample("squeue_mixed.txt"), ["30", "999"])
    assert list(got) == ["30"]


def test_parse_squeue_timeout():
    (status,) = parse_squeue(sample("squeue_timeout.txt"), ["40"]).values()
    assert (status.state, status.native_state, status.exit_code) == (S.TIMEOUT, "TIMEOUT", 143)
    assert status.reason == REASONS["TimeLimit"]


def test_parse_squeue_json_is_filtered_on_our_side():
    """22.05 ignores -j with --json: the sample asked for 3 ids and lists 17 jobs."""
    ids = ["29", "30", "39"]
    got = parse_squeue_json(sample("squeue_mixed.json"), ids)
    assert sorted(got) == ids
    assert (got["30"].state, got["30"].exit_code) == (S.FAILED, 5)
    assert got["39"].state is S.CANCELLED
    everything = parse_squeue_json(sample("squeue_mixed.json"), map(str, range(100)))
    assert len(everything) == 17
    # Same answers as the delimited listing for the jobs both hold.
    assert everything["31"] == parse_squeue(sample("squeue_mixed.txt"), ["31"])["31"]
    assert everything["24"].state is S.CANCELLED and everything["24"].exit_code == 143


def test_parse_squeue_json_timeout():
    status = parse_squeue_json(sample("squeue_timeout.json"), ["40"])["40"]
    assert (status.state, status.exit_code, status.nodes) == (S.TIMEOUT, 143, "n1")


def test_parse_squeue_skips_malformed_lines():
    assert parse_squeue("garbage\n\n7|RUNNING|0\n", ["7"]) == {}


# -- sacct and sbatch -------------------------------------------------------------


def test_parse_sacct_rows():
    got = parse_sacct(sample("sacct_jobcomp.txt"), ["29", "30", "40"])
    assert (got["30"].state, got["30"].exit_code) == (S.FAILED, 5)
    assert (got["29"].state, got["29"].exit_code) == (S.COMPLETED, 0)
    assert got["40"].state is S.TIMEOUT
    # Accounting DB output: step rows are skipped, "CANCELLED by UID" is understood.
    text = (
        "12|CANCELLED by 1000|0:15|None\n12.batch|CANCELLED|0:15|\n13|FAILED|3:0|NonZeroExitCode\n"
    )
    got = parse_sacct(text, ["12", "13"])
    assert (got["12"].state, got["12"].exit_code) == (S.CANCELLED, 143)
    assert got["13"].reason == REASONS["NonZeroExitCode"]


def test_parse_sbatch_parsable():
    assert parse_sbatch_parsable(sample("sbatch_parsable.txt")) == "28"
    assert parse_sbatch_parsable("4242;cluster2\n") == "4242"
    assert parse_sbatch_parsable("sbatch: warning: x\n77\n") == "77"
    for bad in ("Submitted batch job 12\n", "", "\n"):
        with pytest.raises(SubmitError, match="no job id") as info:
            parse_sbatch_parsable(bad)
        assert info.value.transient is False


# -- tables and decoding -----------------------------------------------------------


@pytest.mark.parametrize(
    ("native", "ours"),
    [("PENDING", S.QUEUED), ("CONFIGURING", S.QUEUED), ("RUNNING", S.RUNNING),
     ("COMPLETING", S.RUNNING), ("COMPLETED", S.COMPLETED), ("FAILED", S.FAILED),
     ("NODE_FAIL", S.FAILED), ("OUT_OF_MEMORY", S.FAILED), ("BOOT_FAIL", S.FAILED),
     ("DEADLINE", S.FAILED), ("CANCELLED", S.CANCELLED), ("PREEMPTED", S.CANCELLED),
     ("TIMEOUT", S.TIMEOUT), ("CANCELLED by 0", S.CANCELLED), ("running", S.RUNNING),
     ("WHATEVER", S.UNKNOWN), ("", S.UNKNOWN)],
)  # fmt: skip
def test_state_table(native, ours):
    assert to_state(native) is ours


def test_every_final_slurm_state_is_final_here():
    from tests.slurm_cluster import FINAL_STATES

    assert all(to_state(s).final for s in FINAL_STATES)
    assert set(STATE_MAP) >= FINAL_STATES


def test_reason_table():
    common = ["Priority", "Resources", "QOSMaxJobsPerUserLimit", "AssocGrpCpuLimit",
              "ReqNodeNotAvail", "Dependency", "DependencyNeverSatisfied",
              "PartitionTimeLimit", "BeginTime", "JobHeldUser", "JobHeldAdmin",
              "PartitionNodeLimit", "Reservation", "NodeDown", "Licenses",
              "QOSGrpCpuLimit", "AssocMaxJobsLimit", "JobArrayTaskLimit"]  # fmt: skip
    for code in common:
        sentence = describe_reason(code)
        assert sentence and sentence.endswith(".") and code not in sentence
    assert describe_reason("None") is None
    assert describe_reason("") is None
    assert describe_reason(None) is None
    assert describe_reason("(Priority)") == REASONS["Priority"]
    unknown = describe_reason("FrobnicatorBusy")
    assert "FrobnicatorBusy" in unknown


@pytest.mark.parametrize(
    ("status", "code"),
    [(0, 0), (1280, 5), (256, 1), (255 << 8, 255), (9, 137), (15, 143), (2, 130), (-1, -1)],
)
def test_decode_wait_status(status, code):
    assert decode_wait_status(status) == code


def test_decode_exit_pair():
    killed = sample("scontrol_kill9.txt").split("ExitCode=")[1].split()[0]
    assert killed == "0:9"
    assert decode_exit_pair(killed) == 137
    assert decode_exit_pair("5:0") == 5
    assert decode_exit_pair("0:0") == 0
    assert decode_exit_pair("") is None


# -- the backend's poll path, with a scripted runner -------------------------------


def test_poll_is_one_squeue_call_and_remembers_disabled_accounting():
    runner = ScriptedRunner(
        {
            "squeue": [(0, sample("squeue_mixed.txt"), ""),
                       (1, "", sample("squeue_invalid_job_id.txt"))],
            "sacct": [(1, "", sample("sacct_disabled.txt"))],
        }
    )  # fmt: skip
    backend = SlurmBackend(runner)
    got = backend.poll(["29", "30", "31", "4000"])
    assert set(got) == {"29", "30", "31"}  # 4000 is unknown: omitted
    assert runner.calls == {"squeue": 1, "sacct": 1}
    assert "--jobs=29,30,31,4000" in runner.argvs[0] and "--states=all" in runner.argvs[0]
    assert backend.accounting is False
    # Every id purged: squeue's "Invalid job id specified" means "none known"; sacct
    # is not asked again.
    assert backend.poll(["29"]) == {}
    assert runner.calls == {"squeue": 2, "sacct": 1}


def test_poll_falls_back_to_sacct_when_accounting_works():
    runner = ScriptedRunner(
        {
            "squeue": [(1, "", sample("squeue_invalid_job_id.txt"))],
            "sacct": [(0, "30|FAILED|5:0|NonZeroExitCode\n30.batch|FAILED|5:0|\n", "")],
        }
    )
    backend = SlurmBackend(runner)
    got = backend.poll(["30", "31"])
    assert list(got) == ["30"] and got["30"].exit_code == 5
    assert backend.accounting is True
    assert runner.calls == {"squeue": 1, "sacct": 1}


def test_poll_survives_a_missing_sacct():
    class NoSacct(ScriptedRunner):
        def run(self, argv, *, timeout=None, input=None):
            if argv[0] == "sacct":
                raise SchedulerCommandError(argv, 127, "", "sacct: not found")
            return super().run(argv, timeout=timeout, input=input)

    runner = NoSacct({"squeue": [(0, sample("squeue_mixed.txt"), "")]})
    backend = SlurmBackend(runner)
    assert set(backend.poll(["29", "4000"])) == {"29"}
    assert backend.accounting is False


# -- the command runner (real processes) -----------------------------------------


def test_runner_counts_and_reports():
    runner = CommandRunner(env={"HPCFLOW_PROBE": "x y"})
    result = runner.run([sys.executable, "-c", "import os; print(os.environ['HPCFLOW_PROBE'])"])
    assert (result.returncode, result.stdout) == (0, "x y\n")
    failed = runner.run([sys.executable, "-c", "import sys; sys.exit(3)"])
    assert failed.returncode == 3 and not failed.ok
    with pytest.raises(SchedulerCommandError):
        failed.check()
    assert runner.calls[Path(sys.executable).name] == 2
    assert runner.run(["cat"], input="hello").stdout == "hello"


def test_runner_kills_hung_commands_and_their_children():
    runner = CommandRunner(timeout=0.5)
    # The child shell's sleep keeps the pipes open: only a group kill ends it.
    argv = ["bash", "-c", "echo started; sleep 30 & sleep 30"]
    with pytest.raises(CommandTimedOut) as info:
        runner.run(argv)
    assert info.value.returncode == 124 and "killed after 0.5 s" in str(info.value)
    assert info.value.stdout == "started\n"


def test_runner_missing_program_has_a_hint():
    with pytest.raises(SchedulerCommandError) as info:
        CommandRunner().run(["hpcflow-no-such-sbatch", "--parsable"])
    assert info.value.returncode == 127 and "PATH" in info.value.hint
    with pytest.raises(TypeError):
        CommandRunner().run("sbatch --parsable")  # type: ignore[arg-type]


# -- the poller, with a fake backend and a fake clock -------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class FakeBackend:
    """Plays a script: each poll returns the next entry (a dict, or an exception)."""

    name = "fake"

    def __init__(self, script: list) -> None:
        self.script = script
        self.calls: list[list[str]] = []

    def poll(self, native_ids: Sequence[str]) -> dict[str, AllocationStatus]:
        self.calls.append(list(native_ids))
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(step, Exception):
            raise step
        return {i: st for i, st in step.items() if i in native_ids}


def status(native_id: str, state: AllocationState, exit_code=None) -> AllocationStatus:
    return AllocationStatus(native_id, state, state.name, exit_code=exit_code)


def make_poller(backend, clock, **kw) -> Poller:
    kw.setdefault("interval", 1.0)
    kw.setdefault("initial_delay", 0.5)
    kw.setdefault("max_interval", 8.0)
    kw.setdefault("jitter", 0.0)
    return Poller(backend, clock=clock, sleep=clock.sleep, **kw)


def test_poller_batches_all_ids_into_one_call():
    clock = FakeClock()
    queued = {i: status(i, S.QUEUED) for i in ("1", "2", "3")}
    backend = FakeBackend([queued])
    poller = make_poller(backend, clock)
    poller.track(["3", "1"])
    poller.track(["2"])
    assert poller.poll_once(0.4) == {}  # not due before the initial delay
    changed = poller.poll_once(0.5)
    assert backend.calls == [["1", "2", "3"]] and set(changed) == {"1", "2", "3"}
    assert poller.queries == 1
    assert poller.poll_once(0.6) == {}  # one query per due time, however often asked
    assert poller.queries == 1


def test_poller_backs_off_while_nothing_changes_and_resets_on_change():
    clock = FakeClock()
    q, r = status("1", S.QUEUED), status("1", S.RUNNING)
    backend = FakeBackend([{"1": q}] * 6 + [{"1": r}] + [{"1": r}] * 5)
    poller = make_poller(backend, clock)
    poller.track(["1"])
    due_times = []
    for _ in range(12):
        clock.now = poller.next_due
        due_times.append(clock.now)
        poller.poll_once(clock.now)
    gaps = [round(b - a, 6) for a, b in zip(due_times, due_times[1:])]
    # First answer is a change (interval 1), then 2, 4, 8, 8, 8; the change to
    # RUNNING resets to 1, then doubling again.
    assert gaps == [1, 2, 4, 8, 8, 8, 1, 2, 4, 8, 8]
    assert poller.queries == 12


def test_a_poller_told_to_hurry_polls_one_base_interval_later_and_backs_off_again():
    """When the driver says the run is over the allocation ends within seconds: the
    submit side must not sleep out a backed-off wait (8 s here) to see it."""
    clock = FakeClock()
    backend = FakeBackend([{"1": status("1", S.RUNNING)}])
    poller = make_poller(backend, clock)
    poller.track(["1"])
    for _ in range(5):
        clock.now = poller.next_due
        poller.poll_once(clock.now)
    assert poller.next_due - clock.now == 8  # backed off to the cap
    poller.hurry(clock.now + 0.25)
    assert poller.next_due == clock.now + 1.25
    clock.now = poller.next_due
    poller.poll_once(clock.now)
    assert poller.next_due - clock.now == 2  # doubling from the base again
    poller.hurry(clock.now)  # never later than what is already due
    assert poller.next_due - clock.now == 1


def test_poller_tolerates_transient_failures_then_raises():
    clock = FakeClock()
    boom = SchedulerCommandError(["squeue"], 1, "", "Socket timed out")
    q = {"1": status("1", S.QUEUED)}
    backend = FakeBackend([q, boom, boom, q, boom, boom, boom])
    poller = make_poller(backend, clock, max_failures=3)
    poller.track(["1"])
    for expected_failures in (0, 1, 2, 0, 1, 2):
        clock.now = poller.next_due
        poller.poll_once(clock.now)
        assert poller.failures == expected_failures
        assert poller.latest["1"].state is S.QUEUED  # last known state kept
    clock.now = poller.next_due
    with pytest.raises(SchedulerCommandError):
        poller.poll_once(clock.now)


def test_poller_stops_polling_final_ids_and_marks_lost_ones():
    clock = FakeClock()
    backend = FakeBackend(
        [{"1": status("1", S.RUNNING), "2": status("2", S.RUNNING)},
         {"1": status("1", S.COMPLETED, 0), "2": status("2", S.RUNNING)},
         {}]
    )  # fmt: skip
    poller = make_poller(backend, clock, lost_after=2)
    result = poller.wait_until_final(["1", "2"], timeout=100)
    assert result["1"].state is S.COMPLETED and result["1"].exit_code == 0
    assert result["2"].state is S.UNKNOWN and result["2"].reason == LOST_REASON
    assert backend.calls == [["1", "2"], ["1", "2"], ["2"], ["2"]]
    assert poller.active == []


def test_wait_until_final_times_out_and_sleeps_between_polls():
    clock = FakeClock()
    backend = FakeBackend([{"1": status("1", S.QUEUED)}])
    poller = make_poller(backend, clock)
    with pytest.raises(TimeoutError, match="not finished"):
        poller.wait_until_final(["1"], timeout=30)
    assert clock.now == pytest.approx(30)
    # 0.5 s initial delay, then 1, 2, 4, 8, 8... never a busy loop.
    assert poller.queries == len(backend.calls) <= 7
    assert all(s > 0 for s in clock.sleeps)


def test_poller_jitter_spreads_due_times():
    clock = FakeClock()
    backend = FakeBackend([{"1": status("1", S.QUEUED)}])
    poller = make_poller(backend, clock, jitter=0.5, rng=random.Random(7))
    poller.track(["1"])
    poller.poll_once(0.5)
    assert poller.next_due != 1.5 and 1.0 <= poller.next_due <= 2.0
