"""In CI a skipped test is a failed test, unless it names hardware the machine lacks.

A skip that hides a missing test dependency (a package, a tool, a mount) would let a
green CI run prove nothing about that part. Where ``CI=true`` or ``HPCFLOW_NO_SKIPS=1``
(scripts/test.sh sets it as root, where it installs everything), every skip, of a test
or of a whole module (``importorskip``), is reported as a failure with its reason.

The one exception is hardware no CI machine can have: a skip whose reason starts with
``hardware:`` (for example ``hardware: needs a CUDA GPU``) stays a skip.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

#: The reason prefix of the skips that stay skips in CI.
HARDWARE = "hardware:"


def strict() -> bool:
    """Whether skips fail the run (CI, or the full test command as root)."""
    return os.environ.get("CI", "").lower() == "true" or os.environ.get("HPCFLOW_NO_SKIPS") == "1"


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The reason text of a skip report (pytest keeps it in a (path, line, text) tuple)."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        text = str(longrepr[2])
    else:
        text = str(longrepr)
    return text.removeprefix("Skipped: ").strip()


def fail_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    """Turn a skip report into a failure that says what is missing, unless it is hardware."""
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = skip_reason(report)
    if reason.startswith(HARDWARE):
        return
    report.outcome = "failed"
    report.longrepr = (
        f"skipped where every test dependency must be installed (CI=true or "
        f"HPCFLOW_NO_SKIPS=1): {reason}\nInstall it (bash scripts/test.sh does), or give "
        f"the reason the prefix {HARDWARE!r} if no CI machine can have it."
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, None]:
    outcome = yield
    if strict():
        fail_skip(outcome.get_result())  # type: ignore[attr-defined]


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, None]:
    outcome = yield
    if strict():
        fail_skip(outcome.get_result())  # type: ignore[attr-defined]
