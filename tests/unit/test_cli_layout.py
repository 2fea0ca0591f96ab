"""Fitting CLI tables to the terminal: paths that lose their middle, columns left out."""

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
