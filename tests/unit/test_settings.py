"""Unit tests of hpcflow.settings: the Profile model, layered resolution with the source of
every value, reading settings from the environment, and finding profile files."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from hpcflow.errors import ProfileError
from hpcflow.settings import (
    BUILTIN_DEFAULT,
    Profile,
    ProfileRef,
    default_profile_name,
    environment_layer,
    field_kind,
    find_profile,
    list_profiles,
    load_profile,
    merge_layers,
    override_layer,
    profile_layer,
    resolve_profile,
    workflow_layer,
)
from hpcflow.settings import resolve as resolve_module
from hpcflow.settings.lookup import shipped_profile_dir
from hpcflow.spec.yamlpos import load_yaml

REPO = Path(__file__).resolve().parents[2]
MiB = 1024**2
GiB = 1024**3
SHIPPED = {
    "local",
    "slurm",
    "slurm-gpu",
    "slurm-test",
    "slurm-test-gpu",
    "pbs",
    "torque",
    "pbs-test",
}


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    """A private environment: no user profiles, no HPCFLOW_* from the caller's shell."""
    return {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config")}


def resolve_error(*args, **kwargs) -> str:
    with pytest.raises(ProfileError) as info:
        resolve_profile(*args, **kwargs)
    return str(info.value)


# -- the model ---------------------------------------------------------------------------------


def test_defaults():
    profile = Profile(name="p")
    assert profile.backend == "local" and profile.mode == "pilot"
    assert profile.launcher == "srun" and profile.mpi == "pmix" and profile.transport == "tls"
    assert profile.nodes == 1 and profile.workers_per_node == 1 and profile.gpus_per_node == 0
    assert profile.threads_per_worker is None and profile.cpus_per_node is None
    assert profile.overcommit is True and profile.resubmit is False and profile.max_resubmits == 3
    assert profile.poll_interval == 5 and profile.max_poll_interval == 60
    assert profile.submit_retries == 3
    assert profile.modules == [] and profile.setup == [] and profile.env == {}
    assert profile.python_executable() == sys.executable


def test_profile_is_frozen_and_strict():
    profile = Profile(name="p")
    with pytest.raises(Exception, match="frozen"):
        profile.nodes = 2  # type: ignore[misc]
    with pytest.raises(Exception, match="Extra inputs"):
        Profile(name="p", nodez=2)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        (30, 30),
        ("90s", 90),
        ("10m", 600),
        ("1h30m", 5400),
        ("2:00:00", 7200),
        ("1-12:00:00", 129600),
        ("0.5", 0.5),
    ],
)
def test_durations_are_seconds(text, seconds):
    assert Profile(name="p", walltime=text).walltime == seconds
    assert Profile(name="p", poll_interval=text, max_poll_interval=10**6).poll_interval == seconds


@pytest.mark.parametrize(
    ("text", "size"), [("4GB", 4 * GiB), ("2GiB", 2 * GiB), ("512MB", 512 * MiB), (512, 512 * MiB)]
)
def test_memory_is_bytes(text, size):
    assert Profile(name="p", memory_per_node=text).memory_per_node == size


def test_memory_from_a_file_is_parsed_once(tmp_path, environ):
    """Layers keep values as written: 4GB must not become 4 GiB read again as megabytes."""
    path = write(tmp_path, "site.yaml", "memory_per_node: 4GB\nwalltime: 1h\n")
    profile = resolve_profile(str(path), environ=environ).profile
    assert profile.memory_per_node == 4 * GiB and profile.walltime == 3600


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"nodes": 0}, "greater than 0"),
        ({"walltime": "soon"}, "cannot read 'soon' as a duration"),
        ({"memory_per_node": "lots"}, "cannot read 'lots' as memory"),
        ({"poll_interval": 0}, "greater than 0"),
        ({"partition": "a\nb"}, "single line"),
        ({"extra_directives": ["--exclusive\n#SBATCH --x"]}, "single line"),
        ({"env": {"1BAD": "x"}}, "not a valid environment variable name"),
        ({"worker_memory_limit": 2}, "fraction"),
        ({"workers_per_node": "per-gpu"}, "needs gpus_per_node"),
        ({"poll_interval": 10, "max_poll_interval": 5}, "shorter than poll_interval"),
    ],
)
def test_bad_values(bad, message):
    with pytest.raises(Exception, match=message):
        Profile(name="p", **bad)


