"""Nothing is unpickled unless you wrote it.

The victim (the user running the suite) keeps a workflow and its run folders in a
sticky, world-writable folder like shared scratch. Another account plants a forged run
folder beside them, with a ``state.sqlite`` that says the task succeeded and a
``value.pickle`` whose ``__reduce__`` would create a canary. The victim's
``hpcflow result``, ``hpcflow.load_result`` and ``Run.result`` never create the canary:
they give the right value (found through the victim's memo) or a clear error. A value
file changed after it was written (by the victim, as root can) fails its MAC check.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import textwrap
from pathlib import Path

import pytest

from hpcflow.errors import HpcflowError, RunError
from hpcflow.store.paths import task_slug
from tests.conftest import run_cli, write_workflow
from tests.security.conftest import Account

STEPS = """
def make():
    return {"v": 42}

def use(x):
    return x["v"] + 1
"""

WORKFLOW = """
name: forged
tasks:
  - name: make
    python: steps:make
  - name: use
    python: steps:use
    from: {x: make}
"""


class _Touch:
    """A pickle that runs ``touch CANARY`` when it is loaded."""

    def __init__(self, canary: Path) -> None:
        self.canary = canary

    def __reduce__(self) -> tuple[object, tuple[str, ...]]:
        return (os.system, (f"touch {self.canary}",))


def _evil(canary: Path) -> bytes:
    return pickle.dumps(_Touch(canary), protocol=5)


PLANT = """
import json, sys
from pathlib import Path
from hpcflow.store import statedb as st
run, slug, started, payload = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4]
(run / "tasks" / slug).mkdir(parents=True)
(run / "run.json").write_text(json.dumps({"run_id": run.name, "started": started,
                                          "workflow": sys.argv[5]}))
with st.StateDB(run / "state.sqlite") as db:
    db.add_tasks([(0, "make", "make", slug, [], st.SUCCEEDED)])
(run / "tasks" / slug / "value.pickle").write_bytes(Path(payload).read_bytes())
(run / "tasks" / slug / "1.result.json").write_text("1")
"""


@pytest.fixture
def victim(shared_dir: Path, tmp_path: Path) -> dict[str, object]:
    """Two runs of the victim's workflow in the shared folder: ``r1`` made ``make``'s
    value, ``r2`` re-ran ``use`` only (``make`` up to date there)."""
    folder = shared_dir / "wf"
    folder.mkdir()
    (folder / "steps.py").write_text(textwrap.dedent(STEPS))
    workflow = write_workflow(folder, WORKFLOW)
    env = {
        **os.environ,
        "HPCFLOW_HOME": str(tmp_path / "home"),
        "COLUMNS": "200",
        "NO_COLOR": "1",
    }
    first = run_cli(["run", str(workflow), "-q", "--run-dir", str(shared_dir / "r1")], env, folder)
    assert first.returncode == 0, first.output
    again = ["run", str(workflow), "-q", "--rerun", "use", "--run-dir", str(shared_dir / "r2")]
    second = run_cli(again, env, folder)
    assert second.returncode == 0 and "1 up to date" in second.stdout, second.output
    return {"workflow": workflow, "env": env, "r1": shared_dir / "r1", "r2": shared_dir / "r2"}


def _plant(account: Account, shared_dir: Path, victim: dict, canary: Path, header: bool) -> Path:
    """The other account's forged run folder, started just before the victim's ``r2``
    (the run a search of the folder by start time would pick); its value is ``_evil``,
    bare or behind a copy of a real value file's header (a MAC it cannot make)."""
    payload = _evil(canary)
    if header:
        real = (victim["r1"] / "tasks" / task_slug("make") / "value.pickle").read_bytes()
        payload = real[:56] + payload
    source = shared_dir / "payload.pickle"
    source.write_bytes(payload)
    source.chmod(0o644)
    started = json.loads((victim["r2"] / "run.json").read_text())["started"] - 0.001
    forged = shared_dir / "r1b"
    argv = ["-c", PLANT, str(forged), task_slug("make"), str(started), str(source)]
    planted = account.run([sys.executable, *argv, str(victim["workflow"])])
    assert planted.returncode == 0, planted.stderr
    assert forged.stat().st_uid == account.uid
    return forged


