"""A run's state file, written on a node and read on the submit side, through two
clients of the shared file system (the test cluster's GlusterFS volume).

That is how pilot mode works: the driver commits ``state.sqlite`` inside the allocation
while ``hpcflow run`` follows it (and ``hpcflow status`` reads it) on the login node.
A client serves some pages from its caches and some fresh from the server, so a plain
read-only connection sees pages of two commits at once now and then ("database disk
image is malformed", once in CI right after a cancelled pilot). The reader must never
fail for that, and must come to see the last commit.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from hpcflow.store import statedb as st

#: exclusive: with 3 pytest-xdist workers on 2 cores a reader here once saw pages of two
#: commits that SQLite could not tell apart from a sound file (168 of 400 rows, no error).
#: Run alone, as every run before, it had not failed in the suite. The torn read is a
#: known weakness of reading through GlusterFS's client caches, not of the test's
#: schedule (docs/troubleshooting.md): a reproducer saw it once in about 104,000 reads,
#: on a quiet machine. Until the reader is fixed this test stays where it was measured.
pytestmark = [pytest.mark.slurm, pytest.mark.exclusive]

TASKS = 400
SECONDS = 12

WRITER = f"""
import random, sys, time
from pathlib import Path
from hpcflow.store.statedb import StateDB
db = StateDB(Path(sys.argv[1]))
db.add_tasks((i, f"t[i={{i}}]", "t", f"t-{{i}}", [], "pending") for i in range({TASKS}))
db.flush()
Path(sys.argv[1] + ".ready").touch()
n = 0
end = time.monotonic() + {SECONDS}
while time.monotonic() < end:
    n += 1
    states = random.choices(["running", "succeeded", "failed"], k={TASKS})
    db.set_states(enumerate(states), message="x" * random.randrange(2000))
    db.set_meta(commits=n)
    db.flush()  # every change committed at once: far more often than a driver commits
db.close()
print(n)
"""


def test_a_reader_on_another_client_never_fails_and_sees_the_last_commit(slurm_cluster, tmp_path):
    state = tmp_path / "state.sqlite"
    script = tmp_path / "writer.py"
    script.write_text(textwrap.dedent(WRITER))
    writer = subprocess.Popen(
        ["srun", "-N1", "-n1", "-w", "n2", sys.executable, str(script), str(state)],
        env=slurm_cluster.env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        ready = state.with_name(state.name + ".ready")
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert writer.poll() is None, writer.communicate()
            assert time.monotonic() < deadline, "the writer never started"
            time.sleep(0.1)
        reader = st.StateDB(state, readonly=True)
        reads = 0
        while writer.poll() is None:
            counts = reader.counts()  # raises if a read fails for good
            assert sum(counts["t"].values()) == TASKS, counts
            reader.tasks(states=(st.FAILED,))
            reads += 1
        out, err = writer.communicate(timeout=30)
        assert writer.returncode == 0, out + err
        commits = int(out.split()[-1])
        # The last commit shows, once the client's caches catch up.
        deadline = time.monotonic() + 30
        while int(reader.meta().get("commits", 0)) != commits:
            assert time.monotonic() < deadline, (reader.meta(), commits)
            time.sleep(0.2)
        reader.close()
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.communicate()
    assert commits > 50 and reads > 50, (commits, reads)