def test_env_numbers_become_text_and_worker_memory_limit_forms():
    profile = Profile(name="p", env={"OMP_NUM_THREADS": 1}, worker_memory_limit=0.8)
    assert profile.env == {"OMP_NUM_THREADS": "1"} and profile.worker_memory_limit == "0.8"
    assert Profile(name="p", worker_memory_limit="AUTO").worker_memory_limit == "auto"
    assert Profile(name="p", worker_memory_limit="8GB").worker_memory_limit == "8GB"
    with pytest.raises(Exception, match="valid string"):
        Profile(name="p", env={"FLAG": True})


def test_workers_and_threads():
    gpu = Profile(name="p", workers_per_node="per-gpu", gpus_per_node=4, cpus_per_node=32)
    assert gpu.workers_on_each_node() == 4 and gpu.threads_of_each_worker() == 8
    assert Profile(name="p", workers_per_node=3, cpus_per_node=8).threads_of_each_worker() == 2
    assert Profile(name="p", workers_per_node=8, cpus_per_node=2).threads_of_each_worker() == 1
    assert Profile(name="p", threads_per_worker=5, cpus_per_node=8).threads_of_each_worker() == 5
    assert Profile(name="p").threads_of_each_worker() is None
    assert Profile(name="p", python="/opt/py").python_executable() == "/opt/py"


def test_field_kinds():
    assert field_kind("memory_per_node") == "memory"
    assert field_kind("walltime") == "duration" and field_kind("poll_interval") == "duration"
    assert field_kind("modules") == "list" and field_kind("extra_directives") == "list"
    assert field_kind("env") == "dict"
    assert field_kind("nodes") == "scalar" and field_kind("workers_per_node") == "scalar"


# -- layers and provenance --------------------------------------------------------------------

SITE = """
description: a site
backend: slurm
partition: compute
nodes: 2
walltime: 1h
memory_per_node: 8GB
"""


def test_layering_order_with_provenance(tmp_path, environ):
    path = write(tmp_path, "site.yaml", SITE)
    environ |= {"HPCFLOW_NODES": "4", "HPCFLOW_PARTITION": "debug", "HPCFLOW_QOS": "high"}
    resolved = resolve_profile(str(path), environ=environ, overrides={"nodes": 8, "qos": None})
    profile, sources = resolved.profile, resolved.sources
    location = str(path.resolve())
    # command line > environment > profile file > built-in default
    assert profile.nodes == 8 and sources["nodes"] == "command line --nodes"
    assert profile.partition == "debug" and sources["partition"] == "env HPCFLOW_PARTITION"
    # An override of None is an option that was not given: the environment stands.
    assert profile.qos == "high" and sources["qos"] == "env HPCFLOW_QOS"
    assert profile.walltime == 3600 and sources["walltime"] == f"profile {location}:5"
    assert profile.backend == "slurm" and sources["backend"] == f"profile {location}:2"
    assert profile.launcher == "srun" and sources["launcher"] == BUILTIN_DEFAULT
    assert profile.name == "site" and sources["name"] == f"profile {location} (file name)"
    assert set(sources) == set(Profile.model_fields)
    assert resolved.source("account") == BUILTIN_DEFAULT
    assert resolved.ref is not None and resolved.ref.origin == "file"


def test_each_layer_alone_wins_over_the_ones_below(tmp_path, environ, monkeypatch):
    monkeypatch.setattr(resolve_module, "WORKFLOW_FIELDS", frozenset({"nodes", "qos"}))
    path = write(tmp_path, "site.yaml", SITE)
    data, positions = load_yaml("name: wf\ndefaults:\n  nodes: 3\n  qos: low\n", "wf.yaml")
    layers = [
        profile_layer(find_profile(str(path), environ)),
        workflow_layer(data["defaults"], file="wf.yaml", positions=positions),
        environment_layer(environ | {"HPCFLOW_QOS": "high"}),
    ]
    resolved = merge_layers(layers)
    assert resolved.profile.nodes == 3 and resolved.sources["nodes"] == "workflow wf.yaml:3"
    assert resolved.profile.qos == "high" and resolved.sources["qos"] == "env HPCFLOW_QOS"
    assert resolved.profile.partition == "compute"


def test_workflow_layer_refuses_profile_settings(tmp_path):
    data, positions = load_yaml("name: wf\ndefaults:\n  partition: gpu\n", "wf.yaml")
    with pytest.raises(ProfileError) as info:
        workflow_layer(data["defaults"], file="wf.yaml", positions=positions)
    assert "wf.yaml:3:3: defaults.partition: 'partition' is a profile setting" in str(info.value)
    empty = workflow_layer({}, file="wf.yaml")
    assert dict(empty.values) == {}


