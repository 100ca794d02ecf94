"""What the few-shot workload model's fit and predict promise: frozen values, predictions ordered and
monotone in each clock, the confidence and interval scales setting the intervals, power without a meter,
cross-device predictions, bad input named by its field; and the fit's parts (prior regression, core
contrast, setting ids, aliased knobs, repeats merged, the FLOPs floor). The stand-in sweeps: ``model_sweeps.py``;
the model beyond its data: ``test_model.py``."""

from __future__ import annotations

import itertools
import sys
from dataclasses import FrozenInstanceError, replace

import numpy as np
import pandas as pd
import pytest
from jetpredict.models.catalogue import MODE_FIELDS, ModeArrays, load_device
from jetpredict.models.errors import InputError
from jetpredict.predictor.bundled import fit_workload
from jetpredict.predictor.bundled import predict_modes as predict_on
from jetpredict.predictor.constants import IntervalScales
from jetpredict.predictor.limits import DEFAULT_CONFIDENCE
from jetpredict.predictor.model import gpu_floor
from jetpredict.predictor.regime import core_contrast
from jetpredict.predictor.terms import PriorLinearRegression, ProfileArrays
from model_sweeps import REF, knobs, predict_modes, sweep


def test_cpu_bound_workload_gets_cpu_dominated_shape():
    model = fit_workload(sweep(9.0, 1.5, "efij"))
    fit = model.time_fits["compute"]
    # At MAXN clocks, the CPU term must carry most of the compute time for a launch-bound workload.
    cpu_s, gpu_s = fit.coef_of("cpu") / 2.2656, fit.coef_of("gpu") / 1.377
    assert cpu_s > 3 * gpu_s


def test_one_mode_scales_reference_and_more_modes_tighten():
    one = fit_workload(sweep(3.0, 100.0, "g"))
    p = predict_modes(one, ["g"])
    assert p.epoch_time_s[0] == pytest.approx(sweep(3.0, 100.0, "g").epoch_time_s[0], rel=0.02)
    four = fit_workload(sweep(3.0, 100.0, "efij"))
    w1, w4 = predict_modes(one, ["low"]), predict_modes(four, ["low"])
    width = {k: (v.epoch_time_s_high - v.epoch_time_s_low) / v.epoch_time_s for k, v in (("one", w1), ("four", w4))}
    assert width["four"][0] < 0.7 * width["one"][0]


def test_predictions_are_monotone_in_each_clock_and_intervals_ordered():
    model = fit_workload(sweep(5.0, 30.0, "efij"))
    gpu = np.array(load_device("agx-xavier").gpu_steps_mhz)
    p = model.predict(ModeArrays(8, 2265.6, gpu, 2133))
    assert np.all(np.diff(p.epoch_time_s) <= 1e-9)
    for key in ("epoch_time_s", "avg_power_w", "epoch_energy_j"):
        low, mid, high = (getattr(p, f"{key}{s}") for s in ("_low", "", "_high"))
        assert np.all(low < mid) and np.all(mid < high)
    assert np.all(p.base_power_w < p.avg_power_w)
    assert p.cross_device is False and p.power_source == "workload" and p.confidence == DEFAULT_CONFIDENCE


def test_confidence_sets_every_interval_and_is_checked():
    model = fit_workload(sweep(5.0, 30.0, "efij"))
    p90, p50, p99 = (predict_modes(model, ["a", "low"], c) for c in (0.9, 0.5, 0.99))
    for key in ("epoch_time_s", "avg_power_w", "epoch_energy_j"):
        half = {c: np.log(getattr(p, f"{key}_high") / getattr(p, key)) for c, p in ((90, p90), (50, p50), (99, p99))}
        # Normal quantiles: z(0.5) / z(0.9) = 0.674 / 1.645, z(0.99) / z(0.9) = 2.576 / 1.645.
        np.testing.assert_allclose(half[50] / half[90], 0.6745 / 1.6449, rtol=1e-3)
        np.testing.assert_allclose(half[99] / half[90], 2.5758 / 1.6449, rtol=1e-3)
        np.testing.assert_allclose(getattr(p50, key), getattr(p90, key))
    for bad in (0.0, 1.0, 1.5, -0.1, True, "0.9"):
        with pytest.raises(InputError) as e:
            model.predict(knobs(["a"]), bad)
        assert e.value.field == "confidence"


def test_fitted_model_and_prediction_are_frozen_values():
    model = fit_workload(sweep(3.0, 100.0, "efij"))
    with pytest.raises(FrozenInstanceError):
        model.workload_id = "other"  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        predict_modes(model, ["a"]).epoch_time_s = np.zeros(1)  # type: ignore[misc]


