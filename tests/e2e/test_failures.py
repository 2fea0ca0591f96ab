"""Failures: exit codes, skipped dependents, quarantined outputs, retries, timeouts."""

from __future__ import annotations

import json
import time

from tests.conftest import left_with, write_workflow


def test_failure_report_and_skipped_dependents(tmp_path, hpcflow):
    wf = write_workflow(
        tmp_path,
        """
name: fails
tasks:
  - name: ok
    command: echo fine > ok.txt
    outputs: [ok.txt]
  - name: bad
    needs: [ok]
    command: echo partial > half.txt; echo "something broke" >&2; exit 3
    outputs: [half.txt]
  - name: after
    needs: [bad]
    command: echo never > never.txt
    outputs: [never.txt]
""",
    )
    result = hpcflow("run", str(wf))
    assert result.returncode == 1
    out = result.stdout
    assert "bad" in out and "exit 3" in out
    assert "something broke" in out  # the tail of stderr
    assert "/tasks/bad/1.err" in out  # the log path
    assert not (tmp_path / "never.txt").exists()
    # The half-written output is not left where a later run could trust it.
    assert not (tmp_path / "half.txt").exists()
    quarantined = list((tmp_path / ".hpcflow" / "runs").glob("*/quarantine/bad/1/half.txt"))
    assert len(quarantined) == 1 and quarantined[0].read_text() == "partial\n"
    status = json.loads(hpcflow("status", "--json").stdout)
    assert status["status"] == "failed"
    assert status["counts"]["after"] == {"skipped": 1}
    assert status["failed"][0]["exit_code"] == 3


def test_missing_output_fails_the_task(tmp_path, hpcflow):
    wf = write_workflow(
        tmp_path,
        """
name: missing
tasks:
  - name: lazy
    command: "true"
    outputs: [promised.txt]
""",
    )
    result = hpcflow("run", str(wf))
    assert result.returncode == 1
    assert "did not create" in result.stdout and "promised.txt" in result.stdout


def test_retry_with_backoff_then_success(tmp_path, hpcflow):
    wf = write_workflow(
        tmp_path,
        """
name: flaky
tasks:
  - name: flaky
    retries: {attempts: 2, backoff: 0.2}
    command: |
      n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count
      [ "$n" -ge 1 ] && echo done > out.txt
    outputs: [out.txt]
""",
    )
    result = hpcflow("run", str(wf), "-q")
    assert result.returncode == 0, result.output
    assert (tmp_path / "count").read_text().strip() == "2"
    logs = hpcflow("logs", "latest-does-not-exist")
    assert logs.returncode == 2 and "no run" in logs.stderr
    status = json.loads(hpcflow("status", "--json").stdout)
    assert status["counts"]["flaky"] == {"succeeded": 1}


def test_timeout_kills_the_whole_process_group(tmp_path, hpcflow):
    marker = f"hpcflow-timeout-{time.time_ns()}"
    wf = write_workflow(
        tmp_path,
        f"""
name: slow
tasks:
  - name: slow
    timeout: 1s
    command: (sleep 60; echo {marker}) & sleep 60; echo {marker}
""",
    )
    started = time.monotonic()
    result = hpcflow("run", str(wf))
    assert time.monotonic() - started < 30
    assert result.returncode == 1
    assert "timed out after 1s" in result.stdout
    assert left_with(marker) == []


def test_task_too_big_is_rejected_before_anything_runs(tmp_path, hpcflow):
    wf = write_workflow(
        tmp_path,
        """
name: big
tasks:
  - name: small
    command: echo hi > small.txt
    outputs: [small.txt]
  - name: huge
    resources: {cpus: 512}
    command: "true"
""",
    )
    result = hpcflow("run", str(wf))
    assert result.returncode == 2
    assert "asks for 512 cpus" in result.stderr
    assert "Traceback" not in result.output
    assert not (tmp_path / "small.txt").exists()


def test_a_two_cpu_task_takes_two_slots(tmp_path, hpcflow):
    wf = write_workflow(
        tmp_path,
        """
name: wide
tasks:
  - name: wide
    foreach: {i: [1, 2, 3]}
    resources: {cpus: 2}
    command: date +%s.%N > start-{i}; sleep 0.4; date +%s.%N > end-{i}
""",
    )
    result = hpcflow("run", str(wf), "--threads", "2", "-q")
    assert result.returncode == 0, result.output
    spans = sorted(
        (float((tmp_path / f"start-{i}").read_text()), float((tmp_path / f"end-{i}").read_text()))
        for i in (1, 2, 3)
    )
    # With 2 slots, tasks that each need 2 never overlap.
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start >= end, spans


def test_logs_of_an_earlier_attempt(tmp_path, hpcflow):
    wf = write_workflow(
        tmp_path,
        """
name: twice
tasks:
  - name: twice
    retries: {attempts: 1, backoff: 0.1}
    command: if [ -e seen ]; then echo second; else touch seen; echo first; exit 1; fi
""",
    )
    assert hpcflow("run", str(wf), "-q").returncode == 0
    run_id = json.loads(hpcflow("status", "--json").stdout)["run_id"]
    first = hpcflow("logs", run_id, "twice", "--attempt", "1", "--stream", "stdout")
    latest = hpcflow("logs", run_id, "twice", "--stream", "stdout")
    assert (first.stdout, latest.stdout) == ("first\n", "second\n")
