"""The twin against the published measurements: the 15% / 80% criterion, recomputed from the rows."""

from __future__ import annotations

import pytest
from tools import calibrate_twin as calibrate

pytestmark = pytest.mark.skipif(not calibrate.DEFAULT_PUBLISHED.is_dir(),
                                reason="../shared/data/published is not present")


@pytest.fixture(scope="module")
def comparison():
    rows = calibrate.load_calibration_rows()
    cal = calibrate.Calibration(
        {d: calibrate.DevicePhysics(d).constants for d in {r.device for r in rows}},
        calibrate.DevicePhysics("agx-xavier").shared)
    return rows, calibrate.simulate_rows(cal, rows)


def test_every_listed_published_row_is_used(comparison):
    rows, _ = comparison
    counts = {}
    for r in rows:
        counts[r.source] = counts.get(r.source, 0) + 1
    assert counts == {"agx_xavier_reference_sweeps": 20, "dataloader_workers": 20, "storage_media": 14,
                      "batch_size": 12, "dvfs": 2, "orin_agx_training": 1}


def test_epoch_time_within_15_percent_on_80_percent_of_rows(comparison):
    crit = calibrate.criteria(comparison[1])
    assert crit["time_rows"] == 69
    assert crit["time_within"] >= 0.80


def test_power_within_15_percent_on_80_percent_of_rows_with_power(comparison):
    crit = calibrate.criteria(comparison[1])
    assert crit["power_rows"] == 36
    assert crit["power_within"] >= 0.80


def test_the_doc_shows_every_row(comparison):
    rows, _ = comparison
    doc = calibrate.DOC_PATH.read_text(encoding="utf-8")
    missing = [r.label for r in rows if f"| {r.source} | {r.label} |" not in doc]
    assert not missing


def test_the_low_gpu_clock_fact_is_a_fitted_target_and_in_the_doc(comparison):
    facts = calibrate.load_ratio_facts()
    assert len(facts) == 1
    f = facts[0]
    assert (f.speedup, f.power_ratio) == (10.3, 3.6)
    assert f.slow_mode == {**f.fast_mode, "gpu_mhz": 114.75} and f.fast_mode["gpu_mhz"] == 1377
    cal = calibrate.Calibration({"agx-xavier": calibrate.DevicePhysics("agx-xavier").constants},
                                calibrate.DevicePhysics("agx-xavier").shared)
    sim = calibrate.simulate_facts(cal, facts).iloc[0]
    assert abs(sim.err_speedup) <= 0.20 and abs(sim.err_power_ratio) <= 0.15
    assert f"| facts | {f.label} |" in calibrate.DOC_PATH.read_text(encoding="utf-8")