def test_rows_without_power_use_reference_power_model():
    model = fit_workload(sweep(3.0, 100.0, "efij", power=False, components=False))
    p = predict_modes(model, ["g", "a"])
    assert p.power_source == "reference" and not model.has_power
    assert np.all(p.avg_power_w > 3) and np.all(p.avg_power_w < 60)
    assert p.avg_power_w[0] > p.avg_power_w[1]  # MAXN draws more than mode a
    assert np.all(p.avg_power_w_low < p.avg_power_w) and np.all(p.avg_power_w < p.avg_power_w_high)


def test_time_is_monotone_in_gpu_and_emc_clocks_over_the_whole_range():
    """The roofline term keeps every clock's effect monotone, also at low EMC with a fast GPU."""
    dev = load_device("agx-xavier")
    model = fit_workload(REF[REF.workload == "resnet18-cifar10"])
    gpu, emc = np.meshgrid(np.array(dev.gpu_steps_mhz, float), np.array(dev.emc_steps_mhz, float))
    t = model.predict(ModeArrays(8, 2265.6, gpu.ravel(), emc.ravel())).epoch_time_s.reshape(gpu.shape)
    assert np.all(np.diff(t, axis=1) <= 1e-9) and np.all(np.diff(t, axis=0) <= 1e-9)


def test_flops_bound_the_gpu_term_from_below():
    """A heavy network's FLOPs at the GPU's FP32 peak bound its GPU time: with ``flops_train`` in the rows
    the GPU term cannot fall below it, and the bound is physics (100% of peak), not a tuned constant."""
    rows = sweep(9.0, 1.5, "efij")  # rows that alone read as CPU bound (GPU term ~2 s x GHz)
    dev = load_device("agx-xavier")
    # 5e8 FLOP per sample x 16 x 1000 minibatches at 512 cores x 2 FLOP x 1 GHz = 7.8 s x GHz: 8.7 s of
    # the 13.8 s epoch at mode e's 900 MHz GPU (the rows say ~2 s x GHz).
    heavy = rows.assign(flops_train=5e8)
    floor = gpu_floor(ProfileArrays.from_frame(heavy), dev)
    assert floor == pytest.approx(5e8 * 16 * 1000 / (512 * 2 * 1e9))
    assert gpu_floor(ProfileArrays.from_frame(rows), dev) == pytest.approx(0.0, abs=1e-12)
    assert gpu_floor(ProfileArrays.from_frame(rows.assign(flops_train=np.nan)), dev) == pytest.approx(0.0, abs=1e-12)
    model = fit_workload(heavy)
    assert model.time_fits["compute"].coef_of("gpu") >= floor - 1e-9
    assert model.complexity == {"flops_train": 5e8}
    free = fit_workload(rows)
    assert free.time_fits["compute"].coef_of("gpu") < floor
    # FLOPs that need longer than an epoch measured bound nothing (a fuzzed 1e170 FLOP per sample once
    # overflowed the fit): the fit goes on as without them.
    absurd = rows.assign(flops_train=1e170)
    assert gpu_floor(ProfileArrays.from_frame(absurd), dev) == 0.0
    assert fit_workload(absurd).time_fits["compute"].coef_of("gpu") == pytest.approx(
        free.time_fits["compute"].coef_of("gpu"))


def test_bad_input_is_named():
    rows = sweep(3.0, 100.0, "efij")
    mixed = pd.concat([rows, sweep(3.0, 100.0, "g", workload="other")])
    with pytest.raises(InputError) as e:
        fit_workload(mixed)
    assert e.value.field == "workload"
    with pytest.raises(InputError, match="host"):
        fit_workload(rows.assign(device="host"))
    with pytest.raises(InputError) as e:
        fit_workload(rows.assign(device="tx9"))
    assert e.value.field == "device"
    with pytest.raises(InputError) as e:
        fit_workload(rows.drop(columns=["gpu_mhz"]))
    assert e.value.field == "gpu_mhz"
    with pytest.raises(InputError):
        fit_workload(rows.iloc[0:0])
    with pytest.raises(InputError) as e:
        fit_workload(rows, device=load_device("nano"))
    assert e.value.field == "device"
    model = fit_workload(rows)
    with pytest.raises(InputError) as e:
        model.predict(ModeArrays(8, 2265.6, 5000.0, 2133))
    assert e.value.field == "gpu_mhz"


@pytest.mark.parametrize("column,value", [("epoch_time_s", 5e-324), ("epoch_time_s", 1e308),
                                          ("gpu_mhz", 5e-324), ("cpu_cores", 64)])
