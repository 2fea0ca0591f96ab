"""PBS output parsers fed the samples in samples/pbs: Torque-format output captured from
SLURM's PBS/Torque wrappers, and PBS Pro / Torque layouts written from their documents
(samples/pbs/README.md says which is which); the state and exit-status tables; and the
backend's own poll and submit paths with a scripted runner (qstat's JSON and text, the
SLURM wrapper's framing). Submit-error sorting and the submit/poll/cancel rules shared
with SLURM are tested in test_batch_backends.py."""

from __future__ import annotations

import json

import pytest

from hpcflow.backends._commands import CommandResult
from hpcflow.backends.base import AllocationState
from hpcflow.backends.pbs import PbsBackend
from hpcflow.backends.pbs.backend import (
    hosts,
    parse_qstat_full,
    parse_qstat_json,
    parse_qstat_table,
    parse_qsub_id,
)
from hpcflow.backends.pbs.states import (
    FINAL_LETTERS,
    NO_EXIT_STATUS,
    NON_ZERO,
    PRO_EXEC_CODES,
    STATE_MAP,
    TORQUE_EXEC_CODES,
    WAITING_REASONS,
    final_outcome,
    to_state,
)
from hpcflow.errors import SchedulerCommandError, SubmitError
from tests.unit.backends import cases
from tests.unit.backends.cases import ScriptedRunner, request

S = AllocationState


def sample(name: str) -> str:
    return cases.sample(f"pbs/{name}")


def rc(name: str) -> int:
    return int(sample(f"{name}.rc"))


def captured_ids() -> dict[str, str]:
    """The captured mix: name → id."""
    names = ["ok", "fail", "run1", "run2", "big", "held", "cancelled"]
    return dict(zip(names, sample("qstat_ids.txt").split(), strict=True))


# -- qstat, captured from the SLURM wrappers (Torque format) ---------------------


def test_parse_captured_qstat_full():
    ids = captured_ids()
    got = parse_qstat_full(sample("qstat_full.txt"), ids.values())
    assert set(got) == set(ids.values())
    by = {name: got[native_id] for name, native_id in ids.items()}
    # The wrapper never reports an exit status: ended jobs are "completed", saying so.
    for name in ("ok", "fail", "cancelled"):
        status = by[name]
        assert (status.state, status.native_state, status.exit_code) == (S.COMPLETED, "C", None)
        assert status.reason == NO_EXIT_STATUS
    assert (by["run1"].state, by["run1"].nodes) == (S.RUNNING, "n1")
    assert (by["run2"].state, by["run2"].nodes) == (S.RUNNING, "n2,n3")
    assert by["run1"].reason is None and by["run1"].exit_code is None
    for name in ("big", "held"):
        assert (by[name].state, by[name].reason, by[name].nodes) == (S.QUEUED, None, None)
    assert by["ok"].nodes == "n1" and by["cancelled"].nodes is None


def test_parse_captured_qstat_table_agrees_on_states():
    ids = list(captured_ids().values())
    full = parse_qstat_full(sample("qstat_full.txt"), ids)
    table = parse_qstat_table(sample("qstat_table.txt"), ids)
    assert {i: s.state for i, s in table.items()} == {i: s.state for i, s in full.items()}
    assert all(s.nodes is None for s in table.values())


def test_parsers_keep_only_wanted_ids():
    ok, fail = list(captured_ids().values())[:2]
    assert list(parse_qstat_full(sample("qstat_full.txt"), [fail, "424242"])) == [fail]
    assert list(parse_qstat_table(sample("qstat_table.txt"), [ok])) == [ok]
    assert parse_qstat_full("", [ok]) == {}


def test_unknown_ids_print_nothing_with_rc_153():
    assert sample("qstat_unknown.txt") == "" and rc("qstat_unknown") == 153
    assert rc("qstat_some_unknown") == 0  # the wrapper: the known job, rc 0


# -- qstat, PBS Pro and Torque layouts (written from the documentation) ----------------


