"""The second account the security tests attack from is real and separate."""

from __future__ import annotations

import os
from pathlib import Path

from tests.security.conftest import Account


def test_the_other_account_is_someone_else(other_account: Account, shared_dir: Path) -> None:
    """The fixture itself: a different uid that cannot read a 0600 file of ours but can
    enter the shared folder and write there."""
    secret = shared_dir / "secret"
    secret.write_text("mine")
    os.chmod(secret, 0o600)
    who = other_account.run(["id", "-u"])
    assert int(who.stdout) == other_account.uid != os.geteuid()
    peek = other_account.run(["cat", str(secret)])
    assert peek.returncode != 0 and "Permission denied" in peek.stderr
    plant = other_account.run(["touch", str(shared_dir / "planted")])
    assert plant.returncode == 0, plant.stderr
    assert (shared_dir / "planted").stat().st_uid == other_account.uid