def test_rows_outside_what_a_fit_can_use_are_named(column, value):
    rows = sweep(3.0, 100.0, "efij").astype({column: float})
    rows.loc[1, column] = value
    with pytest.raises(InputError) as e:
        fit_workload(rows)
    assert e.value.field == column


def test_prior_regression_is_nonnegative_and_fades_with_data():
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 2.0, size=(40, 3))
    y = x @ np.array([2.0, 0.0, 1.0])
    est = PriorLinearRegression(prior_mean=[1.0, 1.0, 1.0], prior_sd=[0.5, 0.5, 0.5], noise_rel=0.01)
    est.fit(x, y)
    assert np.all(est.coef_ >= 0)
    np.testing.assert_allclose(est.coef_, [2.0, 0.0, 1.0], atol=0.02)
    mean, sd = est.predict(x[:3], return_std=True)
    assert mean.shape == (3,) and np.all(sd >= 0)


def test_interval_scales_set_the_width_of_each_quantity_separately():
    model = fit_workload(sweep(9.0, 1.5, "efij"))
    wide = replace(model, interval_scales=IntervalScales(1.0, 1.0, 1.0))
    narrow = replace(model, interval_scales=IntervalScales(1.0, 1.0, 0.5))
    a, b = predict_modes(wide, ["a", "low"]), predict_modes(narrow, ["a", "low"])
    ratio = np.log(b.epoch_energy_j_high / b.epoch_energy_j) / np.log(a.epoch_energy_j_high / a.epoch_energy_j)
    # The scale shrinks the model's own uncertainty; the run-to-run noise part stays, so not all the way.
    assert np.all(ratio < 0.95) and np.all(ratio > 0.5)
    noise = np.hypot(0.04, 0.03)  # power and epoch-time noise floors
    assert np.all(np.log(b.epoch_energy_j_high / b.epoch_energy_j) >= 1.6449 * noise - 1e-9)
    np.testing.assert_allclose(a.epoch_time_s_high, b.epoch_time_s_high)  # time untouched
    np.testing.assert_allclose(a.epoch_energy_j, b.epoch_energy_j)  # only the interval moves


def test_cross_device_prediction_goes_through_the_bundled_layer():
    model = fit_workload(sweep(3.0, 100.0, "efij"))
    nx = load_device("xavier-nx")
    moved = predict_on(model, ModeArrays(*nx.maxn.knobs()), nx)
    # e,f,i,j span CPU 93-100% and EMC 62-75% of AGX Xavier's tops; NX's MAXN sits at 75% and 100% of its own.
    assert moved.cross_device and moved.extrapolated_knobs() == ["cpu_mhz;emc_mhz"]
    assert moved.epoch_time_s_high[0] > moved.epoch_time_s[0]
    assert predict_on(model, knobs(["a"])).epoch_time_s == pytest.approx(predict_modes(model, ["a"]).epoch_time_s)


def _pairwise_contrast(modes: ModeArrays, ln_t: np.ndarray) -> float | None:
    """The definition, pair by pair over distinct modes (quadratic: small inputs only)."""
    keys = sorted({tuple(np.round(k, 6)) for k in np.column_stack(modes.arrays())})
    mean = {k: float(np.mean([v for row, v in zip(np.column_stack(modes.arrays()), ln_t, strict=True)
                              if tuple(np.round(row, 6)) == k])) for k in keys}
    diffs = [mean[a] - mean[b] for a in keys for b in keys if a[0] < b[0] and a[1:] == b[1:]]
    return float(np.mean(diffs)) if diffs else None


def test_core_contrast_merges_repeated_modes_and_pairs_only_equal_clocks():
    rng = np.random.default_rng(3)
    cores = rng.choice([2.0, 4.0, 8.0], 60)
    cpu = rng.choice([1200.0, 2265.6], 60)
    modes = ModeArrays(cores, cpu, rng.choice([670.0, 1377.0], 60), 1600.0)
    ln_t = rng.normal(0.0, 0.3, 60)
    assert core_contrast(modes, ln_t) == pytest.approx(_pairwise_contrast(modes, ln_t), rel=1e-12)
    # No pair of modes at equal clocks with other cores: no contrast.
    assert core_contrast(ModeArrays(8.0, [1200.0, 2265.6], 670.0, 1600.0), np.zeros(2)) is None


def test_setting_ids_treat_a_catalogue_step_and_its_nvpmodel_cap_as_one_clock():
    modes = ModeArrays([8, 8, 4, 8], [2265.6, 2265.0, 2265.6, 2188.8], 1377.0, 2133.0)
    mode_id, clock_id = modes.setting_ids()
    assert mode_id[0] == mode_id[1] != mode_id[2]
    assert clock_id[0] == clock_id[1] == clock_id[2] != clock_id[3]
    assert modes.distinct_count() == 3