@pytest.mark.parametrize("header", [False, True], ids=["bare-pickle", "copied-header"])
def test_a_forged_run_beside_yours_is_never_unpickled(
    other_account: Account, shared_dir: Path, victim: dict, header: bool, monkeypatch
) -> None:
    canary = shared_dir / "CANARY"
    forged = _plant(other_account, shared_dir, victim, canary, header)
    env = victim["env"]
    # The CLI: the value of make, up to date in r2, comes from r1 (the memo says so).
    shown = run_cli(["result", str(victim["r2"]), "make"], env)
    assert shown.returncode == 0 and json.loads(shown.stdout) == {"v": 42}, shown.output
    saved = shared_dir / "saved.pickle"
    out = run_cli(["result", str(victim["r2"]), "make", "-o", str(saved)], env)
    assert out.returncode == 0 and pickle.loads(saved.read_bytes()) == {"v": 42}, out.output
    # The Python API, in this process.
    monkeypatch.setenv("HPCFLOW_HOME", env["HPCFLOW_HOME"])
    import hpcflow

    assert hpcflow.load_result(victim["r2"], "make") == {"v": 42}
    assert hpcflow.open_run(str(victim["r2"])).result("make") == {"v": 42}
    # Pointed at the forged folder itself: refused, with what to do, no traceback.
    direct = run_cli(["result", str(forged), "make"], env)
    assert direct.returncode == 2, direct.output
    assert f"{forged} belongs to another account" in direct.stderr
    assert "hint:" in direct.stderr and "Traceback" not in direct.output
    with pytest.raises(HpcflowError, match="belongs to another account"):
        hpcflow.load_result(forged, "make")
    assert not canary.exists()


def test_a_value_file_changed_after_it_was_written_fails_its_mac(
    shared_dir: Path, victim: dict, monkeypatch
) -> None:
    canary = shared_dir / "CANARY"
    value = victim["r1"] / "tasks" / task_slug("make") / "value.pickle"
    real = value.read_bytes()
    evil = _evil(canary)
    # Same header, length fixed up, the pickle swapped: only the MAC can tell.
    value.write_bytes(real[:16] + len(evil).to_bytes(8, "little") + real[24:56] + evil)
    env = victim["env"]
    for run in ("r1", "r2"):
        shown = run_cli(["result", str(victim[run]), "make"], env)
        assert shown.returncode == 2, shown.output
        assert f"the value file {value} does not carry your MAC" in shown.stderr
        assert "--rerun" in shown.stderr and "Traceback" not in shown.output
    monkeypatch.setenv("HPCFLOW_HOME", env["HPCFLOW_HOME"])
    import hpcflow

    with pytest.raises(RunError, match="does not carry your MAC"):
        hpcflow.open_run(str(victim["r2"])).result("make")
    # A consumer that receives it in a later run fails; it does not run the pickle.
    later = ["run", str(victim["workflow"]), "-q", "--rerun", "use"]
    consumer = run_cli(
        [*later, "--run-dir", str(shared_dir / "r3")], env, victim["workflow"].parent
    )
    assert consumer.returncode != 0
    assert "does not carry your MAC" in (shared_dir / "r3" / "driver.log").read_text() + "".join(
        p.read_text() for p in (shared_dir / "r3").rglob("*.err")
    )
    assert not canary.exists()


def test_a_value_file_without_a_mac_is_made_again_not_loaded(
    shared_dir: Path, victim: dict
) -> None:
    """A value file in the old format (a bare pickle, as an hpcflow before MACs wrote
    it, or one put in place by hand) counts as gone: its producer runs again."""
    value = victim["r1"] / "tasks" / task_slug("make") / "value.pickle"
    value.write_bytes(_evil(shared_dir / "CANARY"))
    later = ["run", str(victim["workflow"]), "-q", "--rerun", "use"]
    again = run_cli([*later, "--run-dir", str(shared_dir / "r3")], victim["env"])
    assert again.returncode == 0 and "2 ran, 0 up to date" in again.stdout, again.output
    shown = run_cli(["result", str(shared_dir / "r3"), "use"], victim["env"])
    assert shown.returncode == 0 and shown.stdout.strip() == "43", shown.output
    assert not (shared_dir / "CANARY").exists()