def test_parse_pro_json_mixed():
    ids = [f"10{n:02d}.pbs01" for n in range(1, 11)]
    got = parse_qstat_json(sample("qstat_pro_mixed.json"), ids)
    assert set(got) == set(ids)  # the other user's 1099 is not asked for
    queued, held, waiting, running, exiting, ok, fail, deleted, walltime, never = (
        got[i] for i in ids
    )
    assert queued.state is S.QUEUED
    assert queued.reason == (
        "Not Running: Insufficient amount of resource: ncpus (R: 64 A: 32 T: 64)"
    )
    assert (held.state, held.reason) == (S.QUEUED, "Job held by alice on Sun Nov 29 10:16:02 2026")
    assert (waiting.state, waiting.reason) == (S.QUEUED, WAITING_REASONS["W"])
    assert (running.state, running.nodes, running.reason) == (S.RUNNING, "node017,node018", None)
    assert (exiting.state, exiting.exit_code) == (S.RUNNING, None)  # E: not over yet
    assert (ok.state, ok.exit_code, ok.reason, ok.native_state) == (S.COMPLETED, 0, None, "F")
    assert (fail.state, fail.exit_code, fail.reason) == (S.FAILED, 3, NON_ZERO)
    assert (deleted.state, deleted.exit_code) == (S.FAILED, 143)  # 271 = 256 + SIGTERM
    assert "signal 15" in deleted.reason
    assert (walltime.state, walltime.exit_code) == (S.TIMEOUT, -29)
    assert walltime.reason == PRO_EXEC_CODES[-29]
    assert never.reason.startswith("Can Never Run:")


def test_parse_pro_json_matches_ids_by_number():
    """qsub may print 1006.pbs01 while qstat says 1006.pbs01.example.org, or the id was
    stored bare; the sequence number ties them together."""
    text = sample("qstat_pro_mixed.json").replace('"1006.pbs01"', '"1006.pbs01.example.org"')
    assert parse_qstat_json(text, ["1006.pbs01"])["1006.pbs01"].state is S.COMPLETED
    assert parse_qstat_json(text, ["1006"])["1006"].exit_code == 0


def test_parse_pro_json_rejects_garbage():
    assert parse_qstat_json("", ["1"]) == {}
    assert parse_qstat_json('{"timestamp": 1}', ["1"]) == {}  # no Jobs: none known
    with pytest.raises(SchedulerCommandError, match="invalid JSON"):
        parse_qstat_json('{"Jobs": {"1.s": {"job_state": "R",', ["1.s"])


def test_parse_pro_text_with_wrapped_lines():
    ids = ["2001.pbs01", "2002.pbs01", "2003.pbs01"]
    got = parse_qstat_full(sample("qstat_pro_full.txt"), ids, "pro")
    assert set(got) == set(ids)
    queued = got["2001.pbs01"]
    assert queued.reason == (
        "Not Running: Insufficient amount of resource: ncpus (R: 64 A: 32 T: 64)"
    )
    assert got["2002.pbs01"].nodes == "node017,node018"
    assert (got["2003.pbs01"].state, got["2003.pbs01"].exit_code) == (S.FAILED, 3)


def test_parse_real_torque_text():
    ids = [f"300{n}.torque01.example.org" for n in range(1, 5)]
    got = parse_qstat_full(sample("qstat_torque_full.txt"), ids, "torque")
    ok, walltime, deleted, queued = (got[i] for i in ids)
    assert (ok.state, ok.exit_code, ok.nodes) == (S.COMPLETED, 0, "node01,node02")
    assert (walltime.state, walltime.exit_code) == (S.TIMEOUT, -11)
    assert walltime.reason == TORQUE_EXEC_CODES[-11]
    assert (deleted.state, deleted.exit_code) == (S.FAILED, 143)
    assert queued.reason.startswith("job violates class configuration 'procs too high")


