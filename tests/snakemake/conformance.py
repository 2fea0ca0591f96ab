"""Snakemake's own test suite, run with the local executor and with ``--executor hpcflow``.

Snakemake's sdist ships its tests (``tests/tests.py`` and ``tests/common.py``). This
harness fetches the sdist of the *installed* Snakemake version (``pip download
--no-deps --no-binary :all:``, cached per version), selects the qualifying tests (see
:func:`qualifying_tests`), runs them twice in one invocation, once as they are and once
with the executor swapped to hpcflow in their ``run()`` helper
(:mod:`tests.snakemake.conformance_swap`), and reports every test as one of:

``passed both``, ``failed both``, ``only-hpcflow-fails``, ``only-local-fails``, or
``needs-what-machine-lacks`` (skipped, or failing on both sides for a tool, module or
network this machine does not have).

Run it as a script::

    .venv/bin/python tests/snakemake/conformance.py              # every qualifying test
    .venv/bin/python tests/snakemake/conformance.py -k test_threads --json out.json
    .venv/bin/python tests/snakemake/conformance.py --tests test_threads test_temp
    .venv/bin/python tests/snakemake/conformance.py --mode pilot --every 3

``--mode pilot`` starts the project's test SLURM cluster (:mod:`tests.slurm_cluster`) and
sends every hpcflow run to one pilot allocation of the ``slurm-test`` profile; both sides
then run in a folder on the cluster's shared file system (``TMPDIR``), where the nodes
see the tests' files.

``tests/snakemake/test_conformance.py`` runs a fixed subset of it under pytest.
"""

from __future__ import annotations

import argparse
import ast
import json
import logging
import os
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

log = logging.getLogger("conformance")

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

#: ``run()`` arguments that send a test somewhere this comparison is not about: another
#: executor, a cluster, software deployment, or remote storage.
EXCLUDED_KWARGS = frozenset(
    {
        "executor",
        "executor_settings",
        "cluster",
        "cluster_status",
        "deployment_method",
        "conda_frontend",
        "conda_prefix",
        "conda_create_envs",
        "conda_list_envs",
        "container_image",
        "apptainer_args",
        "default_storage_provider",
        "default_storage_prefix",
        "storage_provider_settings",
        "remote_job_local_storage_prefix",
        "shared_fs_usage",
    }
)
#: The same, for tests that run a ``shellcmd``: words that name them on a command line.
EXCLUDED_WORDS = (
    "--executor",
    "--cluster",
    "--conda",
    "--use-conda",
    "--sdm",
    "--software-deployment-method",
    "--use-apptainer",
    "--use-singularity",
    "apptainer",
    "--storage",
    "--default-storage",
    "--containerize",
    "--deployment",
)
#: Words in a failure's text that mean the machine lacks something, not the executor.
LACKS = (
    "command not found",
    "No module named",
    "ModuleNotFoundError",
    "Name or service not known",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "ConnectionError",
    "not installed",
    "No such file or directory: 'conda'",
    "needs_envmodules",
    "InvalidPluginException",
)


# -- the sdist ------------------------------------------------------------------------------


def installed_version() -> str:
    """The version of the Snakemake this interpreter imports."""
    import snakemake

    return str(snakemake.__version__)


def default_cache() -> Path:
    """Where sdists are kept: ``$HPCFLOW_SNAKEMAKE_SDIST_CACHE``, else ~/.cache/hpcflow."""
    env = os.environ.get("HPCFLOW_SNAKEMAKE_SDIST_CACHE")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "hpcflow" / "snakemake-sdist"


class SdistUnavailable(RuntimeError):
    """Snakemake's sdist (and so its tests) could not be had."""


def sdist_tests(version: str | None = None, cache: Path | None = None) -> Path:
    """The root of Snakemake's unpacked sdist for ``version`` (default: the installed
    one), downloaded with pip into ``cache/VERSION`` on first use. The root holds
    ``tests/tests.py`` and ``tests/common.py``."""
    version = version or installed_version()
    where = (cache or default_cache()) / version
    root = where / f"snakemake-{version}"
    if (root / "tests" / "tests.py").is_file() and (root / "tests" / "common.py").is_file():
        return root
    where.mkdir(parents=True, exist_ok=True)
    archive = where / f"snakemake-{version}.tar.gz"
    if not archive.is_file():
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"snakemake=={version}",
            "-d",
            str(where),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0 or not archive.is_file():
            raise SdistUnavailable(
                f"could not download Snakemake {version}'s sdist ({' '.join(cmd)}): "
                f"{proc.stderr.strip()[-2000:]}"
            )
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(f"snakemake-{version}/")]
        tar.extractall(where, members=members, filter="data")
    if not (root / "tests" / "tests.py").is_file():
        raise SdistUnavailable(f"Snakemake {version}'s sdist has no tests/tests.py ({archive})")
    return root