def test_override_layer_flags_and_unknown_settings():
    layer = override_layer(
        {"walltime": "2h", "modules": "a,b"}, flags={"walltime": "--set walltime"}
    )
    assert layer.sources == {
        "walltime": "command line --set walltime",
        "modules": "command line --modules",
    }
    assert layer.values["modules"] == ["a", "b"]
    with pytest.raises(
        ProfileError, match=r"--nodez: unknown setting 'nodez'; did you mean 'nodes'\?"
    ):
        override_layer({"nodez": 2})
    with pytest.raises(ProfileError, match="unknown setting 'name'"):
        override_layer({"name": "other"})


# -- the environment -----------------------------------------------------------------------------


def test_environment_values_are_read_by_type(environ):
    environ |= {
        "HPCFLOW_NODES": "3",
        "HPCFLOW_OVERCOMMIT": "no",
        "HPCFLOW_WALLTIME": "1:30:00",
        "HPCFLOW_MEMORY_PER_NODE": "2GiB",
        "HPCFLOW_MODULES": "gcc/12, openmpi/4.1",
        "HPCFLOW_SETUP": '["export A=1,2", "echo hi"]',
        "HPCFLOW_EXTRA_DIRECTIVES": "[--exclusive, 12]",
        "HPCFLOW_ENV": '{OMPI_MCA_btl: "self,tcp", N: 1}',
        "HPCFLOW_WORKERS_PER_NODE": "per-gpu",
        "HPCFLOW_GPUS_PER_NODE": "2",
        "HPCFLOW_POLL_INTERVAL": "0.5",
        "HPCFLOW_ACCOUNT": "",  # empty = unset
        "HPCFLOW_HOME": "/elsewhere",  # not a setting: ignored
    }
    resolved = resolve_profile("local", environ=environ)
    p = resolved.profile
    assert p.nodes == 3 and p.overcommit is False and p.walltime == 5400
    assert p.memory_per_node == 2 * GiB
    assert p.modules == ["gcc/12", "openmpi/4.1"]
    assert p.setup == ["export A=1,2", "echo hi"]
    assert p.extra_directives == ["--exclusive", "12"]
    assert p.env == {"OMPI_MCA_btl": "self,tcp", "N": "1"}
    assert p.workers_per_node == "per-gpu" and p.gpus_per_node == 2 and p.poll_interval == 0.5
    assert p.account is None and resolved.sources["account"] == BUILTIN_DEFAULT
    assert resolved.sources["walltime"] == "env HPCFLOW_WALLTIME"


@pytest.mark.parametrize(
    ("var", "value", "expected"),
    [
        ("HPCFLOW_NODES", "abc", "env HPCFLOW_NODES: nodes: Input should be a valid integer"),
        (
            "HPCFLOW_NODES",
            "-1",
            "env HPCFLOW_NODES: nodes: Input should be greater than 0 (got '-1')",
        ),
        ("HPCFLOW_WALLTIME", "soon", "env HPCFLOW_WALLTIME: walltime: cannot read 'soon'"),
        (
            "HPCFLOW_BACKEND",
            "lsf",
            "env HPCFLOW_BACKEND: backend: Input should be 'local', 'slurm'",
        ),
        (
            "HPCFLOW_WORKERS_PER_NODE",
            "many",
            "env HPCFLOW_WORKERS_PER_NODE: workers_per_node: expected a positive whole number or "
            "'per-gpu' (got 'many')",
        ),
        ("HPCFLOW_ENV", "A=1", "env HPCFLOW_ENV='A=1': expected a mapping such as {NAME: value}"),
        ("HPCFLOW_MODULES", "[a, ", "env HPCFLOW_MODULES='[a, ': expected a list such as [a, b]"),
        (
            "HPCFLOW_OVERCOMMIT",
            "maybe",
            "env HPCFLOW_OVERCOMMIT: overcommit: Input should be a valid boolean",
        ),
    ],
)
def test_bad_environment_values_name_the_variable(environ, var, value, expected):
    message = resolve_error("local", environ=environ | {var: value})
    assert expected in message
    assert "Traceback" not in message


def test_cross_field_problems_say_where_each_value_came_from(tmp_path, environ):
    path = write(tmp_path, "site.yaml", "backend: slurm\ngpus_per_node: 0\n")
    message = resolve_error(str(path), environ=environ | {"HPCFLOW_WORKERS_PER_NODE": "per-gpu"})
    assert "env HPCFLOW_WORKERS_PER_NODE: workers_per_node 'per-gpu' needs gpus_per_node" in message
    assert f"gpus_per_node from profile {path.resolve()}:2" in message