def test_hosts():
    assert hosts("n1/2") == "n1"
    assert hosts("node01/0-1+node02/0-1") == "node01,node02"
    assert hosts("node017/0*32+node017/1*32") == "node017"
    assert hosts("--") is None and hosts(None) is None and hosts("") is None


# -- qsub ---------------------------------------------------------------------------


def test_parse_qsub_id():
    assert parse_qsub_id(sample("qsub_id.txt")) == sample("qsub_id.txt").strip()
    assert parse_qsub_id("1234.pbs01\n") == "1234.pbs01"
    assert parse_qsub_id("qsub: waiting for job 7.torque01.example.org to start\n"
                         "7.torque01.example.org\n") == "7.torque01.example.org"  # fmt: skip
    assert parse_qsub_id("55[].pbs01\n") == "55[].pbs01"
    for bad in ("", "\n", "Job submitted\n", "12 34\n"):
        with pytest.raises(SubmitError, match="no job id") as info:
            parse_qsub_id(bad)
        assert info.value.transient is False


def test_the_wrappers_framing_is_dropped_from_the_message():
    """SLURM's qsub wrapper prints sbatch's message, framed and quoted, on stdout."""
    result = CommandResult(
        ("qsub",), rc("qsub_invalid_queue"), sample("qsub_invalid_queue.txt"), "", 0.0
    )
    error = PbsBackend(ScriptedRunner({})).classify_submit_error(result)
    assert error.message == (
        "qsub rejected the allocation: invalid partition specified: nosuch; "
        "Batch job submission failed: Invalid partition name specified"
    )


# -- the tables ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("letter", "ours"),
    [("Q", S.QUEUED), ("H", S.QUEUED), ("W", S.QUEUED), ("T", S.QUEUED), ("M", S.QUEUED),
     ("R", S.RUNNING), ("E", S.RUNNING), ("B", S.RUNNING), ("S", S.RUNNING), ("U", S.RUNNING),
     ("r", S.RUNNING), ("Z", S.UNKNOWN)],
)  # fmt: skip
def test_state_table(letter, ours):
    assert to_state(letter) is ours


def test_final_letters_are_not_in_the_live_table():
    assert FINAL_LETTERS.isdisjoint(STATE_MAP)
    assert all(not state.final for state in STATE_MAP.values())


@pytest.mark.parametrize(
    ("flavor", "raw", "state", "code"),
    [
        ("pro", None, S.COMPLETED, None),
        ("pro", 0, S.COMPLETED, 0),
        ("pro", 3, S.FAILED, 3),
        ("pro", 137, S.FAILED, 137),
        ("pro", 265, S.FAILED, 137),  # 256 + SIGKILL
        ("pro", -29, S.TIMEOUT, -29),
        ("pro", -27, S.FAILED, -27),
        ("pro", -11, S.FAILED, -11),  # PBS Pro: requeued, not walltime
        ("pro", -99, S.FAILED, -99),
        ("torque", -11, S.TIMEOUT, -11),
        ("torque", -29, S.FAILED, -29),
        ("torque", 271, S.FAILED, 143),
    ],
)
def test_final_outcome(flavor, raw, state, code):
    got_state, got_code, reason = final_outcome(raw, flavor)
    assert (got_state, got_code) == (state, code)
    assert (reason is None) == (raw == 0)


def test_exit_code_tables_explain_themselves():
    assert final_outcome(-27, "pro")[2] == PRO_EXEC_CODES[-27]
    assert "exit status -99" in final_outcome(-99, "torque")[2]
    assert "signal 9" in final_outcome(137, "pro")[2]
    tables = [*PRO_EXEC_CODES.values(), *TORQUE_EXEC_CODES.values()]
    assert all(text.endswith(".") for text in tables)


# -- the backend's paths, with a scripted runner ---------------------------------------