# -- which tests ----------------------------------------------------------------------------


def qualifying_tests(tests_py: Path) -> list[str]:
    """The module-level ``test_*`` functions of ``tests_py`` that call ``run()`` and never
    with an executor, cluster, conda, container, deployment or storage argument (nor a
    ``shellcmd`` naming one), in file order."""
    tree = ast.parse(tests_py.read_text())
    chosen: list[str] = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test"):
            continue
        calls = [
            call
            for call in ast.walk(node)
            if isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "run"
        ]
        if calls and all(_plain_run(call) for call in calls) and not _tool_marks(node):
            chosen.append(node.name)
    return chosen


def _plain_run(call: ast.Call) -> bool:
    for keyword in call.keywords:
        if keyword.arg in EXCLUDED_KWARGS or keyword.arg is None:
            return False
        if keyword.arg == "shellcmd":
            text = ast.unparse(keyword.value)
            if any(word in text for word in EXCLUDED_WORDS):
                return False
    return True


def _tool_marks(node: ast.FunctionDef) -> bool:
    """Decorated as needing conda or a container (Snakemake's own markers)."""
    marks = " ".join(ast.unparse(d) for d in node.decorator_list)
    return any(word in marks for word in ("conda", "apptainer", "singularity", "container"))


# -- running one side -----------------------------------------------------------------------


@dataclass
class Outcome:
    """One test's result on one side."""

    state: str  # passed, failed, skipped
    seconds: float
    text: str = ""  # the failure's message (short)
    logs: str = ""  # what the test printed and logged (to tell what the machine lacks)