def test_aliased_knobs_and_the_widening_they_cost_are_reported():
    """e, f, i, j move the CPU and GPU clocks together: the fit says so, and
    modes outside the profiled ranges have intervals wider by a stated factor (1 inside)."""
    efij = REF[(REF.workload == "lenet5-mnist") & REF["mode"].isin(list("efij"))]
    model = fit_workload(efij)
    aliased = model.aliased_knobs()
    assert aliased == {"cpu_mhz": "moves with gpu_mhz", "gpu_mhz": "moves with cpu_mhz"}
    one_mode = fit_workload(efij[efij["mode"] == "g"] if (efij["mode"] == "g").any() else efij.iloc[:1])
    assert set(one_mode.aliased_knobs()) == set(MODE_FIELDS)
    assert all(why == "not varied" for why in one_mode.aliased_knobs().values())
    widening = model.extrapolation_widening(knobs(["e", "a", "h"]))
    assert widening[0] == pytest.approx(1.0) and widening[1] > 1.3 and widening[2] > 1.0


def test_repeats_of_a_mode_are_one_modes_evidence_their_measurements_averaged():
    """Five copies of four rows predicted with intervals 0.90x (down to 0.43x) as wide as the four alone: a
    repeat averages run-to-run noise out, not the model's error. Repeats that differ count as their mean."""
    lenet = REF[(REF.workload == "lenet5-mnist") & REF["mode"].isin(list("efij"))].reset_index(drop=True)
    modes = ModeArrays.from_modes(load_device("agx-xavier").presets)
    once = predict_on(fit_workload(lenet), modes)
    five = fit_workload(pd.concat([lenet] * 5, ignore_index=True))
    assert five.profiled_modes == 4 and len(five.training_rows) == 20
    assert predict_on(five, modes).epoch_time_s_high == pytest.approx(once.epoch_time_s_high, rel=1e-9)
    apart = lenet.copy()
    apart["epoch_time_s"] *= 1.1
    apart["epoch_energy_j"] *= 1.1
    both = pd.concat([lenet, apart], ignore_index=True)
    merged = ProfileArrays.from_frame(both).merged_repeats(both.batch_size.to_numpy(float))
    assert list(merged.epoch_time_s) == pytest.approx(list(lenet.epoch_time_s * 1.05))
    assert list(merged.modes.gpu_mhz) == list(lenet.gpu_mhz) and len(merged) == 4
    # Twice the batch over half the minibatches: the same samples per epoch, another run, not a repeat.
    other = apart.assign(batch_size=2 * apart.batch_size, minibatches_per_epoch=apart.minibatches_per_epoch / 2)
    runs = pd.concat([lenet, other], ignore_index=True)
    assert len(ProfileArrays.from_frame(runs).merged_repeats(runs.batch_size.to_numpy(float))) == 8


def _repeated_grid_rows(n_modes: int) -> pd.DataFrame:
    """Rows at ``n_modes`` distinct (GPU, CPU) clock settings of AGX Xavier, each profiled twice."""
    device = load_device("agx-xavier")
    template = sweep(5.0, 30.0, "g").iloc[0].to_dict()
    rows = []
    for gpu, cpu in list(itertools.product(device.gpu_steps_mhz, device.cpu_steps_mhz))[:n_modes]:
        t = 5.0 * 2265.6 / cpu + 30.0 * 1377 / gpu + 1.3
        rows += [dict(template, mode="custom", gpu_mhz=gpu, cpu_mhz=cpu, epoch_time_s=t, compute_time_s=t - 1.3,
                      stall_time_s=1.0, epoch_energy_j=template["avg_power_w"] * t)] * 2
    return pd.DataFrame(rows)


def _lines_run(rows: pd.DataFrame) -> int:
    """Python lines executed by one fit of ``rows`` (numpy's work is not counted: it is linear by construction)."""
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        count += event == "line"
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        model = fit_workload(rows)
    finally:
        sys.settrace(previous)
    assert model.profiled_modes == len(rows) // 2
    return count


def test_the_fits_python_work_grows_no_faster_than_its_rows():
    """A fit is linear in its rows (a 100,000-row workload is fitted on every upload): 8x the rows, each
    mode repeated, runs under 8x the Python lines (3.3x measured). Kills a repeat merge that loops over
    the rows once per merged mode (quadratic: 47x here)."""
    _lines_run(_repeated_grid_rows(50))  # warm: the bundled reference is built once
    small, large = _lines_run(_repeated_grid_rows(50)), _lines_run(_repeated_grid_rows(400))
    assert large < 8 * small, (small, large)
