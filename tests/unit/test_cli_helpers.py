"""CLI helpers: tables that fit the terminal (paths that lose their middle, columns left
out), the latest run of a folder."""

from __future__ import annotations

from pathlib import Path

from hpcflow.cli.console import fit_columns, short_path, table_width


def test_short_path_keeps_the_first_folder_and_the_end(monkeypatch):
    monkeypatch.setattr(Path, "home", staticmethod(lambda: Path("/home/ada")))
    deep = "/home/ada/projects/climate/sweep/workflow.yaml"
    assert short_path(deep, 80) == "~/projects/climate/sweep/workflow.yaml"
    assert short_path(deep, 23) == "~/…/sweep/workflow.yaml"
    assert short_path("/scratch/ada/a/b/sweep/workflow.yaml", 30) == (
        "/scratch/…/sweep/workflow.yaml"
    )
    assert short_path("/scratch/ada/a/b/sweep/workflow.yaml", 32) == (
        "/scratch/…/b/sweep/workflow.yaml"
    )
    # Too narrow for the first folder and the file name: only the end.
    assert short_path("/scratch/ada/workflow.yaml", 15) == "…/workflow.yaml"
    assert short_path("/home/adam/x.yaml", 40) == "/home/adam/x.yaml"  # not ada's home
    for width in range(1, 50):
        assert len(short_path(deep, width)) <= width


def test_fit_columns_shrinks_then_drops_in_order():
    natural, minimum = [22, 16, 9, 5, 60], [22, 16, 9, 5, 22]
    assert fit_columns(200, natural, minimum, shrink=(4,), drop=(3, 1, 4)) == natural
    # 20 left for the path with every column, under its minimum: the counts go.
    at_80 = fit_columns(80, natural, minimum, shrink=(4,), drop=(3, 1, 4))
    assert at_80 == [22, 16, 9, None, 27] and table_width(at_80) == 80
    at_60 = fit_columns(60, natural, minimum, shrink=(4,), drop=(3, 1, 4))
    assert at_60 == [22, None, 9, None, 25]
    at_40 = fit_columns(40, natural, minimum, shrink=(4,), drop=(3, 1, 4))
    assert at_40 == [22, None, 9, None, None]
    # Nothing left to leave out: as wide as the columns that are never cut.
    assert table_width(fit_columns(20, natural, minimum, drop=(3, 1, 4))) == 33


def test_the_latest_run_in_a_folder_of_two_in_the_same_second(tmp_path):
    """Run ids start with their second; two runs of one second are told apart by the
    start the index of runs has, not by the random end of their ids."""
    from hpcflow.api.locate import latest_run_in
    from hpcflow.store.registry import RegisteredRun

    runs = tmp_path / ".hpcflow" / "runs"
    registered = []
    for run_id, started in (("20261204-070056-ffffff", 10.1), ("20261204-070056-000000", 10.6)):
        (runs / run_id).mkdir(parents=True)
        (runs / run_id / "state.sqlite").touch()
        registered.append(RegisteredRun(run_id, runs / run_id, str(tmp_path / "w.yaml"), started))
    assert latest_run_in(tmp_path, registered) == (runs / "20261204-070056-000000").resolve()
    assert latest_run_in(tmp_path / "elsewhere", registered) is None
    # A folder without runs of its own: those of the workflows in its subfolders.
    assert latest_run_in(tmp_path.parent, registered) == runs.resolve() / registered[1].run_id
