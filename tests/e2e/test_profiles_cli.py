"""`hpcflow profiles list/show` as a user runs them: real processes, a private HOME."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SITE = """\
description: my site
backend: slurm
partition: compute
nodes: 2
walltime: 2h
memory_per_node: 8GB
"""


@pytest.fixture
def user_profiles(env: dict[str, str], tmp_path: Path) -> Path:
    """An empty user profile folder; no HPCFLOW_* settings inherited from the caller."""
    for var in [v for v in env if v.startswith("HPCFLOW_") and v != "HPCFLOW_HOME"]:
        del env[var]
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env["HOME"] = str(tmp_path / "home")
    folder = tmp_path / "config" / "hpcflow" / "profiles"
    folder.mkdir(parents=True)
    return folder


def test_list_shows_shipped_and_user_profiles(hpcflow, user_profiles):
    (user_profiles / "mysite.yaml").write_text(SITE)
    (user_profiles / "slurm.yaml").write_text("description: my own slurm\nbackend: slurm\n")
    result = hpcflow("profiles", "list")
    assert result.returncode == 0, result.output
    lines = result.stdout.splitlines()
    for name in ("local", "slurm-gpu", "slurm-test", "pbs"):
        assert any(
            line.startswith(f"{name} ") and line.rstrip().endswith("shipped") for line in lines
        )
    assert any(
        line.startswith("mysite ") and "my site" in line and "user:" in line for line in lines
    )
    # The user's slurm hides the shipped one, which only --all shows.
    slurm = [line for line in lines if line.startswith("slurm ")]
    assert len(slurm) == 1 and "my own slurm" in slurm[0]
    rows = json.loads(hpcflow("profiles", "list", "--all", "--json").stdout)
    hidden = [row for row in rows if row["shadowed"]]
    assert [(row["name"], row["origin"]) for row in hidden] == [("slurm", "shipped")]
    assert {row["name"] for row in rows} >= {"local", "slurm", "slurm-gpu", "slurm-test", "pbs"}


def test_list_survives_a_broken_profile(hpcflow, user_profiles):
    (user_profiles / "broken.yaml").write_text("nodez: 2\n")
    result = hpcflow("profiles", "list")
    assert result.returncode == 0
    assert "invalid:" in result.stdout and "local" in result.stdout


def test_show_prints_every_value_and_its_source(hpcflow, env, user_profiles):
    (user_profiles / "mysite.yaml").write_text(SITE)
    env["HPCFLOW_NODES"] = "4"
    result = hpcflow(
        "profiles", "show", "mysite", "--set", "partition=debug", "--set", "max-poll-interval=2m"
    )
    assert result.returncode == 0, result.output
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[2:] if line.strip()}
    assert "mysite.yaml" in result.stdout.splitlines()[0]
    assert "4" in rows["nodes"] and "env HPCFLOW_NODES" in rows["nodes"]
    assert "debug" in rows["partition"] and "command line --set partition" in rows["partition"]
    assert "0:02:00" in rows["max_poll_interval"]
    assert "2:00:00" in rows["walltime"] and "profile mysite.yaml:5" in rows["walltime"]
    assert "8.0 GiB" in rows["memory_per_node"] and "mysite.yaml:6" in rows["memory_per_node"]
    assert "built-in default" in rows["launcher"] and "srun" in rows["launcher"]
    assert "my site" in rows["description"] and "mysite.yaml:1" in rows["description"]

    data = json.loads(hpcflow("profiles", "show", "mysite", "--json").stdout)
    settings = data["settings"]
    location = str((user_profiles / "mysite.yaml").resolve())
    assert data["origin"] == "user" and data["location"] == location
    assert settings["nodes"] == {"value": 4, "source": "env HPCFLOW_NODES"}
    assert settings["walltime"] == {"value": 7200.0, "source": f"profile {location}:5"}
    assert settings["memory_per_node"]["value"] == 8 * 1024**3
    assert settings["gpus_per_node"] == {"value": 0, "source": "built-in default"}


def test_show_defaults_to_local_or_hpcflow_profile(hpcflow, env, user_profiles):
    local = json.loads(hpcflow("profiles", "show", "--json").stdout)
    assert local["name"] == "local" and local["origin"] == "shipped"
    env["HPCFLOW_PROFILE"] = "slurm-test"
    test = json.loads(hpcflow("profiles", "show", "--json").stdout)
    assert test["name"] == "slurm-test"
    assert test["settings"]["env"]["value"] == {
        "OMPI_MCA_btl": "self,tcp",
        "OMPI_MCA_btl_tcp_if_include": "lo",
    }


def test_show_by_path(hpcflow, user_profiles, tmp_path):
    path = tmp_path / "elsewhere" / "site.yaml"
    path.parent.mkdir()
    path.write_text(SITE)
    data = json.loads(hpcflow("profiles", "show", str(path), "--json").stdout)
    assert data["name"] == "site" and data["origin"] == "file"
    assert data["settings"]["partition"]["source"] == f"profile {path.resolve()}:3"


@pytest.mark.parametrize(
    ("args", "profile_text", "extra_env", "expected"),
    [
        (
            ["show", "mysite"],
            "backend: slurm\npartiton: debug\n",
            {},
            ["mysite.yaml:2:1: partiton: unknown key 'partiton'", "did you mean 'partition'?"],
        ),
        (["show", "slurmm"], None, {}, ["no profile named 'slurmm'", "did you mean 'slurm'?"]),
        (
            ["show", "local"],
            None,
            {"HPCFLOW_NODES": "many"},
            ["env HPCFLOW_NODES: nodes: Input should be a valid integer"],
        ),
        (
            ["show", "local", "--set", "nodez=3"],
            None,
            {},
            ["command line --set nodez: unknown setting 'nodez'; did you mean 'nodes'?"],
        ),
        (
            ["show", "local", "--set", "walltime=soon"],
            None,
            {},
            ["command line --set walltime: walltime: cannot read 'soon' as a duration"],
        ),
        (["show", "local", "--set", "nodes"], None, {}, ["'nodes' is not KEY=VALUE"]),
    ],
)
def test_errors_are_messages_with_exit_code_2(
    hpcflow, env, user_profiles, args, profile_text, extra_env, expected
):
    if profile_text is not None:
        (user_profiles / "mysite.yaml").write_text(profile_text)
    env.update(extra_env)
    result = hpcflow("profiles", *args)
    assert result.returncode == 2, result.output
    assert "Traceback" not in result.output
    for text in expected:
        assert text in result.stderr


def test_list_and_runs_fit_80_columns(hpcflow, env, user_profiles, tmp_path):
    """Names, run ids, dates and paths never wrap in an 80-column terminal; descriptions
    may, and a long path keeps its end."""
    deep = user_profiles / "mysite.yaml"
    deep.write_text(SITE)
    env["COLUMNS"] = "80"
    listed = hpcflow("profiles", "list").stdout.splitlines()
    assert all(len(line) <= 80 for line in listed), listed
    mine = next(line for line in listed if line.startswith("mysite "))
    assert "user: " in mine and mine.rstrip().endswith("mysite.yaml"), mine
    folder = tmp_path / ("a-folder-with-a-rather-long-name-" * 3)
    folder.mkdir()
    wf = folder / "workflow.yaml"
    wf.write_text("name: w\ntasks:\n  - name: t\n    command: 'true'\n")
    assert hpcflow("run", str(wf), "-q").returncode == 0
    (run_dir,) = (folder / ".hpcflow" / "runs").iterdir()
    lines = hpcflow("runs").stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    assert len(lines) == 2 and lines[1].startswith(run_dir.name + " ")
    assert "…" in lines[1] and lines[1].rstrip().endswith("-/workflow.yaml"), lines


@pytest.mark.parametrize("columns", [80, 60])
def test_narrow_terminals_drop_columns_never_cut_names_ids_or_paths(
    hpcflow, env, user_profiles, tmp_path, columns
):
    """In a narrow terminal no line is wider than it, profile names, backends, modes, run
    ids and statuses stay whole, descriptions wrap, paths lose their middle (the home
    folder is ~), and the least useful columns are left out when that is not enough."""
    import sqlite3

    env["COLUMNS"] = str(columns)
    name = "a-very-long-profile-name-for-my-site"
    about = "my site, with a description long enough that it has to wrap somewhere"
    (user_profiles / f"{name}.yaml").write_text(f"description: {about}\nbackend: slurm\n")
    listed = hpcflow("profiles", "list").stdout.splitlines()
    assert all(len(line) <= columns for line in listed), listed
    heads = listed[0].split()
    assert heads[0] == "name" and heads[-1] == "description", listed  # "from" left out
    if columns == 80:
        assert heads == ["name", "backend", "mode", "description"], listed
        mine = next(line for line in listed if line.startswith(name + " "))
        assert mine.split()[1:3] == ["slurm", "pilot"], mine
    assert any(line.startswith(name + " ") for line in listed), listed
    words = " ".join(listed).split()
    assert all(word in words for word in about.split()), listed  # wrapped, whole
    folder = tmp_path / "home" / "projects" / ("long-folder-name-" * 3) / "sweep"
    folder.mkdir(parents=True)
    wf = folder / "workflow.yaml"
    wf.write_text("name: w\ntasks:\n  - name: t\n    command: 'true'\n")
    assert hpcflow("run", str(wf), "-q").returncode == 0
    assert hpcflow("run", str(wf), "-q", "--force").returncode == 0
    first, second = sorted((folder / ".hpcflow" / "runs").iterdir())
    with sqlite3.connect(first / "state.sqlite") as db:  # as a killed driver leaves it
        db.execute("UPDATE meta SET value = '\"interrupted\"' WHERE key = 'status'")
    lines = hpcflow("runs").stdout.splitlines()
    assert all(len(line) <= columns for line in lines), lines
    if columns == 80:  # the task counts go first, then the start times
        assert lines[0].split() == ["run", "started", "status", "workflow"], lines
    else:
        assert lines[0].split() == ["run", "status", "workflow"], lines
    for run_dir, status in ((first, "interrupted"), (second, "succeeded")):
        row = next(line for line in lines if line.startswith(run_dir.name + " "))
        assert status in row.split(), row
        assert row.rstrip().endswith("/sweep/workflow.yaml"), row
        assert " ~/" in row and "…" in row, row
