"""Property test: whatever a profile file or HPCFLOW_* variable holds, resolving it either
succeeds or raises a ProfileError with a message -- never anything else (fault scenario 8).

A profile that resolves is then rendered into a batch script for every backend, and every
value that reaches the script stays data: the script parses as bash and never runs
anything a value carried.
"""

from __future__ import annotations

import os
import string
import subprocess
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcflow.backends.base import AllocationRequest
from hpcflow.backends.registry import get_backend
from hpcflow.errors import ProfileError
from hpcflow.settings import resolve_profile
from hpcflow.settings.profile import Profile

SCALE = max(1, int(os.environ.get("HPCFLOW_FUZZ_SCALE", "1")))
FUZZ = settings(
    max_examples=60 * SCALE,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
FIELDS = sorted(Profile.model_fields)
HOSTILE = ["a b", "it's", 'say "hi"', "x; touch CANARY", "$(touch CANARY)", "`touch CANARY`",
           "../../etc", "/abs/path", "new\nline", "tab\there", "#SBATCH --x", "%j %x"]  # fmt: skip

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(HOSTILE),
    st.text(string.printable, max_size=20),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
profile_docs = st.dictionaries(
    st.one_of(st.sampled_from(FIELDS), st.text(max_size=10)), values, max_size=6
)


def _resolve(path: Path, environ: dict[str, str] | None = None) -> Profile | None:
    try:
        return resolve_profile(str(path), environ=environ or {}).profile
    except ProfileError as err:
        assert str(err).strip(), "a ProfileError must say what is wrong"
        return None


@FUZZ
@given(doc=profile_docs)
def test_any_profile_document_resolves_or_says_why(tmp_path_factory, doc: dict[str, Any]):
    path = tmp_path_factory.mktemp("p") / "site.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    _resolve(path)


@FUZZ
@given(text=st.text(max_size=200))
def test_any_text_resolves_or_says_why(tmp_path_factory, text: str):
    path = tmp_path_factory.mktemp("p") / "site.yaml"
    path.write_text(text)
    _resolve(path)


@FUZZ
@given(
    field=st.sampled_from(FIELDS), text=st.one_of(st.sampled_from(HOSTILE), st.text(max_size=30))
)
def test_any_environment_value_resolves_or_says_why(tmp_path_factory, field: str, text: str):
    path = tmp_path_factory.mktemp("p") / "site.yaml"
    path.write_text("backend: slurm\n")
    if "\0" in text:
        return  # not representable in a real environment
    _resolve(path, {f"HPCFLOW_{field.upper()}": text})


@FUZZ
@given(
    partition=st.sampled_from(HOSTILE),
    account=st.sampled_from(HOSTILE),
    module=st.sampled_from(HOSTILE),
    env_value=st.sampled_from(HOSTILE),
    backend=st.sampled_from(["slurm", "pbs-pro", "pbs-torque"]),
)
def test_hostile_profile_values_stay_data_in_scripts(
    tmp_path_factory, partition, account, module, env_value, backend
):
    work = tmp_path_factory.mktemp("w")
    doc = {"partition": partition, "account": account, "modules": [module],
           "env": {"SITE_VALUE": env_value}}  # fmt: skip
    path = work / "site.yaml"
    path.write_text(yaml.safe_dump(doc))
    profile = _resolve(path)
    if profile is None:
        return  # refused (e.g. a newline in a directive value): nothing is rendered
    name, _, flavor = backend.partition("-")
    request = AllocationRequest(
        run_id="r", job_name="hpcflow-r", run_dir=work, stdout=work / "o", stderr=work / "e",
        command=["true"], partition=profile.partition, account=profile.account,
        setup_lines=profile.module_lines(), env=profile.env,
    )  # fmt: skip
    flavored = profile.model_copy(update={"pbs_flavor": flavor or "pro"})
    try:
        script = get_backend(name, profile=flavored).render(request)
    except ProfileError as err:  # e.g. PBS takes only plain queue/account tokens
        assert str(err).strip()
        return
    assert "\0" not in script
    # Valid bash, and running it (with `module` stubbed) runs nothing a value carried.
    syntax = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    assert syntax.returncode == 0, syntax.stderr
    stub = work / "stub.sh"
    stub.write_text("module() { :; }\n")
    (work / "job.sh").write_text(script)
    subprocess.run(
        ["bash", str(work / "job.sh")], cwd=work, env={**os.environ, "BASH_ENV": str(stub)},
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert not list(work.rglob("CANARY")), script