def test_misspelt_variables_are_warned_about(environ, caplog):
    with caplog.at_level("WARNING", logger="hpcflow.settings.resolve"):
        environment_layer(environ | {"HPCFLOW_PARTITON": "x", "HPCFLOW_HOME": "/h"})
    assert "HPCFLOW_PARTITON" in caplog.text and "HPCFLOW_PARTITION" in caplog.text
    assert "HPCFLOW_HOME" not in caplog.text


# -- profile files -------------------------------------------------------------------------------


def test_unknown_key_gives_file_line_and_did_you_mean(tmp_path, environ):
    path = write(tmp_path, "site.yaml", "backend: slurm\n\npartiton: debug\n")
    message = resolve_error(str(path), environ=environ)
    assert f"{path.resolve()}:3:1: partiton: unknown key 'partiton'" in message
    assert "hint: did you mean 'partition'?" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nodes: 0\n", ":1:8: nodes: Input should be greater than 0"),
        ("backend: slurm\nwalltime: soon\n", ":2:11: walltime: cannot read 'soon' as a duration"),
        ("env:\n  1BAD: x\n", ":2:3: env.1BAD: '1BAD' is not a valid environment variable name"),
        ("modules:\n  - gcc\n  - 12\n", ":3:5: modules[1]: Input should be a valid string"),
        ("workers_per_node: lots\n", ":1:19: workers_per_node: expected a positive whole number"),
        ("nodes: [1\n", "YAML syntax error"),
        ("- a\n- b\n", "a profile must be a mapping of settings"),
        ("name: other\n", "name 'other' differs from the file's name 'site'"),
        (
            "workers_per_node: per-gpu\n",
            ":1:1: workers_per_node 'per-gpu' needs gpus_per_node of at least 1",
        ),
    ],
)
def test_bad_profile_files_point_at_the_line(tmp_path, environ, text, expected):
    path = write(tmp_path, "site.yaml", text)
    message = resolve_error(str(path), environ=environ)
    assert expected in message
    assert str(path.resolve()) in message


def test_a_broken_file_is_reported_even_when_overridden(tmp_path, environ):
    path = write(tmp_path, "site.yaml", "nodes: many\n")
    message = resolve_error(str(path), environ=environ | {"HPCFLOW_NODES": "2"})
    assert ":1:8: nodes:" in message


def test_empty_file_and_matching_name_are_fine(tmp_path, environ):
    assert resolve_profile(str(write(tmp_path, "a.yaml", "")), environ=environ).profile.name == "a"
    named = write(tmp_path, "b.yaml", "name: b\nnodes: 2\n")
    assert resolve_profile(str(named), environ=environ).profile.nodes == 2


# -- finding profiles ----------------------------------------------------------------------------


def test_search_order(tmp_path, environ):
    first, second = tmp_path / "first", tmp_path / "second"
    user = Path(environ["XDG_CONFIG_HOME"]) / "hpcflow" / "profiles"
    write(first, "site.yaml", "description: first\n")
    write(second, "site.yaml", "description: second\n")
    write(second, "other.yml", "description: other\n")
    write(user, "site.yaml", "description: user\n")
    write(user, "slurm.yaml", "description: my slurm\n")
    environ["HPCFLOW_PROFILE_PATH"] = f"{first}:{tmp_path / 'missing'}:{second}"

    site = find_profile("site", environ)
    assert site.origin == "$HPCFLOW_PROFILE_PATH" and Path(site.location) == first / "site.yaml"
    assert find_profile("other", environ).location == str(second / "other.yml")
    slurm = find_profile("slurm", environ)
    assert slurm.origin == "user" and load_profile(slurm).description == "my slurm"
    assert find_profile("local", environ).origin == "shipped"

    names = [(ref.name, ref.origin) for ref in list_profiles(environ)]
    assert names[:3] == [
        ("site", "$HPCFLOW_PROFILE_PATH"),
        ("other", "$HPCFLOW_PROFILE_PATH"),
        ("slurm", "user"),
    ]
    assert ("slurm", "shipped") not in names
    everything = list_profiles(environ, include_shadowed=True)
    hidden = {(ref.name, ref.origin) for ref in everything if ref.shadowed}
    assert hidden == {("site", "$HPCFLOW_PROFILE_PATH"), ("site", "user"), ("slurm", "shipped")}


