"""A worker's GPUs shared out to its tasks (hpcflow/worker/gpus.py): whole devices,
shares of one, a pilot worker's own devices first, and a real task process that sees
only its device."""

from __future__ import annotations

import threading

import pytest

from hpcflow.spec.models import Resources
from hpcflow.worker import gpus as gpus_module
from hpcflow.worker.execute import run_call
from hpcflow.worker.gpus import Devices
from tests.conftest import task_call


def test_shares_of_one_gpu_fill_a_device_before_the_next():
    devices = Devices(["0", "1"])
    taken = [devices.take(0.25) for _ in range(4)]
    # Least used first: the shares spread over both devices, two each.
    assert sorted(d for (d,) in taken) == ["0", "0", "1", "1"]
    assert devices.take(0.5) in (["0"], ["1"])
    devices.give_back(["1"], 0.25)
    devices.give_back(["1"], 0.25)
    assert devices.take(1) == ["1"]  # a whole GPU goes only to a free device


def test_fractions_that_add_up_to_one_fit_exactly():
    devices = Devices(["3"])
    for _ in range(10):
        assert devices.take(0.1) == ["3"]
    assert devices._used["3"] == gpus_module._UNITS


def test_whole_gpus_are_distinct_devices():
    devices = Devices(["0", "1", "2", "3"])
    first = devices.take(2)
    second = devices.take(2)
    assert len(set(first) | set(second)) == 4


def test_a_pilot_worker_shares_out_only_its_own_devices():
    env = {"CUDA_VISIBLE_DEVICES": "1,0", gpus_module.OWN_GPUS: "1"}
    assert Devices.from_environment(env).devices == ["1"]
    assert Devices.from_environment({"CUDA_VISIBLE_DEVICES": "0,1"}).devices == ["0", "1"]
    assert Devices.from_environment({}).devices == []


def test_held_devices_go_back_even_when_the_task_fails():
    devices = Devices(["0"])
    with pytest.raises(RuntimeError), devices.held(1):
        raise RuntimeError("task failed")
    assert devices._used["0"] == 0


@pytest.mark.parametrize("gpus", [0.5, 1])
def test_a_task_process_sees_only_the_device_it_got(tmp_path, monkeypatch, gpus):
    monkeypatch.setattr(gpus_module, "_DEVICES", Devices(["4", "5"]))
    calls = [
        task_call(tmp_path, i, f'echo "$CUDA_VISIBLE_DEVICES" > seen_{i}; sleep 0.5', gpus=gpus)
        for i in range(2)
    ]
    threads = [threading.Thread(target=run_call, args=(c,)) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seen = [(tmp_path / f"seen_{i}").read_text().strip() for i in range(2)]
    assert all(s in ("4", "5") for s in seen), seen
    if gpus == 1:
        assert sorted(seen) == ["4", "5"]  # at the same time: one device each


@pytest.mark.parametrize("value", [1.5, -1, True, "x"])
def test_gpus_are_whole_or_a_share_of_one(value):
    with pytest.raises(ValueError):
        Resources.model_validate({"gpus": value})
    assert Resources.model_validate({"gpus": 0.25}).gpus == 0.25
