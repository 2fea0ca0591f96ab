"""Task folders on a shared file system: a ``mkdir -p`` that a client answers "no such
file" for a moment (a parent made by another node's client) is tried again."""

from __future__ import annotations

import os

import pytest

from hpcflow.worker import logfiles


def test_a_folder_the_file_system_does_not_know_yet_is_made_on_a_later_try(tmp_path, monkeypatch):
    real = os.makedirs
    refusals = [2]

    def makedirs(path, exist_ok=False):  # as GlusterFS answered twice, then made it
        if refusals[0]:
            refusals[0] -= 1
            if refusals[0]:
                raise FileNotFoundError(2, "No such file or directory", path)
            raise FileExistsError(17, "File exists", path)
        real(path, exist_ok=exist_ok)

    monkeypatch.setattr(logfiles.os, "makedirs", makedirs)
    monkeypatch.setattr(logfiles.time, "sleep", lambda seconds: None)
    target = tmp_path / "tasks" / "square.x=2-c845dbbf31"
    logfiles.ensure_dir(str(target))
    assert target.is_dir() and refusals == [0]


def test_a_folder_that_cannot_be_made_still_fails(tmp_path, monkeypatch):
    def makedirs(path, exist_ok=False):
        raise FileNotFoundError(2, "No such file or directory", path)

    monkeypatch.setattr(logfiles.os, "makedirs", makedirs)
    monkeypatch.setattr(logfiles.time, "sleep", lambda seconds: None)
    with pytest.raises(FileNotFoundError):
        logfiles.ensure_dir(str(tmp_path / "never"))