def test_user_dir_defaults_to_home_config(tmp_path):
    home = tmp_path / "home"
    write(home / ".config" / "hpcflow" / "profiles", "mine.yaml", "nodes: 2\n")
    ref = find_profile("mine", {"HOME": str(home)})
    assert ref.origin == "user"


def test_paths_are_paths(tmp_path, environ, monkeypatch):
    path = write(tmp_path, "odd name.yaml", "nodes: 2\n")
    ref = find_profile(str(path), environ)
    assert ref.origin == "file" and ref.name == "odd name"
    monkeypatch.chdir(tmp_path)
    assert find_profile("odd name.yaml", environ).location == str(path.resolve())
    with pytest.raises(ProfileError, match="'nope.yaml' does not exist"):
        find_profile("nope.yaml", environ)
    with pytest.raises(ProfileError, match="is not a file"):
        find_profile(str(tmp_path) + "/", environ)


def test_unknown_name_lists_profiles_and_suggests(environ):
    with pytest.raises(ProfileError) as info:
        find_profile("slrum", environ)
    err = info.value
    assert err.message == "no profile named 'slrum'"
    assert err.hint is not None and err.hint.startswith("did you mean 'slurm'?")
    assert all(name in err.hint for name in SHIPPED)


def test_default_profile_name():
    assert default_profile_name({}) == "local"
    assert default_profile_name({"HPCFLOW_PROFILE": "slurm-test"}) == "slurm-test"
    resolved = resolve_profile(environ={"HPCFLOW_PROFILE": "slurm-test", "HOME": "/nonexistent"})
    assert resolved.profile.name == "slurm-test"


# -- the shipped profiles --------------------------------------------------------------------------


def shipped_refs() -> list[ProfileRef]:
    return [ref for ref in list_profiles({"HOME": "/nonexistent"}) if ref.origin == "shipped"]


def test_the_expected_profiles_are_shipped():
    assert {ref.name for ref in shipped_refs()} == SHIPPED
    names = {entry.name for entry in shipped_profile_dir().iterdir()}
    assert {f"{name}.yaml" for name in SHIPPED} <= names


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_shipped_profile_loads(name):
    ref = find_profile(name, {"HOME": "/nonexistent"})
    profile = load_profile(ref)
    assert profile.name == name and profile.description


def test_shipped_profile_contents():
    env = {"HOME": "/nonexistent"}
    assert load_profile(find_profile("local", env)).backend == "local"
    slurm = load_profile(find_profile("slurm", env))
    assert (slurm.backend, slurm.mode, slurm.launcher) == ("slurm", "pilot", "srun")
    gpu = load_profile(find_profile("slurm-gpu", env))
    assert (gpu.partition, gpu.workers_per_node, gpu.gpus_per_node) == ("gpu", "per-gpu", 2)
    assert gpu.workers_on_each_node() == 2
    test = load_profile(find_profile("slurm-test", env))
    assert (test.partition, test.cpus_per_node, test.nodes) == ("debug", 2, 1)
    assert test.overcommit is True
    assert (test.poll_interval, test.max_poll_interval, test.mpi) == (0.5, 2, "pmix")
    assert test.env == {"OMPI_MCA_btl": "self,tcp", "OMPI_MCA_btl_tcp_if_include": "lo"}
    pbs = load_profile(find_profile("pbs", env))
    assert (pbs.backend, pbs.pbs_flavor, pbs.launcher) == ("pbs", "pro", "mpirun")
    torque = load_profile(find_profile("torque", env))
    assert (torque.backend, torque.pbs_flavor, torque.launcher) == ("pbs", "torque", "mpirun")
    pbs_test = load_profile(find_profile("pbs-test", env))
    assert (pbs_test.pbs_flavor, pbs_test.partition) == ("torque", "debug")
    assert pbs_test.cpus_per_node == 2
    assert pbs_test.overcommit is True
    assert (pbs_test.poll_interval, pbs_test.max_poll_interval) == (0.5, 2)
    assert pbs_test.env["OMPI_MCA_btl"] == "self,tcp"


def test_example_site_profile_loads():
    ref = find_profile(str(REPO / "profiles" / "example-site.yaml"), {"HOME": "/nonexistent"})
    profile = load_profile(ref)
    assert profile.backend == "slurm" and profile.memory_per_node == 128 * GiB
    assert profile.walltime == 4 * 3600 and profile.threads_of_each_worker() == 8
