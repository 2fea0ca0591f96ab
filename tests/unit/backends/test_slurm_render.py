"""The SLURM batch script: what only SLURM's does (the checks shared by every backend,
golden files included, are in test_batch_backends.py): values and paths for sbatch's
own ``#SBATCH`` parser, and the options hpcflow sets on its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcflow.backends._commands import CommandRunner
from hpcflow.backends.slurm import SlurmBackend
from hpcflow.backends.slurm.backend import directive_path, directive_value
from hpcflow.errors import ProfileError, RunError
from tests.unit.backends.cases import request


@pytest.fixture(scope="module")
def backend() -> SlurmBackend:
    return SlurmBackend(CommandRunner())


def test_paths_with_line_breaks_or_backslashes_are_refused(backend):
    for bad in ("/scratch/a\nb/out.log", "/scratch/a\rb/out.log", "/scratch/a\\b/out.log"):
        with pytest.raises(RunError, match="line break, NUL or backslash") as info:
            backend.render(request(stdout=Path(bad)))
        assert info.value.hint


def test_directive_values_are_one_token():
    assert directive_value("debug", "partition") == "debug"
    assert directive_value("a100&ib", "constraint") == '"a100&ib"'
    assert directive_value('say "hi" \\o/', "qos") == '"say \\"hi\\" \\\\o/"'
    with pytest.raises(ProfileError, match="partition"):
        directive_value("debug\n#SBATCH --account=other", "partition")
    assert directive_path("/tmp/a b/x.out") == '"/tmp/a b/x.out"'
    assert directive_path("/tmp/50%/%j.out") == "/tmp/50%%/%%j.out"


def test_options_hpcflow_sets_itself_cannot_be_repeated(backend):
    for extra in ("--no-requeue", "-k"):  # -k: --no-kill, set for a pilot on two nodes
        with pytest.raises(ProfileError, match="already sets") as info:
            backend.render(request(nodes=2, ntasks=2, extra_directives=[extra]))
        assert "hpcflow sets it for pilot allocations" in info.value.hint
