"""``PilotConfig.external_client``: the flag the Snakemake plugin sets for its allocation."""

from __future__ import annotations

import json
from dataclasses import asdict

from hpcflow.bootstrap.config import PilotConfig


def test_external_client_round_trips(tmp_path):
    config = PilotConfig(workers_expected=2, threads_per_worker=2, external_client=True)
    config.write(tmp_path / "pilot.json")
    assert PilotConfig.read(tmp_path / "pilot.json").external_client is True


def test_a_pilot_json_without_the_flag_still_reads_as_driver_mode(tmp_path):
    data = asdict(PilotConfig(workers_expected=1, threads_per_worker=1))
    del data["external_client"]  # written by a version without the flag
    (tmp_path / "pilot.json").write_text(json.dumps(data))
    assert PilotConfig.read(tmp_path / "pilot.json").external_client is False