def run_side(
    executor: str,
    root: Path,
    tests: Sequence[str],
    workdir: Path,
    *,
    jobs: int = 3,
    timeout: float = 3600,
    extra: Sequence[str] = (),
    env_extra: dict[str, str] | None = None,
) -> dict[str, Outcome]:
    """Run ``tests`` (function names, or ``-k`` style node ids) of Snakemake's suite at
    ``root`` with ``executor`` ("local": as they are; "hpcflow": swapped), one pytest
    process; returns the outcome per test id (parametrized tests: one per parameter)."""
    workdir.mkdir(parents=True, exist_ok=True)
    xml = workdir / f"{executor}.xml"
    xml.unlink(missing_ok=True)
    env = dict(os.environ)
    env["HPCFLOW_CONFORMANCE_EXECUTOR"] = executor
    env["HPCFLOW_CONFORMANCE_JOBS"] = str(jobs)
    env["PYTHONPATH"] = str(HERE / "swap")
    # The hundreds of hpcflow runs are listed in an index of their own, not the user's.
    env["HPCFLOW_HOME"] = str(workdir / "hpcflow-home")
    for name in ("HPCFLOW_PROFILE", "SNAKEMAKE_PROFILE", "SNAKEMAKE_OUTPUT_CACHE"):
        env.pop(name, None)
    env.update(env_extra or {})
    ids = [f"tests/tests.py::{name}" for name in tests]
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "conformance_swap",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-q",
        "-o",
        "addopts=",
        "-o",
        "junit_logging=all",
        f"--junitxml={xml}",
        f"--basetemp={workdir / (executor + '-tmp')}",
        *extra,
        *ids,
    ]
    log.info("%s: %d tests", executor, len(ids))
    out = workdir / f"{executor}.log"
    with out.open("w") as handle:
        try:
            subprocess.run(
                cmd, cwd=root, env=env, stdout=handle, stderr=subprocess.STDOUT, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            handle.write(f"\n[conformance] {executor}: stopped after {timeout} s\n")
    return read_junit(xml) if xml.is_file() else {}


def read_junit(xml: Path) -> dict[str, Outcome]:
    """Per test id, its outcome in a pytest JUnit XML file."""
    results: dict[str, Outcome] = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = case.get("name", "")
        seconds = float(case.get("time") or 0.0)
        state, text = "passed", ""
        logs = "\n".join(
            child.text or "" for child in case if child.tag in ("system-out", "system-err")
        )
        for child in case:
            if child.tag in ("failure", "error"):
                state = "failed"
                text = (child.get("message") or "") + "\n" + (child.text or "")
                break
            if child.tag == "skipped":
                state, text = "skipped", child.get("message") or ""
        if state == "failed" and name in results and results[name].state == "passed":
            results[name].state, results[name].text = state, text  # teardown error
            continue
        results[name] = Outcome(state, seconds, text, logs[-20000:])
    return results


# -- comparing ------------------------------------------------------------------------------

VERDICTS = (
    "passed both",
    "failed both",
    "only-hpcflow-fails",
    "only-local-fails",
    "needs-what-machine-lacks",
)


@dataclass
class Report:
    """The comparison of both sides, per test."""

    version: str
    selected: list[str]
    local: dict[str, Outcome]
    hpcflow: dict[str, Outcome]
    verdicts: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        found = Counter(self.verdicts.values())
        return {verdict: found.get(verdict, 0) for verdict in VERDICTS}

    def only(self, verdict: str) -> list[str]:
        return sorted(name for name, got in self.verdicts.items() if got == verdict)

    def summary(self) -> str:
        lines = [
            f"Snakemake {self.version}: {len(self.selected)} qualifying test functions, "
            f"{len(self.verdicts)} test ids"
        ]
        for side in ("local", "hpcflow"):
            got = Counter(o.state for o in getattr(self, side).values())
            lines.append(
                f"  {side:8} passed {got.get('passed', 0)}, failed {got.get('failed', 0)}, "
                f"skipped {got.get('skipped', 0)}; {self.seconds.get(side, 0.0):.0f} s"
            )
        if self.seconds.get("local"):
            ratio = self.seconds.get("hpcflow", 0.0) / self.seconds["local"]
            lines.append(f"  time ratio hpcflow/local: {ratio:.2f}")
        for verdict, count in self.counts().items():
            lines.append(f"  {verdict}: {count}")
        for verdict in ("only-hpcflow-fails", "only-local-fails", "failed both"):
            for name in self.only(verdict):
                first = _first_line(self.hpcflow.get(name) or self.local.get(name))
                lines.append(f"    {verdict}: {name}: {first}")
        return "\n".join(lines)


def _first_line(outcome: Outcome | None) -> str:
    if outcome is None:
        return "not run"
    for line in outcome.text.splitlines():
        if line.strip():
            return line.strip()[:200]
    return outcome.state


def verdict(local: Outcome | None, hpcflow: Outcome | None) -> str:
    """How one test compares across the two sides."""
    if local is None or local.state == "skipped" or (hpcflow and hpcflow.state == "skipped"):
        return "needs-what-machine-lacks"
    if hpcflow is None:
        return "only-hpcflow-fails"  # hpcflow's side never reported it (it hung or crashed)
    if local.state == "passed":
        return "passed both" if hpcflow.state == "passed" else "only-hpcflow-fails"
    if hpcflow.state == "passed":
        return "only-local-fails"
    if any(word in local.text or word in local.logs for word in LACKS):
        return "needs-what-machine-lacks"
    return "failed both"


def compare(
    tests: Sequence[str] | None = None,
    *,
    keyword: str | None = None,
    workdir: Path,
    version: str | None = None,
    cache: Path | None = None,
    jobs: int = 3,
    timeout: float = 3600,
    sides: Iterable[str] = ("local", "hpcflow"),
    env_extra: dict[str, str] | None = None,
) -> Report:
    """Fetch the sdist, select the tests (``tests`` if given, each must qualify; else every
    qualifying one, narrowed by ``keyword``), run both sides and compare them."""
    version = version or installed_version()
    root = sdist_tests(version, cache)
    qualifying = qualifying_tests(root / "tests" / "tests.py")
    if tests:
        missing = [name for name in tests if name not in qualifying]
        if missing:
            raise ValueError(f"not qualifying tests of Snakemake {version}: {missing}")
        selected = list(tests)
    else:
        selected = [name for name in qualifying if not keyword or keyword in name]
    report = Report(version=version, selected=selected, local={}, hpcflow={})
    for side in sides:
        start = time.monotonic()
        outcomes = run_side(
            side, root, selected, workdir, jobs=jobs, timeout=timeout, env_extra=env_extra
        )
        report.seconds[side] = time.monotonic() - start
        setattr(report, side, outcomes)
    for name in sorted(set(report.local) | set(report.hpcflow)):
        report.verdicts[name] = verdict(report.local.get(name), report.hpcflow.get(name))
    for name in selected:  # a test that never reported on either side
        if not any(key == name or key.startswith(name + "[") for key in report.verdicts):
            report.verdicts[name] = "only-hpcflow-fails"
    return report


def sample(every: int, version: str | None = None, cache: Path | None = None) -> list[str]:
    """The CI subset (``test_conformance.py``) and every ``every``-th qualifying test."""
    if str(REPO) not in sys.path:  # run as a script
        sys.path.insert(0, str(REPO))
    from tests.snakemake.test_conformance import FIXED, SAMPLE, UPSTREAM_DIFFERENCES

    root = sdist_tests(version, cache)
    qualifying = qualifying_tests(root / "tests" / "tests.py")
    chosen = [*FIXED, *UPSTREAM_DIFFERENCES, *SAMPLE, *qualifying[every - 1 :: every]]
    return list(dict.fromkeys(chosen))


def start_pilot_cluster() -> object:
    """The project's test SLURM cluster: 3 nodes of 8 CPUs (declared: SLURM hands them out
    whatever the machine has), on a GlusterFS volume. A job that asks for more CPUs than
    a node has is refused in pilot mode, as it should be."""
    if str(REPO) not in sys.path:  # run as a script
        sys.path.insert(0, str(REPO))
    from tests.slurm_cluster import start_cluster

    return start_cluster(nodes=3, cpus=8)


#: The pilot profile of the harness: the shipped ``slurm-test`` with nodes of 8 CPUs (the
#: cluster's), so that jobs the local executor runs with up to 8 threads fit.
PILOT_PROFILE = "conformance-pilot"


def pilot_env(cluster: object, workdir: Path) -> dict[str, str]:
    """Both sides' environment in pilot mode: the cluster's client settings, the plugin's
    mode and profile, and temporary folders on the shared file system."""
    tmp = workdir / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    profiles = workdir / "profiles"
    profiles.mkdir(exist_ok=True)
    shipped = REPO / "hpcflow" / "settings" / "profiles" / "slurm-test.yaml"
    text = shipped.read_text().replace("cpus_per_node: 2\n", "cpus_per_node: 8\n")
    (profiles / f"{PILOT_PROFILE}.yaml").write_text(text)
    return {
        **cluster.extra_env,  # type: ignore[attr-defined]
        "HPCFLOW_CONFORMANCE_MODE": "pilot",
        "HPCFLOW_CONFORMANCE_PROFILE": PILOT_PROFILE,
        "HPCFLOW_PROFILE_PATH": str(profiles),
        "TMPDIR": str(tmp),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", nargs="*", help="these test functions only")
    parser.add_argument("-k", dest="keyword", help="qualifying tests whose name has this")
    parser.add_argument(
        "--every",
        type=int,
        help="the CI subset (tests/snakemake/test_conformance.py) and every Nth qualifying test",
    )
    parser.add_argument("--version", help="Snakemake version (default: the installed one)")
    parser.add_argument("--cache", type=Path, help="sdist cache (default ~/.cache/hpcflow)")
    parser.add_argument("--workdir", type=Path, default=Path("conformance-out"))
    parser.add_argument("--jobs", type=int, default=3, help="--jobs given to hpcflow")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per side")
    parser.add_argument("--json", type=Path, help="write the per-test report here")
    parser.add_argument("--list", action="store_true", help="list the qualifying tests")
    parser.add_argument(
        "--mode",
        choices=("local", "pilot"),
        default="local",
        help="the plugin's mode; pilot: on a test SLURM cluster this starts",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.list:
        root = sdist_tests(args.version, args.cache)
        names = qualifying_tests(root / "tests" / "tests.py")
        print("\n".join(names))
        print(f"{len(names)} qualifying tests", file=sys.stderr)
        return 0
    tests = args.tests
    if args.every:
        tests = sample(args.every, args.version, args.cache)
    cluster = start_pilot_cluster() if args.mode == "pilot" else None
    try:
        workdir = args.workdir.resolve()
        env_extra = None
        if cluster is not None:
            workdir = cluster.mkdtemp(prefix="conformance-")
            env_extra = pilot_env(cluster, workdir)
        report = compare(
            tests,
            keyword=args.keyword,
            workdir=workdir,
            version=args.version,
            cache=args.cache,
            jobs=args.jobs,
            timeout=args.timeout,
            env_extra=env_extra,
        )
    finally:
        if cluster is not None:
            cluster.stop()
    print(f"mode: {args.mode}")
    print(report.summary())
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "version": report.version,
                    "selected": report.selected,
                    "seconds": report.seconds,
                    "counts": report.counts(),
                    "verdicts": report.verdicts,
                    "local": {k: asdict(v) for k, v in report.local.items()},
                    "hpcflow": {k: asdict(v) for k, v in report.hpcflow.items()},
                },
                indent=1,
            )
        )
    return 1 if report.only("only-hpcflow-fails") else 0


if __name__ == "__main__":
    sys.exit(main())
