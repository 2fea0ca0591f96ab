"""`hpcflow report`: one self-contained HTML page, checked as data and in a real browser."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import write_workflow

HOSTILE = "<img src=x onerror=alert(1)>"

WORKFLOW = f"""
name: report-demo
tasks:
  - name: make
    foreach: {{i: {{range: [0, 6]}}}}
    command: echo {{i}} > {{outputs}}
    outputs: ["data/{{i}}.txt"]
  - name: odd
    foreach: {{label: ["{HOSTILE}", plain]}}
    command: echo {{label}}
  - name: combine
    needs: [make]
    command: cat data/*.txt > all.txt
    outputs: [all.txt]
  - name: broken
    needs: [combine]
    command: echo 'something went wrong here' >&2; exit 3
"""


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def report(tmp_path, hpcflow):
    wf = write_workflow(tmp_path, WORKFLOW)
    result = hpcflow("run", str(wf), "-q", cwd=tmp_path)
    assert result.returncode == 1, result.output  # `broken` fails on purpose
    page = tmp_path / "report.html"
    made = hpcflow("report", "-o", str(page), cwd=tmp_path)
    assert made.returncode == 0, made.output
    return page


def test_report_content(report):
    html = report.read_text()
    # Self-contained: no external scripts, styles, fonts or images.
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    dag = html[html.index('<svg id="dag"') : html.index("</svg>", html.index('<svg id="dag"'))]
    assert dag.count('<g class="node">') == 4
    assert dag.count('class="edge"') == 2  # make → combine → broken
    timeline = html[html.index('<svg id="timeline"') :]
    assert timeline.count('class="bar"') >= 10  # 6 + 2 + 1 + 1 attempts
    # Failures come with the end of their stderr.
    assert "something went wrong here" in html and "exit 3" in html
    # Run-supplied text is escaped, never markup.
    assert HOSTILE not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "report-demo" in html


@pytest.mark.skipif(
    _chromium() is None
    and not os.environ.get("CI")
    and not os.environ.get("HPCFLOW_REQUIRE_SLURM"),
    reason="needs Debian's chromium for a headless render (scripts/test.sh installs it)",
)
def test_report_renders_in_headless_chromium(report, tmp_path):
    browser = _chromium()
    assert browser, "chromium is required in CI (scripts/test.sh installs it)"
    profile_dir = tmp_path / "chromium-profile"
    base = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        f"--user-data-dir={profile_dir}", "--enable-logging=stderr", "--v=0",
        "--window-size=1400,1100",
    ]  # fmt: skip
    dom = subprocess.run(
        [*base, "--dump-dom", report.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-ready="yes"' in dom.stdout  # the page's script ran to its end
    opening = re.search(r"<html[^>]*>", dom.stdout)
    assert opening and "data-js-error" not in opening.group(0), opening
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line]
    assert not [line for line in console if "Uncaught" in line or "Error" in line], console
    assert 'id="dag"' in dom.stdout and 'id="timeline"' in dom.stdout
    shot = tmp_path / "report.png"
    subprocess.run(
        [*base, f"--screenshot={shot}", report.as_uri()], capture_output=True, timeout=120
    )
    assert shot.exists() and shot.stat().st_size > 10_000
    target = os.environ.get("HPCFLOW_REPORT_SCREENSHOT")
    if target:  # how docs/report.png is refreshed
        shutil.copyfile(shot, Path(target))
