"""Profiled knob ranges moved to another device: each end snaps inward to a target step, so a target mode
outside the profiled share of a knob's top is flagged and widened, never absorbed by a step beyond it."""

from __future__ import annotations

import pytest
from jetpredict.models.catalogue import ModeArrays, load_device
from jetpredict.models.profile_files import read_profile_csv
from jetpredict.predictor.bundled import fit_workload, predict_modes
from jetpredict.predictor.reference import REFERENCE_DIR
from jetpredict.predictor.transfer import ranges_on

REF = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")


def mobilenet_efij():
    """MobileNetV3 profiled at AGX Xavier modes e, f, i, j: EMC 1333-1600 MHz, 62-75% of its 2133 MHz top."""
    rows = REF[(REF.workload == "mobilenetv3-gld23k") & REF["mode"].isin(list("efij"))]
    return fit_workload(rows.reset_index(drop=True))


def test_a_range_between_two_target_steps_keeps_only_the_step_nearest_it():
    """Orin Nano's EMC steps are 204, 665.6 and 2133 MHz; none lies in 1333-1600. Snapped to each end's
    nearest step the range was [665.6, 2133] and a mode at 31% of the top went unflagged."""
    model = mobilenet_efij()
    assert model.profiled_ranges["emc_mhz"] == (1333.0, 1600.0)
    moved = ranges_on(model.profiled_ranges, load_device("agx-xavier"), load_device("orin-nano"))
    assert moved["emc_mhz"] == (2133.0, 2133.0)
    assert moved["cpu_cores"] == (2.0, 6.0)  # 2-8 of 8 cores: 1.5-6 of 6, the low end up to 2


def test_the_orin_nano_mode_at_a_third_of_the_emc_top_is_flagged_and_wider():
    """The audit's case: 6 cores, 1510.4 / 625 MHz, at each of Orin Nano's EMC steps. Before, 665.6 MHz
    answered ``extrapolated_knobs == ''`` with an interval as wide as at the top (46.7% vs 47.5%)."""
    model, nano = mobilenet_efij(), load_device("orin-nano")
    emc = [204.0, 665.6, 2133.0]
    p = predict_modes(model, ModeArrays([6] * 3, [1510.4] * 3, [625.0] * 3, emc), nano)
    assert list(p.extrapolated_knobs()) == ["emc_mhz", "emc_mhz", ""]
    width = p.epoch_time_s_high / p.epoch_time_s_low
    assert width[1] > 1.05 * width[2] and width[0] > width[1]


def test_ends_snap_inward_and_an_end_within_a_step_keeps_it():
    """AGX Xavier -> Xavier NX, at the same share of each top: EMC 1333-1600 of 2133 MHz is 1166-1400 of
    1866, so 1331.2 alone (the low end had snapped down to 1065.6); GPU 900-1377 of 1377 is 725-1109.25, from
    752.25 (not 701.25); CPU 2100-2265 of 2265.6 is 1768-1906.7, 0.03% under the 1907.2 step, which it keeps."""
    moved = ranges_on(mobilenet_efij().profiled_ranges, load_device("agx-xavier"), load_device("xavier-nx"))
    assert moved == {"cpu_cores": (2.0, 6.0), "cpu_mhz": (1804.8, 1907.2), "gpu_mhz": (752.25, 1109.25),
                     "emc_mhz": (1331.2, 1331.2)}


@pytest.mark.parametrize("cores, expected", [((2, 2), (2.0, 2.0)), ((4, 4), (3.0, 3.0)), ((3, 5), (3.0, 3.0))])
def test_a_core_range_with_no_whole_core_inside_takes_the_nearest_half_up(cores, expected):
    """8 -> 6 cores: 2 is 1.5 (half a core up: 2), 4 is 3, 3-5 is 2.25-3.75 (3 inside)."""
    xavier, nano = load_device("agx-xavier"), load_device("orin-nano")
    ranges = {"cpu_cores": cores, "cpu_mhz": (2265.6, 2265.6), "gpu_mhz": (1377.0, 1377.0), "emc_mhz": (2133.0, 2133.0)}
    assert ranges_on(ranges, xavier, nano)["cpu_cores"] == expected
