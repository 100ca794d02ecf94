"""Physical plausibility per device: minibatch time, module power, the power an epoch's energy implies, and
power caps; each error names the field, the rule and the likely unit mistake."""

from __future__ import annotations

from pathlib import Path

import pytest
from jetpredict.models.catalogue import MIN_MODULE_POWER_W, POWER_HEADROOM, list_devices, load_device
from jetpredict.models.errors import InputError
from jetpredict.models.paths import data_path
from jetpredict.models.profile_files import read_profile_csv
from jetpredict.models.profile_rows import (
    MAX_S_PER_MINIBATCH,
    MIN_S_PER_MINIBATCH,
    ProfileRowsError,
    validate_records,
)

ROW = {"device": "orin-nano", "workload": "w", "mode": "a", "cpu_cores": 6, "cpu_mhz": 1510.4, "gpu_mhz": 625,
       "emc_mhz": 2133, "batch_size": 16, "minibatches_per_epoch": 3125, "epoch_time_s": 668.3}


def problems(**change) -> dict[str, str]:
    try:
        validate_records([{**ROW, **change}])
    except ProfileRowsError as err:
        return {p.field: p.message for p in err.problems}
    return {}


def test_every_device_has_a_power_range_from_its_module_power():
    for device in list_devices():
        lo, hi = device.power_range_w
        assert lo == MIN_MODULE_POWER_W and hi == pytest.approx(POWER_HEADROOM * device.specs.module_power_w)
        # every preset's budget lies inside it
        assert all(lo < (p.power_budget_w or lo + 1) <= hi for p in device.presets)


def test_committed_profile_files_are_plausible():
    bench = sorted((Path(__file__).resolve().parents[2] / "bench" / "data").rglob("*.csv"))
    assert bench  # found from the file's place, wherever pytest runs
    for path in [*sorted(data_path("reference").glob("*.csv")), *bench]:
        assert len(read_profile_csv(path)) > 0, path


def test_power_in_milliwatts_is_named():
    found = problems(avg_power_w=10926.0)
    assert "avg_power_w" in found and "looks like milliwatts (10.93 W)" in found["avg_power_w"]
    assert "Orin Nano" in found["avg_power_w"] and "at most 30 W" in found["avg_power_w"]
    assert "base_power_w" in problems(base_power_w=0.01)
    assert problems(avg_power_w=10.9, base_power_w=3.1) == {}


def test_epoch_time_in_milliseconds_is_named():
    found = problems(epoch_time_s=668_300.0)  # 214 s per minibatch
    assert "epoch_time_s looks like milliseconds" in found["epoch_time_s"]
    assert f"more than the {MAX_S_PER_MINIBATCH:g} s" in found["epoch_time_s"]
    # too fast for any Jetson: not a unit the hint can name, but the rule is
    found = problems(epoch_time_s=0.2)
    assert f"less than the {MIN_S_PER_MINIBATCH:g} s" in found["epoch_time_s"]


def test_energy_that_implies_an_impossible_power_names_the_unit():
    # 10.9 W x 668.3 s given in millijoules
    found = problems(epoch_energy_j=7_284_470.0)
    assert "epoch_energy_j looks like millijoules" in found["epoch_energy_j"]
    # the epoch in milliseconds, energy in joules: the implied power is a thousand times too low
    found = problems(epoch_time_s=668_300.0, minibatches_per_epoch=312_500, epoch_energy_j=7284.47)
    assert "epoch_time_s looks like milliseconds" in found["epoch_energy_j"]
    assert problems(epoch_energy_j=7284.47, avg_power_w=10.9) == {}


def test_an_epoch_in_milliseconds_is_named_once_not_again_through_its_energy():
    found = problems(epoch_time_s=668_300.0, epoch_energy_j=7284.47, avg_power_w=10.9)
    assert list(found) == ["epoch_time_s"] and "looks like milliseconds" in found["epoch_time_s"]


def test_host_rows_are_not_held_to_a_jetson_range():
    host = {**ROW, "device": "host", "avg_power_w": 250.0, "epoch_time_s": 668_300.0}
    assert len(validate_records([host])) == 1


@pytest.mark.parametrize("cap, ok", [(15.0, True), (30.0, True), (None, True), (7000.0, False), (31.0, False)])
def test_power_caps_within_the_device_range(cap, ok):
    device = load_device("orin-nano")
    if ok:
        assert device.check_power_cap(cap) == cap
        return
    with pytest.raises(InputError) as err:
        device.check_power_cap(cap)
    assert err.value.field == "max_power_w" and "at most 30 W" in err.value.message
    if cap == 7000.0:
        assert "looks like milliwatts (7 W)" in err.value.message