def test_torque_poll_is_one_qstat_f_call():
    ids = list(captured_ids().values())
    runner = ScriptedRunner({"qstat": [(0, sample("qstat_full.txt"), ""),
                                       (rc("qstat_unknown"), "", "")]})  # fmt: skip
    backend = PbsBackend(runner, flavor="torque")
    assert len(backend.poll([*ids, ids[0]])) == len(ids)
    assert runner.argvs[0] == ("qstat", "-f", *ids)  # each id once
    assert backend.poll(["999999"]) == {}  # rc 153, nothing printed: none known
    assert runner.calls["qstat"] == 2
    assert backend.poll([]) == {} and runner.calls["qstat"] == 2


def test_torque_table_poll():
    ids = list(captured_ids().values())
    runner = ScriptedRunner({"qstat": [(0, sample("qstat_table.txt"), "")]})
    backend = PbsBackend(runner, flavor="torque", qstat_full=False)
    assert len(backend.poll(ids)) == len(ids)
    assert runner.argvs == [("qstat", *ids)]


def test_pro_poll_is_one_json_call_and_tolerates_unknown_ids():
    runner = ScriptedRunner({"qstat": [
        (rc("qstat_pro_some_unknown"), sample("qstat_pro_some_unknown.json"),
         sample("qstat_pro_some_unknown.stderr")),
        (rc("qstat_pro_full"), sample("qstat_pro_full.txt"), sample("qstat_pro_full.stderr")),
    ]})  # fmt: skip
    backend = PbsBackend(runner, flavor="pro")
    got = backend.poll(["1006.pbs01", "1100.pbs01"])
    assert list(got) == ["1006.pbs01"] and got["1006.pbs01"].state is S.COMPLETED
    assert runner.argvs[0] == ("qstat", "-f", "-F", "json", "-x", "1006.pbs01", "1100.pbs01")
    # The text parser copes with the same partial answer.
    runner2 = ScriptedRunner({"qstat": [runner.answers["qstat"].pop(0)]})
    torque_style = PbsBackend(runner2, flavor="torque")
    got = torque_style.poll(["2001.pbs01", "2004.pbs01"])
    assert list(got) == ["2001.pbs01"]


def test_pro_poll_falls_back_to_text_when_qstat_refuses_json(caplog):
    """A Torque qstat (here: the SLURM wrapper, captured) refuses -F json; the backend
    says so once and reads the text format from then on."""
    ids = list(captured_ids().values())
    runner = ScriptedRunner({"qstat": [
        (rc("qstat_json_refused"), "", sample("qstat_json_refused.txt")),
        (0, sample("qstat_full.txt"), ""),
        (0, sample("qstat_full.txt"), ""),
    ]})  # fmt: skip
    backend = PbsBackend(runner, flavor="pro")
    assert len(backend.poll(ids)) == len(ids)
    assert backend.json_status is False and backend.text_flavor == "torque"
    assert "does not answer in JSON" in caplog.text
    assert len(backend.poll(ids)) == len(ids)
    assert [argv[1:3] for argv in runner.argvs] == [("-f", "-F"), ("-f", ids[0]), ("-f", ids[0])]


def test_submit_passes_output_paths_on_the_command_line(tmp_path):
    """SLURM's qsub wrapper reads them there only; a real PBS lets them win there."""
    req = request(run_dir=tmp_path, stdout=tmp_path / "a.out", stderr=tmp_path / "a.err")
    runner = ScriptedRunner({"qsub": [(0, "1234.pbs01\n", "")]})
    script = tmp_path / "1.sh"
    assert PbsBackend(runner, flavor="pro").submit(script, req) == "1234.pbs01"
    assert runner.argvs[0] == ("qsub", "-o", str(tmp_path / "a.out"), "-e",
                               str(tmp_path / "a.err"), str(script))  # fmt: skip


def test_json_sample_is_valid_and_self_consistent():
    data = json.loads(sample("qstat_pro_mixed.json"))
    assert set(data) == {"timestamp", "pbs_version", "pbs_server", "Jobs"}
    assert all("job_state" in job for job in data["Jobs"].values())
