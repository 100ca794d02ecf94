"""The twin against the published measurements: the 15% / 80% criterion, recomputed from the rows that
the repository carries (``tools/data/`` and the bundled published AGX Xavier sweeps)."""

from __future__ import annotations

import pandas as pd
import pytest
from jetpredict.models.catalogue import load_device
from jetpredict.predictor.constants import KNEE_REL

from tools import calibrate_twin as calibrate


@pytest.fixture(scope="module")
def comparison():
    rows = calibrate.load_calibration_rows()
    cal = calibrate.Calibration(
        {d: calibrate.DevicePhysics(load_device(d)).constants for d in {r.device for r in rows}},
        calibrate.DevicePhysics(load_device("agx-xavier")).shared)
    return rows, calibrate.simulate_rows(cal, rows)


def test_every_listed_published_row_is_used(comparison):
    rows, _ = comparison
    counts = {}
    for r in rows:
        counts[r.source] = counts.get(r.source, 0) + 1
    assert counts == {"agx_xavier_reference_sweeps": 30, "dataloader_workers": 20, "storage_media": 14,
                      "batch_size": 12, "dvfs": 2, "orin_agx_training": 1}


def test_epoch_time_within_15_percent_on_80_percent_of_rows(comparison):
    crit = calibrate.criteria(comparison[1])
    assert crit["time_rows"] == 79
    assert crit["time_within"] >= 0.80
    assert crit["time_mape"] <= 0.07  # measured 6.6% (4.4% before the real LeNet-5 sweep was a target)


def test_power_within_15_percent_on_80_percent_of_rows_with_power(comparison):
    crit = calibrate.criteria(comparison[1])
    assert crit["power_rows"] == 46
    assert crit["power_within"] >= 0.95  # measured 100%
    assert crit["power_mape"] <= 0.05  # measured 4.7% (4.8% on the knee once set by hand, 0.35)


def test_the_baseload_is_fitted_to_the_base_power_rows(comparison):
    """The idle-at-mode readings set the baseload alone: every AGX Xavier base reading within 10%, 2% on
    average (fitted jointly with the training rows: 4.4%, EMC 1066 MHz 15% low)."""
    base = comparison[1].dropna(subset=["pub_base_power_w"])
    assert len(base) == 30
    err = base["err_base_power_w"].abs()
    assert err.max() <= 0.10 and err.mean() <= 0.025  # measured 9.7%, 2.0%


def test_the_real_lenet5_power_follows_the_latency_bound_gpu(comparison):
    """LeNet-5's kernels are ~90% fixed latency: counted at the fitted share, its power is within 14% of
    the real sweep at every mode (at the top clocks g, i, j it was 14-21% high before the share was fitted)."""
    df = comparison[1]
    lenet = df[(df["source"] == "agx_xavier_reference_sweeps") & (df["workload"] == "lenet5-mnist")]
    assert len(lenet) == 10
    # measured 13.5% (mode b: 6.81 W digitized, 6.33 W at c with a faster GPU); 11.9% on the knee at 0.35
    assert lenet["err_avg_power_w"].abs().max() <= 0.14
    top = lenet[lenet["label"].str.endswith(("mode g", "mode i", "mode j"))]
    assert top["err_avg_power_w"].abs().max() <= 0.09  # measured 8.4%


def test_the_twin_runs_on_the_predictors_dvfs_knee():
    """The simulated reference sweeps carry the predictor's power shape: a knee changed on one side only
    fails here until the twin is recalibrated (``python -m tools.calibrate_twin``)."""
    for device in ("agx-xavier", "orin-agx", "nano"):
        assert calibrate.DevicePhysics(load_device(device)).shared["dvfs_knee"] == KNEE_REL


def test_the_doc_shows_every_row(comparison):
    rows, _ = comparison
    doc = calibrate.RESULTS_PATH.read_text(encoding="utf-8")
    missing = [r.label for r in rows if f"| {r.source} | {r.label} |" not in doc]
    assert not missing


def test_the_low_gpu_clock_fact_is_a_fitted_target_and_in_the_doc(comparison):
    facts = calibrate.load_ratio_facts()
    assert len(facts) == 1
    f = facts[0]
    assert (f.speedup, f.power_ratio) == (10.3, 3.6)
    assert f.slow_mode == {**f.fast_mode, "gpu_mhz": 114.75} and f.fast_mode["gpu_mhz"] == 1377
    cal = calibrate.Calibration({"agx-xavier": calibrate.DevicePhysics(load_device("agx-xavier")).constants},
                                calibrate.DevicePhysics(load_device("agx-xavier")).shared)
    sim = calibrate.simulate_facts(cal, facts).iloc[0]
    # measured -1.0%, -5.1% (-4.0% on the knee at 0.35)
    assert abs(sim.err_speedup) <= 0.02 and abs(sim.err_power_ratio) <= 0.06
    assert f"| facts | {f.label} |" in calibrate.RESULTS_PATH.read_text(encoding="utf-8")


def test_every_transcribed_figure_cites_its_source():
    for name in ("calibration_rows.csv", "ratio_facts.csv", "socket_idle_power.csv"):
        df = pd.read_csv(calibrate.DATA_DIR / name)
        assert df["source"].notna().all() and df["source"].str.contains(r"(?:POMACS|FGCS) 20\d\d").all(), name


def test_the_dvfs_rows_turn_energy_per_epoch_into_power():
    rows = {r.label: r for r in calibrate.load_calibration_rows()}
    r = rows["AGX Xavier (MAXN) ResNet-18/CIFAR-10 DVFS off"]
    # POMACS Fig 6: 3.027 Wh per epoch of 349.0 s.
    assert r.targets["avg_power_w"] == pytest.approx(3.027 * 3600 / 349.0)


@pytest.mark.slow
def test_the_committed_constants_are_what_the_repository_data_give():
    """tools/calibrate_twin refits the twin from the figures the repository carries and lands on the
    committed profiler/sim/data/twin_calibration.toml (written to 6 significant digits)."""
    import dataclasses

    cal = calibrate.calibrate(calibrate.load_calibration_rows(), calibrate.load_ratio_facts())
    for device, fitted in cal.devices.items():
        committed = calibrate.DevicePhysics(load_device(device)).constants
        for name, value in dataclasses.asdict(fitted).items():
            if name != "basis":
                assert value == pytest.approx(getattr(committed, name), rel=1e-5, abs=1e-12), (device, name)
    shared = calibrate.DevicePhysics(load_device("agx-xavier")).shared
    assert cal.shared == pytest.approx(shared, rel=1e-5)
