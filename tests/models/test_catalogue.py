"""The device catalogue: power-mode space sizes, indexing, presets, physics helpers and errors.

Expected figures are transcribed from published sources (POMACS 2022, PowerTrain, NVIDIA spec sheets,
the L4T nvpmodel files), not read back from the catalogue, so a wrong TOML value fails here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from jetpredict.models.catalogue import (
    MODE_FIELDS,
    Device,
    ModeArrays,
    ModeSpace,
    PowerMode,
    Preset,
    device_ids,
    list_devices,
    load_device,
    mode_label,
    resolve_device,
)
from jetpredict.models.errors import InputError, ModeOutOfRangeError, UnknownDeviceError

#: The boards the catalogue ships, pinned by name (a file lost or renamed fails here). Every other check runs
#: over ``device_ids()``, so a board added to models/devices/ is checked by ``pytest tests/models`` too.
SHIPPED_DEVICE_IDS = ("agx-xavier", "xavier-nx", "nano", "orin-agx", "orin-nx", "orin-nano")
#: An id no board will be given, for the unknown-device checks ("tx2" was one here: a board a contributor may add).
NO_SUCH_DEVICE = "no-such-board"

#: Space sizes: agx-xavier (POMACS 2022) and orin-agx (PowerTrain) are published; the others follow
#: from each catalogue file's documented step counts (cores x CPU x GPU x EMC).
SPACE_SIZES = {
    "agx-xavier": 8 * 29 * 14 * 9,   # 29,232
    "orin-agx": 12 * 29 * 13 * 4,    # 18,096
    "xavier-nx": 6 * 25 * 15 * 8,
    "nano": 4 * 15 * 12 * 7,
    "orin-nx": 8 * 26 * 7 * 4,
    "orin-nano": 6 * 20 * 5 * 3,     # 1,800 (PowerTrain)
}

#: Top (MAXN) clocks in MHz and core counts from the NVIDIA spec sheets / nvpmodel files.
TOP_KNOBS = {
    "agx-xavier": (8, 2265.6, 1377.0, 2133.0),
    "xavier-nx": (6, 1907.2, 1109.25, 1866.0),
    "nano": (4, 1479.0, 921.6, 1600.0),
    "orin-agx": (12, 2201.6, 1300.5, 3199.0),
    "orin-nx": (8, 1984.0, 918.0, 3199.0),
    "orin-nano": (6, 1510.4, 625.0, 2133.0),
}


@pytest.fixture(params=device_ids())
def device(request) -> Device:
    """Each device of the catalogue, the shipped ones and any added."""
    return load_device(request.param)


# --- catalogue contents ---------------------------------------------------------------------------

def test_catalogue_holds_the_six_shipped_devices_sorted_by_id():
    assert set(SHIPPED_DEVICE_IDS) <= set(device_ids())
    assert [d.id for d in list_devices()] == device_ids() == sorted(device_ids())
    assert all(isinstance(d, Device) for d in list_devices())


def test_published_space_sizes_are_exact():
    assert len(load_device("agx-xavier").modes()) == 29_232
    assert len(load_device("orin-agx").modes()) == 18_096


def test_space_size_matches_the_step_counts(device):
    """Every combination of cores and steps is a mode (the file's space_size is held to the same product as it
    is read: models/device_toml.py)."""
    space = device.modes()
    lo, hi = device.cpu_cores_range
    expected = (hi - lo + 1) * len(device.cpu_steps_mhz) * len(device.gpu_steps_mhz) * len(device.emc_steps_mhz)
    assert len(space) == expected


@pytest.mark.parametrize("device_id", sorted(SPACE_SIZES))
def test_shipped_space_sizes_are_the_documented_ones(device_id):
    assert len(load_device(device_id).modes()) == SPACE_SIZES[device_id]


def test_steps_are_sorted_unique_and_positive(device):
    for steps in (device.cpu_steps_mhz, device.gpu_steps_mhz, device.emc_steps_mhz):
        assert len(steps) >= 2
        assert all(b > a > 0 for a, b in zip(steps, steps[1:], strict=False))
    lo, hi = device.cpu_cores_range
    assert 1 == lo < hi == device.specs.cpu_cores


@pytest.mark.parametrize("device_id", sorted(TOP_KNOBS))
def test_top_steps_match_spec_sheet(device_id):
    device = load_device(device_id)
    cores, cpu, gpu, emc = TOP_KNOBS[device_id]
    assert device.cpu_cores_range[1] == cores
    assert max(device.cpu_steps_mhz) == pytest.approx(cpu)
    assert max(device.gpu_steps_mhz) == pytest.approx(gpu)
    assert max(device.emc_steps_mhz) == pytest.approx(emc)
    ranges = device.knob_ranges()
    assert ranges["cpu_cores"] == (1.0, float(cores))
    assert ranges["gpu_mhz"] == (min(device.gpu_steps_mhz), gpu)


# --- the mode space -------------------------------------------------------------------------------

def test_indexing_matches_iteration_order_on_a_whole_space():
    space = load_device("orin-nano").modes()
    listed = list(space)
    assert len(listed) == len(space) == 1800
    assert [space[i] for i in range(len(space))] == listed
    assert len({m.knobs() for m in listed}) == len(space)  # every combination exactly once


@pytest.mark.parametrize("device_id", ["agx-xavier", "orin-agx"])
def test_indexing_matches_iteration_on_large_spaces(device_id):
    space = load_device(device_id).modes()
    n = len(space)
    wanted = {0, 1, 2, 8, 9, 137, n // 3, n // 2, n - 2, n - 1}
    for i, mode in enumerate(space):
        if i in wanted:
            assert space[i] == mode
    assert i == n - 1


def test_emc_varies_fastest_and_cores_slowest():
    device = load_device("agx-xavier")
    space = device.modes()
    first, second = space[0], space[1]
    assert first.knobs() == (1, 115.2, 114.75, 204.0)
    assert second.knobs() == (1, 115.2, 114.75, 408.0)
    assert space[len(device.emc_steps_mhz)].gpu_mhz == device.gpu_steps_mhz[1]
    assert space[len(space) - 1].knobs() == TOP_KNOBS["agx-xavier"]
    assert space[len(space) // 8].cpu_cores == 2


def test_negative_index_slice_and_index_error():
    space = load_device("orin-agx").modes()
    n = len(space)
    assert space[-1] == space[n - 1]
    assert space[-n] == space[0]
    assert space[-5] == space[n - 5]
    assert space[3:6] == [space[3], space[4], space[5]]
    assert space[-2:] == [space[n - 2], space[n - 1]]
    for bad in (n, n + 10, -n - 1):
        with pytest.raises(IndexError, match=str(n - 1)):
            space[bad]


def test_modes_are_power_modes_with_labels():
    mode = load_device("agx-xavier").modes()[-1]
    assert isinstance(mode, PowerMode)
    assert mode.mode == "8c-2265.6-1377-2133" == mode_label(8, 2265.6, 1377.0, 2133.0)
    assert mode.as_dict() == {"mode": mode.mode, "cpu_cores": 8, "cpu_mhz": 2265.6, "gpu_mhz": 1377.0,
                              "emc_mhz": 2133.0}
    assert isinstance(mode.cpu_cores, int)


def test_arrays_and_labels_align_with_indexing():
    space = load_device("xavier-nx").modes()
    arrays = space.arrays().columns()
    assert tuple(arrays) == MODE_FIELDS
    assert all(len(a) == len(space) for a in arrays.values())
    assert arrays["cpu_cores"].dtype.kind == "i"
    labels = space.labels()
    assert len(set(labels)) == len(space)
    for i in (0, 7, 1234, len(space) - 1):
        mode = space[i]
        assert tuple(arrays[f][i] for f in MODE_FIELDS) == pytest.approx(mode.knobs())
        assert labels[i] == mode.mode


def test_mode_space_works_on_its_own():
    space = ModeSpace([1, 2], [100.0, 200.0, 300.0], [50.0], [10.0, 20.0])
    assert len(space) == 12
    assert space[5].knobs() == (1, 300.0, 50.0, 20.0)
    assert space[6].knobs() == (2, 100.0, 50.0, 10.0)


# --- presets --------------------------------------------------------------------------------------

def test_every_device_has_presets_inside_its_range(device):
    assert device.presets
    assert len({p.id for p in device.presets}) == len(device.presets)
    for p in device.presets:
        assert isinstance(p, Preset)
        device.validate_mode(*p.knobs())  # published caps need not be steps, but must be in range
        assert p.power_budget_w is None or p.power_budget_w > 0
    assert device.preset(device.default_preset).mode == device.default_preset


def test_orin_agx_presets_and_caps():
    device = load_device("orin-agx")
    got = {p.mode: (p.id, p.knobs(), p.power_budget_w) for p in device.presets}
    assert got == {
        "MAXN": (0, (12, 2201.6, 1300.5, 3199.0), None),
        "MODE_15W": (1, (4, 1113.6, 408.0, 2133.0), 15.0),
        "MODE_30W": (2, (8, 1728.0, 612.0, 3199.0), 30.0),
        "MODE_50W": (3, (12, 1497.6, 816.0, 3199.0), 50.0),
    }
    assert device.maxn.mode == "MAXN"


def test_orin_nx_maxn_has_no_invented_budget():
    """No nvpmodel file budgets MAXN (nvpmodel_p3767_0000.conf leaves it uncapped); the budgets the power
    caps are drawn from stay those of the capped presets."""
    device = load_device("orin-nx")
    assert device.maxn.power_budget_w is None
    assert sorted({p.power_budget_w for p in device.presets if p.power_budget_w}) == [10.0, 15.0, 25.0]


def test_the_power_caps_are_the_preset_budgets_and_the_module_maximum():
    """AGX Orin's MAXN is uncapped (nvpmodel_p3701_0000.conf); its 60 W module maximum (jetson_specs.csv) is
    a cap people run at, not a preset budget."""
    assert load_device("orin-agx").power_caps_w() == [15.0, 30.0, 50.0, 60.0]
    assert load_device("orin-nx").power_caps_w() == [10.0, 15.0, 25.0]


def test_agx_xavier_presets_follow_nvpmodel_t194():
    device = load_device("agx-xavier")
    assert [p.mode for p in device.presets] == [
        "MAXN", "MODE_10W", "MODE_15W", "MODE_30W_ALL", "MODE_30W_6CORE", "MODE_30W_4CORE",
        "MODE_30W_2CORE", "MODE_15W_DESKTOP"]
    assert device.maxn.knobs() == TOP_KNOBS["agx-xavier"]
    assert device.maxn.power_budget_w is None  # MAXN is uncapped
    assert device.preset("MODE_15W").knobs() == (4, 1200.0, 670.0, 1331.2)
    assert device.preset(3).knobs() == (8, 1200.0, 900.0, 1600.0)


#: Every preset of the other four boards, as their nvpmodel files give it (id, name, cores online, CPU/GPU/EMC
#: clocks it runs at in MHz, budget in W, share of the GPU powered), checked field by field against the files
#: in the shared data (xavier-nx/nvpmodel_t194_p3668.conf, nano/BirdEdge-OS/nvpmodel.conf modes 0-1,
#: orin-nx/nvpmodel_p3767_0000.conf, orin-nano/nvpmodel_p3767_0003.conf).
NVPMODEL_PRESETS = {
    "xavier-nx": [
        (0, "MODE_15W_2CORE", 2, 1907.2, 1109.25, 1600.0, 15.0, 1.0),
        (1, "MODE_15W_4CORE", 4, 1420.8, 1109.25, 1600.0, 15.0, 1.0),
        (2, "MODE_15W_6CORE", 6, 1420.8, 1109.25, 1600.0, 15.0, 1.0),
        (3, "MODE_10W_2CORE", 2, 1497.6, 803.25, 1600.0, 10.0, 1.0),
        (4, "MODE_10W_4CORE", 4, 1190.4, 803.25, 1600.0, 10.0, 1.0),
        (5, "MODE_10W_DESKTOP", 4, 1907.2, 510.0, 1600.0, 10.0, 1.0),
        (6, "MODE_20W_2CORE", 2, 1907.2, 1109.25, 1866.0, 20.0, 1.0),
        (7, "MODE_20W_4CORE", 4, 1420.8, 1109.25, 1866.0, 20.0, 1.0),
        (8, "MODE_20W_6CORE", 6, 1420.8, 1109.25, 1866.0, 20.0, 1.0),
    ],
    "nano": [
        (0, "MAXN", 4, 1479.0, 921.6, 1600.0, 10.0, 1.0),
        (1, "5W", 2, 918.0, 640.0, 1600.0, 5.0, 1.0),
    ],
    "orin-nx": [
        (0, "MAXN", 8, 1984.0, 918.0, 3199.0, None, 1.0),
        (1, "10W", 4, 1190.4, 612.0, 2133.0, 10.0, 0.5),
        (2, "15W", 4, 1651.2, 612.0, 3199.0, 15.0, 0.5),
        (3, "25W", 8, 1497.6, 408.0, 3199.0, 25.0, 1.0),
    ],
    "orin-nano": [
        (0, "15W", 6, 1510.4, 625.0, 2133.0, 15.0, 1.0),
        (1, "7W", 4, 960.0, 408.0, 2133.0, 7.0, 0.5),
    ],
}


@pytest.mark.parametrize("device_id", sorted(NVPMODEL_PRESETS))
def test_presets_are_those_of_the_boards_nvpmodel_file(device_id):
    """Every field of every preset, ids, names, budgets and GPU shares included. Xavier NX's and Orin NX's
    clocks are held by tests/profiler/test_powermode_nvpmodel.py's parse of their L4T files too; Nano's and
    Orin Nano's, and every board's budgets and shares, only here."""
    got = [(p.id, p.mode, p.cpu_cores, p.cpu_mhz, p.gpu_mhz, p.emc_mhz, p.power_budget_w, p.gpu_share)
           for p in load_device(device_id).presets]
    assert got == NVPMODEL_PRESETS[device_id]


@pytest.mark.parametrize("device_id", ["agx-xavier", "nano", "orin-agx", "orin-nx"])
def test_maxn_runs_at_the_top_steps(device_id):
    maxn = load_device(device_id).preset("MAXN")
    assert maxn.knobs() == pytest.approx(TOP_KNOBS[device_id])
    assert load_device(device_id).maxn == maxn


def test_preset_lookup_is_case_insensitive_and_by_id():
    device = load_device("orin-nx")
    assert device.preset("maxn") is device.preset(0) is device.preset("0")
    assert device.preset("15w").id == 2


def test_unknown_preset_names_the_valid_presets():
    with pytest.raises(ModeOutOfRangeError) as err:
        load_device("orin-agx").preset("MODE_40W")
    assert err.value.field == "mode"
    for name in ("0=MAXN", "1=MODE_15W", "2=MODE_30W", "3=MODE_50W"):
        assert name in err.value.message


# --- errors ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [NO_SUCH_DEVICE, "AGX-XAVIER", "", "orin"])
def test_unknown_device_error_names_every_valid_id(bad):
    with pytest.raises(UnknownDeviceError) as err:
        load_device(bad)
    assert isinstance(err.value, InputError)
    assert err.value.field == "device"
    assert repr(bad) in err.value.message
    for device_id in device_ids():
        assert device_id in err.value.message
    assert err.value.as_errors() == {"device": [err.value.message]}


@pytest.mark.parametrize("bad", [["agx-xavier"], {"id": "nano"}, None, 3])
def test_a_device_that_is_no_text_is_an_input_error_naming_device(bad):
    with pytest.raises(InputError) as err:
        resolve_device(bad)
    assert err.value.field == "device" and repr(bad) in err.value.message


@pytest.mark.parametrize(("knobs", "field", "valid"), [
    ((0, 1200.0, 670.0, 1331.2), "cpu_cores", "1..8"),
    ((9, 1200.0, 670.0, 1331.2), "cpu_cores", "1..8"),
    ((4.5, 1200.0, 670.0, 1331.2), "cpu_cores", "1..8"),
    ((4, 3000.0, 670.0, 1331.2), "cpu_mhz", "115.2..2265.6 MHz"),
    ((4, 1200.0, 2000.0, 1331.2), "gpu_mhz", "114.75..1377 MHz"),
    ((4, 1200.0, 670.0, 100.0), "emc_mhz", "204..2133 MHz"),
    ((4, 1200.0, float("nan"), 1331.2), "gpu_mhz", "114.75..1377 MHz"),
])
def test_mode_out_of_range_names_field_and_valid_range(knobs, field, valid):
    device = load_device("agx-xavier")
    with pytest.raises(ModeOutOfRangeError) as err:
        device.validate_mode(*knobs)
    assert err.value.field == field
    assert field in err.value.message and valid in err.value.message
    assert "agx-xavier" in err.value.message


def test_fractional_cores_inside_the_range_are_refused_as_not_whole():
    device = load_device("agx-xavier")
    with pytest.raises(ModeOutOfRangeError) as err:
        device.validate_mode(4.5, 1200.0, 670.0, 1331.2)
    assert err.value.field == "cpu_cores"
    assert "cpu_cores=4.5 must be a whole number of cores" in err.value.message
    assert "outside" not in err.value.message  # 4.5 lies inside 1..8: the rule broken is wholeness
    # outside the range and fractional: the range is the first rule broken
    assert "is outside device" in device.out_of_range(*([v] for v in (8.5, 1200.0, 670.0, 1331.2)))["cpu_cores"]


def test_any_value_inside_the_range_is_accepted():
    device = load_device("agx-xavier")
    device.validate_mode(8, 1200.0, 670.0, 1331.2)  # nvpmodel caps, not steps
    device.validate_mode(1, 115.2, 114.75, 204.0)
    device.validate_mode(8, 2265.0, 1377.0, 2133.0)  # rounded published cap of the 2265.6 MHz step


def test_out_of_range_reports_every_bad_knob_for_arrays():
    device = load_device("orin-agx")
    problems = device.out_of_range(np.array([4, 13]), np.array([1000.0, 1000.0]),
                                   np.array([500.0, 5000.0]), np.array([100.0, 2133.0]))
    assert set(problems) == {"cpu_cores", "gpu_mhz", "emc_mhz"}
    assert "1..12" in problems["cpu_cores"] and "5000" in problems["gpu_mhz"]
    assert device.out_of_range(np.array([4]), np.array([1000.0]), np.array([500.0]), np.array([2133.0])) == {}


# --- nearest mode and physics ---------------------------------------------------------------------

def test_nearest_mode_snaps_each_knob_to_a_catalogue_step():
    device = load_device("agx-xavier")
    mode = device.nearest_mode(8, 1200.0, 670.0, 1331.2)  # MODE_30W_ALL-like caps
    assert mode.knobs() == (8, 1190.4, 675.75, 1331.2)
    assert mode.mode == mode_label(*mode.knobs())
    assert mode.mode in set(device.modes().labels())
    assert device.nearest_mode(*TOP_KNOBS["agx-xavier"]).knobs() == TOP_KNOBS["agx-xavier"]
    assert device.nearest_mode(2, 2100.0, 900.0, 1600.0).knobs() == (2, 2112.0, 905.25, 1600.0)


def test_nearest_mode_rejects_values_outside_the_range():
    with pytest.raises(ModeOutOfRangeError) as err:
        load_device("nano").nearest_mode(4, 1479.0, 1300.0, 1600.0)
    assert err.value.field == "gpu_mhz" and "76.8..921.6 MHz" in err.value.message


def test_peak_fp32_matches_agx_xavier_spec_sheet():
    device = load_device("agx-xavier")
    assert device.peak_fp32_flops(1377.0) == pytest.approx(1.41e12, rel=2e-3)
    flops = device.peak_fp32_flops(np.array([688.5, 1377.0]))
    assert flops.shape == (2,)
    assert flops[1] == pytest.approx(2 * flops[0])  # linear in the GPU clock


def test_peak_bandwidth_matches_spec_sheets():
    assert load_device("agx-xavier").peak_bandwidth(2133.0) == pytest.approx(136.5e9, rel=1e-3)
    orin = load_device("orin-agx")
    assert orin.peak_bandwidth(max(orin.emc_steps_mhz)) == pytest.approx(204.8e9, rel=1e-3)
    assert load_device("nano").peak_bandwidth(1600.0) == pytest.approx(25.6e9, rel=1e-3)
    bw = orin.peak_bandwidth(np.asarray(orin.emc_steps_mhz))
    assert np.all(np.diff(bw) > 0)


def test_physics_agree_with_each_devices_specs(device):
    top_gpu, top_emc = max(device.gpu_steps_mhz), max(device.emc_steps_mhz)
    assert device.peak_bandwidth(top_emc) / 1e9 == pytest.approx(device.specs.peak_bandwidth_gbs, rel=5e-3)
    assert device.peak_fp32_flops(top_gpu) == pytest.approx(
        device.specs.cuda_cores * 2 * top_gpu * 1e6)
    assert math.isfinite(float(device.peak_fp32_flops(top_gpu)))


def test_mode_arrays_from_every_form_of_modes():
    space = ModeSpace([1, 2], [100.0, 200.0, 300.0], [50.0], [10.0, 20.0])
    from_space = ModeArrays.of(space)
    assert len(from_space) == len(space) == 12
    from_modes = ModeArrays.of(list(space))
    assert all(np.array_equal(a, b) for a, b in zip(from_space.arrays(), from_modes.arrays(), strict=True))
    one = ModeArrays.of(space[5])
    assert len(one) == 1 and one.cpu_mhz[0] == 300.0
    from_frame = ModeArrays.of({"cpu_cores": [2], "cpu_mhz": [100], "gpu_mhz": [50], "emc_mhz": [10]})
    assert from_frame.cpu_cores.tolist() == [2.0]
    assert from_space.columns()["cpu_cores"].dtype.kind == "i"
    with pytest.raises(InputError, match="modes"):
        ModeArrays.of({"cpu_mhz": [1.0]})


@pytest.mark.parametrize("modes", [42, "MAXN", None, {"cpu_cores": ["x"], "cpu_mhz": [1.0], "gpu_mhz": [1.0],
                                                     "emc_mhz": [1.0]}])
def test_modes_of_any_other_form_are_an_input_error_naming_modes(modes):
    with pytest.raises(InputError) as err:
        ModeArrays.of(modes)
    assert err.value.field == "modes" and "cpu_cores, cpu_mhz, gpu_mhz, emc_mhz" in err.value.message


def test_modes_of_unequal_lengths_say_which_lengths():
    """Columns of 2, 3 and 1 values were told only "modes must give cpu_cores, ...", which they did give."""
    with pytest.raises(InputError) as err:
        ModeArrays.of({"cpu_cores": [1, 2], "cpu_mhz": [1, 2, 3], "gpu_mhz": [1], "emc_mhz": [4, 5]})
    assert err.value.field == "modes"
    assert "one value per mode" in err.value.message
    assert "cpu_cores 2, cpu_mhz 3, gpu_mhz 1, emc_mhz 2" in err.value.message
    assert len(ModeArrays.of({"cpu_cores": [1, 2], "cpu_mhz": 3, "gpu_mhz": [1], "emc_mhz": [4, 5]})) == 2
