"""The few-shot workload model: fit, predict, regimes, intervals, bad input."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, replace

import numpy as np
import pandas as pd
import pytest
from jetpredict.models.catalogue import MODE_FIELDS, ModeArrays, load_device
from jetpredict.models.errors import InputError
from jetpredict.models.profile_files import read_profile_csv
from jetpredict.predictor.bundled import fit_workload, load_model, save_model
from jetpredict.predictor.bundled import predict_modes as predict_on
from jetpredict.predictor.constants import MEASURED_KAPPAS, REGIME_FACTOR_MAX, IntervalScales
from jetpredict.predictor.features import time_features
from jetpredict.predictor.model import Prediction, WorkloadModel, gpu_floor
from jetpredict.predictor.reference import REFERENCE_DIR, build_reference
from jetpredict.predictor.regime import core_contrast, regime_factor, regime_kappas, regime_weights
from jetpredict.predictor.serialization import model_from_dict, model_to_dict
from jetpredict.predictor.terms import PriorLinearRegression, ProfileArrays

REF = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")
#: The two real GPU-bound workloads alone (the bundled reference also holds the CPU-bound LeNet-5): a
#: reference that a light-pipeline workload lies outside of.
GPU_BOUND_REF = build_reference(REF[REF.workload != "lenet5-mnist"].reset_index(drop=True), "agx-xavier")
MODES = {"a": (4, 1200, 670, 1333), "b": (8, 1200, 670, 1333), "c": (8, 1200, 900, 1333),
         "d": (8, 1200, 900, 1600), "e": (8, 2100, 900, 1600), "f": (2, 2100, 900, 1600),
         "g": (8, 2265, 1377, 2133), "h": (8, 2265, 1377, 1066), "i": (8, 2265, 1377, 1333),
         "j": (8, 2265, 1377, 1600), "low": (8, 1036.8, 420.75, 1600), "low2": (4, 960, 420.75, 1331.2)}


def fv2(f, f_max):
    """Dynamic power f V^2 relative to the top clock, V rising as a power law (not the model's curve)."""
    r = f / f_max
    return r * (0.55 + 0.45 * r ** 1.5) ** 2


def sweep(cpu_ms: float, gpu_ms: float, modes, workload="w", power=True, components=True, stall_ms=1.0,
          contention=(0.8, 1.0)) -> pd.DataFrame:
    """Rows of a workload whose minibatch is CPU launch work + GPU work + data-pipeline stall (ms at the
    top clocks); ``contention``: how much the launch and stall work slow down on fewer cores than threads."""
    rows = []
    for m in modes:
        c, cpu, gpu, emc = MODES[m]
        launch = cpu_ms * 2265.6 / cpu * (1 + contention[0] * max(0, 5 - c) / c)
        kernels = gpu_ms * 1377 / gpu + 0.2 * gpu_ms * 2133 / emc
        stall = stall_ms * 2265.6 / cpu * (1 + contention[1] * max(0, 5 - c) / c)
        t = 1000 * (launch + kernels + stall + 0.3) / 1e3
        base = 3.5 + 2.5 * fv2(emc, 2133) + 0.8 * fv2(gpu, 1377) + 0.5 * c / 8 * fv2(cpu, 2265.6)
        busy = kernels / (launch + kernels + stall)
        p = base + 10 * busy * fv2(gpu, 1377) + 3 * busy * fv2(emc, 2133) + 1.2 * min(c, 5) * fv2(cpu, 2265.6)
        rows.append(dict(device="agx-xavier", workload=workload, mode=m, cpu_cores=c, cpu_mhz=cpu, gpu_mhz=gpu,
                         emc_mhz=emc, num_workers=4, batch_size=16, minibatches_per_epoch=1000, epoch_time_s=t,
                         stall_time_s=stall if components else np.nan,
                         compute_time_s=(launch + kernels) if components else np.nan,
                         avg_power_w=p if power else np.nan, epoch_energy_j=p * t if power else np.nan,
                         base_power_w=base if power else np.nan, source="simulated: test"))
    return pd.DataFrame(rows)


def knobs(modes) -> ModeArrays:
    k = np.array([MODES[m] for m in modes], dtype=float)
    return ModeArrays(k[:, 0], k[:, 1], k[:, 2], k[:, 3])


def predict_modes(model: WorkloadModel, modes, confidence: float = 0.9) -> Prediction:
    return model.predict(knobs(modes), confidence)


def mape(pred, true):
    return float(np.mean(np.abs(np.asarray(pred) - np.asarray(true)) / np.asarray(true)))


#: Synthetic-mechanism tolerances, a little above what the model measures on them now (so a regression
#: fails): (regime, output) -> MAPE bound. Measured (mech-13): CPU-bound 6.6% time / 4.8% energy, GPU-bound
#: 2.1% / 2.2%, launch-bound (max(launch, kernels) per step: a form the model does not have) 7.0% power /
#: 12.9% energy (mech-12: 6.4, 1.9, 5.9 and 11.5%: the stand-ins' idle CPU draws cores x f V^2, the single
#: term mech-13 split in two). mech-7 had 1.9 / 4.6, 1.3 / 1.8 and 4.5 / 11.9%: these stand-ins have no
#: memory-bound CPU work, which the real sweeps (all three) show and mech-8's CPU-side roofline describes, so
#: the CPU-bound one fits worse. Behaviour checks on stand-ins, not accuracy claims (those are real-data only).
TOL = {(9.0, "time"): 0.072, (9.0, "energy"): 0.055, (3.0, "time"): 0.022, (3.0, "energy"): 0.025,
       ("launch", "power"): 0.075, ("launch", "energy"): 0.135}


@pytest.mark.parametrize("cpu_ms,gpu_ms", [(9.0, 1.5), (3.0, 100.0)])
def test_recognises_regime_from_own_rows_and_extrapolates_below_range(cpu_ms, gpu_ms):
    # Synthetic mechanism (not the model's own form: power law voltage, launch + kernel sum): a behaviour
    # check of regime recognition, not an accuracy claim.
    model = fit_workload(sweep(cpu_ms, gpu_ms, "efij"))
    test_modes = ["a", "b", "c", "d", "g", "h", "low", "low2"]
    truth = sweep(cpu_ms, gpu_ms, test_modes)
    p = predict_modes(model, test_modes)
    assert mape(p.epoch_time_s, truth.epoch_time_s) < TOL[(cpu_ms, "time")]
    assert mape(p.epoch_energy_j, truth.epoch_energy_j) < TOL[(cpu_ms, "energy")]


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
    assert p.cross_device is False and p.power_source == "workload" and p.confidence == 0.9


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


def test_modes_outside_the_profiled_ranges_are_flagged_per_knob():
    model = fit_workload(sweep(3.0, 100.0, "efij"))
    assert model.profiled_ranges["gpu_mhz"] == (900.0, 1377.0)
    p = predict_modes(model, ["e", "j", "a", "g", "low"])
    assert p.extrapolated_knobs() == ["", "", "cpu_mhz;gpu_mhz", "emc_mhz", "cpu_mhz;gpu_mhz"]
    assert p.extrapolated.tolist() == [False, False, True, True, True]
    assert p.outside.shape == (5, 4) and p.outside[2, MODE_FIELDS.index("cpu_cores")] == np.False_
    # nvpmodel caps a fraction of a percent off the profiled steps (2265 vs 2265.6 MHz) are not outside.
    assert not model.predict(ModeArrays(8, 2265.0, 1377, 1600)).extrapolated[0]
    sub = p.take(np.array([2, 0]))
    assert sub.extrapolated_knobs() == ["cpu_mhz;gpu_mhz", ""] and len(sub) == 2
    cols = p.columns()
    assert cols["extrapolated_knobs"][3] == "emc_mhz" and cols["confidence"] == 0.9
    assert set(Prediction.ARRAYS) <= set(cols)


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


def real_loo(target: str, design: str = "efij"):
    ref = REF[REF.workload != target]
    new = REF[REF.workload == target]
    model = fit_workload(new[new["mode"].isin(list(design))], reference=ref)
    test = new[~new["mode"].isin(list(design))]
    return model, test, model.predict(ModeArrays.from_frame(test))


@pytest.mark.parametrize("target,time_mape,energy_mape,coverage,width", [
    # Measured (mech-14; real, POMACS 2022 Fig 9 sweeps, profiled at e,f,i,j, scored on a,b,c,d,g,h; the
    # other two real workloads as reference; bench/results/real_cv.md, mech-15): time / energy MAPE 1.5 / 1.3%
    # (ResNet-18), 3.5 / 3.3% (MobileNetV3), 4.5 / 8.5% (LeNet-5; mech-13: 4.7 / 6.3%, its time errors at CPU
    # 1200 MHz offsetting its power errors there; mech-7: 16.0 / 24.8%); time coverage 6/6 each; median
    # width 13%, 13%, 31%.
    ("resnet18-cifar10", 0.018, 0.015, 1.0, 0.15), ("mobilenetv3-gld23k", 0.041, 0.038, 1.0, 0.16),
    ("lenet5-mnist", 0.052, 0.092, 1.0, 0.36)])
def test_real_leave_one_workload_out(target, time_mape, energy_mape, coverage, width):
    model, test, p = real_loo(target)
    assert model.reference_source == "published"
    assert mape(p.epoch_time_s, test.epoch_time_s) < time_mape
    assert mape(p.epoch_energy_j, test.epoch_energy_j) < energy_mape
    t = test.epoch_time_s.to_numpy()
    assert np.mean((p.epoch_time_s_low <= t) & (t <= p.epoch_time_s_high)) >= coverage
    assert np.median((p.epoch_time_s_high - p.epoch_time_s_low) / p.epoch_time_s) < width


def test_power_intervals_have_a_floor_in_watts_and_energy_cancels_the_rate_share():
    """Real LeNet-5 (6-11 W) and ResNet-18 (12-31 W) at e,f,i,j: a new power reading never assumes less
    than POWER_NOISE_FLOOR_W, which binds for the low-power network only; the power drawn per minibatch
    carries the time error into power and cancels it in energy (no wider than the two added)."""
    from jetpredict.predictor.constants import POWER_NOISE_FLOOR, POWER_NOISE_FLOOR_W

    floors = {}
    for target in ("lenet5-mnist", "resnet18-cifar10"):
        model, test, p = real_loo(target)
        modes = ModeArrays.from_frame(test)
        t, pw, _ = model.parts(modes)
        assert np.all(pw.rel_sd_noise >= POWER_NOISE_FLOOR_W / pw.power_w - 1e-12)
        assert np.all((pw.rate_share > 0) & (pw.rate_share < 1))
        sds = model.relative_sds(t, pw)
        assert np.all(sds["energy"][0] <= np.hypot(t.rel_sd_model, pw.rel_sd_model) + 1e-12)
        assert np.all(sds["power"][0] >= pw.rel_sd_model)
        floors[target] = pw.rel_sd_noise
    # LeNet-5's held-out a, b, c draw 6.3-6.7 W: 0.35 W is 5.3-5.6% there, above the 5% relative floor; its
    # d, g and h (7-12 W) and every ResNet-18 mode (12-31 W) keep the relative floor.
    assert np.sum(floors["lenet5-mnist"] > POWER_NOISE_FLOOR + 1e-9) == 3
    assert np.allclose(floors["resnet18-cifar10"], POWER_NOISE_FLOOR)


def test_real_cpu_clock_below_the_profiled_range_moves_a_gpu_heavy_network_little():
    """Issue 11: a hidden-CPU-work variant raised a GPU-heavy CNN's predictions at CPU 1200 MHz by ~17%
    where the measured change is < 1%. Real: ResNet-18 d (CPU 1200) vs e (CPU 2100), same GPU/EMC: 509.8 s
    vs 491.7 s (+3.7%). Profiled at e,f,i,j the model must not invent more than that."""
    model, _, _ = real_loo("resnet18-cifar10")
    p = predict_modes(model, ["d", "e"])
    assert p.epoch_time_s[0] / p.epoch_time_s[1] == pytest.approx(509.8 / 491.7, abs=0.02)


@pytest.mark.parametrize("reference", ["leave-one-workload-out", "bundled"])
def test_real_fact_below_the_reference_clock_range(reference):
    """POMACS 2022 §5.6: ResNet-18 on AGX Xavier, MAXN against the GPU at 114.75 MHz (5.8x below the lowest
    reference GPU clock): speed-up 10.3x, power ratio 3.6x (31 W vs ~8.6 W). Validation only: nothing is
    fitted to this point; measured 9.6x / 3.4x / 0.35 (bundled)."""
    res = REF[REF.workload == "resnet18-cifar10"]
    ref = build_reference(REF[REF.workload != "resnet18-cifar10"]) if reference != "bundled" else None
    model = fit_workload(res[res["mode"].isin(list("efij"))], reference=ref)
    p = model.predict(ModeArrays(8, 2265.6, [1377, 114.75], 2133))
    speed_up = p.epoch_time_s[1] / p.epoch_time_s[0]
    assert speed_up == pytest.approx(10.3, rel=0.1)
    assert p.avg_power_w[0] / p.avg_power_w[1] == pytest.approx(3.6, rel=0.1)
    assert p.epoch_energy_j[0] / p.epoch_energy_j[1] == pytest.approx(3.6 / 10.3, rel=0.1)
    # The fact lies inside the 90% interval of the far-extrapolated mode.
    assert p.epoch_time_s_low[1] <= 10.3 * p.epoch_time_s[0] <= p.epoch_time_s_high[1]
    # The slow GPU hides the memory clock: at 114.75 MHz halving EMC barely moves the epoch (<5%), while
    # at MAXN the published modes h vs g show a 35% step.
    q = model.predict(ModeArrays(8, 2265.6, 114.75, [2133, 1066]))
    assert q.epoch_time_s[1] / q.epoch_time_s[0] < 1.05


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


def test_intervals_widen_outside_the_profiled_ranges_by_the_knobs_share():
    # GPU-bound: a mode with the GPU below the profiled range widens, one with the CPU below it hardly.
    gpu_bound = fit_workload(sweep(3.0, 100.0, "efij"))
    modes = knobs(["e", "low", "c"])
    t = gpu_bound._time(modes, gpu_bound._knob_distances(modes))
    assert t.extrapolation[0] == pytest.approx(0.0, abs=1e-12)  # a profiled mode
    assert t.extrapolation[1] > 0.5  # GPU at 420 MHz: 0.76 ln-units below, nearly all GPU time
    assert t.extrapolation[2] < 0.2  # CPU at 1200 MHz moves little of a GPU-bound epoch
    p = gpu_bound.predict(modes)
    width = (p.epoch_time_s_high - p.epoch_time_s_low) / p.epoch_time_s
    assert width[1] > width[0] * 1.5
    # CPU-bound: the CPU below its profiled range is what widens.
    cpu_bound = fit_workload(sweep(9.0, 1.5, "efij"))
    c = knobs(["c"])
    assert cpu_bound._time(c, cpu_bound._knob_distances(c)).extrapolation[0] > 0.3
    # Without profiled ranges (a cross-device model) there is no widening, but a valid interval.
    flat = replace(gpu_bound, profiled_ranges=None).predict(modes)
    np.testing.assert_allclose(flat.epoch_time_s, p.epoch_time_s)
    assert flat.epoch_time_s_high[1] < p.epoch_time_s_high[1] and not flat.extrapolated.any()


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


def launch_bound_rows(modes) -> pd.DataFrame:
    """A LeNet-class workload: the main thread issues kernels that the GPU runs in parallel (max overlap),
    so at a slow CPU the GPU waits and its busy share (and power) falls while the compute time grows."""
    rows = []
    for m in modes:
        c, cpu, gpu, emc = MODES[m]
        launch_ms = 6.0 * 2265.6 / cpu * (1 + 0.8 * max(0, 5 - c) / c)
        kernels_ms = 4.0 + 1.5 * 1377 / gpu
        compute_ms = max(launch_ms, kernels_ms) + 0.3
        stall_ms = 3.0 * 2265.6 / cpu
        total_ms = compute_ms + stall_ms
        gpu_util = kernels_ms / total_ms
        base = 3.5 + 2.5 * fv2(emc, 2133) + 0.8 * fv2(gpu, 1377) + 0.5 * c / 8 * fv2(cpu, 2265.6)
        p = base + 12 * gpu_util * fv2(gpu, 1377) + 4 * gpu_util * fv2(emc, 2133) + 0.3 * min(c, 5) * fv2(
            cpu, 2265.6)
        t = total_ms * 3.75
        rows.append(dict(device="agx-xavier", workload="launch-bound", mode=m, cpu_cores=c, cpu_mhz=cpu,
                         gpu_mhz=gpu, emc_mhz=emc, num_workers=4, batch_size=16, minibatches_per_epoch=3750,
                         epoch_time_s=t, stall_time_s=stall_ms * 3.75, compute_time_s=compute_ms * 3.75,
                         avg_power_w=p, epoch_energy_j=p * t, base_power_w=base, source="simulated: test"))
    return pd.DataFrame(rows)


def test_gpu_power_of_a_launch_bound_workload_falls_with_the_cpu_clock():
    model = fit_workload(launch_bound_rows("efij"))
    test_modes = ["a", "b", "c", "d", "low", "low2"]
    truth = launch_bound_rows(test_modes)
    modes = ModeArrays.from_frame(truth)
    t = model._time(modes)
    active = model._gpu_active(t)
    # The GPU waits on a slow main thread: its busy share drops below the compute share at low CPU clocks.
    assert np.all(active < 0.9 * t.compute_s / t.epoch_s)
    top = model._time(knobs(["j"]))
    assert model._gpu_active(top)[0] == pytest.approx(top.compute_s[0] / top.epoch_s[0], rel=0.01)
    p = model.predict(modes)
    assert mape(p.avg_power_w, truth.avg_power_w) < TOL[("launch", "power")]
    assert mape(p.epoch_energy_j, truth.epoch_energy_j) < TOL[("launch", "energy")]


def test_a_knob_the_profiled_modes_did_not_vary_gets_an_uncertain_effect():
    """Identifiability (issue 11): profiled at d,e,f,j the memory clock never moves (1600 MHz), so its
    effect elsewhere rests on the prior and the term's form; the interval at another memory clock is wider
    than that of a design that varied it (e,f,i,j), and the mode is flagged. Real ResNet-18 rows."""
    res = REF[REF.workload == "resnet18-cifar10"]
    ref = build_reference(REF[REF.workload != "resnet18-cifar10"])
    flat = fit_workload(res[res["mode"].isin(list("defj"))], reference=ref)
    varied = fit_workload(res[res["mode"].isin(list("efij"))], reference=ref)
    assert flat.profiled_ranges["emc_mhz"] == (1600.0, 1600.0)
    h = knobs(["h"])  # 8 / 2265 / 1377 / 1066: memory clock far below what either design profiled
    a, b = flat.predict(h), varied.predict(h)
    assert a.extrapolated_knobs() == ["emc_mhz"] and b.extrapolated_knobs() == ["emc_mhz"]
    width = {k: float((p.epoch_time_s_high - p.epoch_time_s_low)[0] / p.epoch_time_s[0]) for k, p in
             (("flat", a), ("varied", b))}
    # Measured 15.3% vs 12.2% (real flat-design error at h: -2.6%): the interval scales calibrated on the
    # real designs shrink the posterior part, the unvaried knob still widens it by a fifth or more.
    assert width["flat"] > 1.2 * width["varied"]
    assert a.epoch_time_s_low[0] <= 466.2 <= a.epoch_time_s_high[0]  # the real h row is covered


@pytest.mark.parametrize("column,value", [("epoch_time_s", 5e-324), ("epoch_time_s", 1e308),
                                          ("gpu_mhz", 5e-324), ("cpu_cores", 64)])
def test_rows_outside_what_a_fit_can_use_are_named(column, value):
    rows = sweep(3.0, 100.0, "efij").astype({column: float})
    rows.loc[1, column] = value
    with pytest.raises(InputError) as e:
        fit_workload(rows)
    assert e.value.field == column


def test_the_rows_decide_their_regime_under_a_reference_of_the_opposite_one():
    """Issue 11 point 2 on real rows: MobileNetV3 profiled at e,f,i,j with only the twin's CPU-bound LeNet-5
    sweep as reference. Measured rows take real hardware's contention constants (not the twin's), weigh by
    their measurement noise (not the twin's model misfit) and read their unvaried CPU-clock direction
    through physics: 4.6% time MAPE on the six other real modes (mech-14, as `bench/real_cv.py`'s e,f,i,j row
    under the opposite regime prints; 17.4% before the rows decided their regime)."""
    twin = read_profile_csv(REFERENCE_DIR / "agx-xavier-simulated.csv")
    lenet = build_reference(twin[twin["workload"] == "lenet5-mnist"].reset_index(drop=True), "agx-xavier")
    rows = REF[REF.workload == "mobilenetv3-gld23k"]
    model = fit_workload(rows[rows["mode"].isin(list("efij"))], reference=lenet)
    assert (model.kappa_cpu, model.kappa_pipe) == MEASURED_KAPPAS != lenet.kappas
    test = rows[~rows["mode"].isin(list("efij"))]
    p = model.predict(ModeArrays.from_frame(test))
    assert mape(p.epoch_time_s, test.epoch_time_s) < 0.05
    # Twin rows keep the twin's own constants under a twin reference.
    sim = twin[twin["workload"] == "vgg11-cifar10"].head(4)
    assert fit_workload(sim, reference=lenet).kappa_cpu == lenet.kappa_cpu


#: A CPU-bound workload with a light data pipeline (its workers idle most of the time, so fewer cores barely
#: slow it) and a large stall share: unlike both real references (stall ~4%, strong contention).
LIGHT = dict(cpu_ms=6.0, gpu_ms=1.0, stall_ms=3.0, contention=(0.1, 0.1))


def test_rows_that_measure_their_own_contention_override_the_references():
    """Issue 11 point 2: the measured stall of rows that differ only in cores is the pipeline's contention
    ratio. Under the reference's constants (strong, real) a light pipeline's small core contrast reads as
    "no CPU work" and its CPU time as clock-independent, which misses the modes at CPU 1200 MHz."""
    ref = GPU_BOUND_REF
    own = fit_workload(sweep(**LIGHT, modes="efij"), reference=ref)
    blind = fit_workload(sweep(**LIGHT, modes="efij", components=False), reference=ref)  # no stall: cannot tell
    assert own.kappa_pipe < 0.5 * ref.kappa_pipe and (blind.kappa_cpu, blind.kappa_pipe) == ref.kappas
    truth = sweep(**LIGHT, modes="abcd")
    err_own = mape(predict_modes(own, "abcd").epoch_time_s, truth.epoch_time_s)
    err_blind = mape(predict_modes(blind, "abcd").epoch_time_s, truth.epoch_time_s)
    assert err_own < 0.5 * err_blind
    # No two rows differ only in cores (the plan's g,h,f,b): the stall fit over all rows still measures it.
    planned = fit_workload(sweep(**LIGHT, modes="ghfb"), reference=ref)
    assert planned.kappa_pipe < 0.5 * ref.kappa_pipe
    # A small stall (GPU-bound network, ~1% of the epoch) does not overrule the reference, however weakly
    # it moves with the cores: its ratio says little, and the compute's core contrast keeps the CPU term.
    heavy_rows = sweep(3.0, 100.0, "efij", contention=(0.1, 0.1))
    heavy = fit_workload(heavy_rows, reference=ref)
    # ... it keeps the constants of the reference workloads its split resembles (the GPU-bound two).
    like = regime_kappas(regime_weights(ProfileArrays.from_frame(heavy_rows), ref), ref)
    assert (heavy.kappa_cpu, heavy.kappa_pipe) == like
    assert min(k[0] for k in ref.workload_kappas.values()) <= like[0] <= max(k[0] for k in ref.workload_kappas.values())
    # Real rows whose stall agrees with the reference within the real spread keep its constants.
    res = REF[REF.workload == "resnet18-cifar10"]
    efij = res[res["mode"].isin(list("efij"))]
    own_ref = regime_kappas(regime_weights(ProfileArrays.from_frame(efij), ref), ref)
    assert (lambda m: (m.kappa_cpu, m.kappa_pipe))(fit_workload(efij, reference=ref)) == own_ref


def test_a_heavy_pipeline_measures_the_main_threads_contention_and_predicts_at_it(tmp_path):
    """Issue 18: real LeNet-5's compute slows 15% from 8 to 4 cores and 36% from 8 to 2, less than its
    stall (22%, 119%) and than the GPU-bound references' constant says. The rows that measure their own
    pipeline contention measure the main thread's too, below the references' when the compute says so, and
    the fit at those constants is the estimate: a flat average over the contention variants leant toward the
    weakest one, which misses the 2-core mode f by 19%. Leave one mode out over the ten modes (mech-14):
    2.55% time MAPE (mech-13: 3.24%), 4.47% energy."""
    lenet = REF[REF.workload == "lenet5-mnist"].reset_index(drop=True)
    model = fit_workload(lenet, reference=GPU_BOUND_REF)
    assert model.contention_measured
    assert model.kappa_cpu < min(model.kappa_pipe, GPU_BOUND_REF.kappa_cpu)
    modes = ModeArrays.from_frame(lenet)
    feats = time_features(modes, model.num_workers, model.kappa_cpu, model.kappa_pipe)
    central = sum(fit.mean(feats) for fit in model.time_fits.values())
    np.testing.assert_allclose(model.predict(modes).epoch_time_s, central)
    # A saved model predicts as it did; files written before mech-14 (no flag) averaged over the variants.
    path = tmp_path / "lenet.json"
    save_model(model, path)
    assert load_model(path).contention_measured
    np.testing.assert_allclose(load_model(path).predict(modes).epoch_time_s, central)
    averaged = replace(model, contention_measured=False).predict(modes).epoch_time_s
    assert np.max(np.abs(averaged / central - 1.0)) > 0.02
    older = {k: v for k, v in model_to_dict(model).items() if k != "contention_measured"}
    np.testing.assert_allclose(model_from_dict(older).predict(modes).epoch_time_s, averaged)
    # Rows like the references keep the borrowed constants and the average over their plausible range.
    res = REF[REF.workload == "resnet18-cifar10"]
    assert not fit_workload(res[res["mode"].isin(list("efij"))], reference=GPU_BOUND_REF).contention_measured
    errors, energy_errors = [], []
    for i in range(len(lenet)):
        held_out = fit_workload(lenet.drop(index=i), reference=GPU_BOUND_REF).predict(modes.take(np.array([i])))
        errors.append(abs(held_out.epoch_time_s[0] / lenet.epoch_time_s[i] - 1.0))
        energy_errors.append(abs(held_out.epoch_energy_j[0] / lenet.epoch_energy_j[i] - 1.0))
    assert np.mean(errors) < 0.028
    assert np.mean(energy_errors) < 0.049  # measured 4.47% (bench/real_cv.py's leave-one-mode-out)


def test_a_workload_outside_the_references_regime_gets_wider_extrapolation(tmp_path):
    """Issue 11 point 4: interval scales calibrated on workloads like the references do not apply to one
    whose stall share / CPU share lies far outside theirs: outside the profiled ranges its intervals widen;
    inside them, and for a real workload like the references, nothing changes."""
    light = fit_workload(sweep(**LIGHT, modes="efij"), reference=GPU_BOUND_REF)
    res = REF[REF.workload == "resnet18-cifar10"]
    like = fit_workload(res[res["mode"].isin(list("efij"))], reference=GPU_BOUND_REF)
    assert like.interval_scales.extrapolation == 1.0
    assert 1.0 < light.interval_scales.extrapolation <= REGIME_FACTOR_MAX
    # The same model without the widening (its scales as they apply out of regime, in_regime).
    plain = replace(light, interval_scales=replace(light.interval_scales.in_regime(), extrapolation=1.0))

    def width(model, modes):
        p = predict_modes(model, modes)
        return (p.epoch_time_s_high - p.epoch_time_s_low) / p.epoch_time_s

    assert np.all(width(light, "ab") > 1.05 * width(plain, "ab"))  # CPU clock 1200: outside 2100-2265
    assert width(light, "e") == pytest.approx(width(plain, "e"))
    truth = sweep(**LIGHT, modes="abcd").epoch_time_s.to_numpy()
    p = predict_modes(light, "abcd")
    assert np.all((p.epoch_time_s_low <= truth) & (truth <= p.epoch_time_s_high))
    save_model(light, tmp_path / "m.json")
    assert load_model(tmp_path / "m.json").interval_scales == light.interval_scales


def test_regime_factor_grows_with_the_excess_and_is_capped():
    span = {"stall_share": (0.03, 0.05)}
    assert regime_factor({"stall_share": 0.04}, span) == pytest.approx(1.0)
    assert regime_factor({"stall_share": 0.06}, span) == pytest.approx(1.0)  # within the tolerance
    assert 1.0 < regime_factor({"stall_share": 0.2}, span) < regime_factor({"stall_share": 0.4}, span)
    assert regime_factor({"stall_share": 5.0}, span) == REGIME_FACTOR_MAX


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


def test_rows_eleven_orders_apart_give_finite_bounds():
    rows = REF[(REF.workload == "resnet18-cifar10") & REF["mode"].isin(list("eg"))].copy()
    rows["epoch_time_s"] = [1e-3, 1e8]
    rows = rows.drop(columns=["stall_time_s", "compute_time_s", "epoch_energy_j"])
    p = fit_workload(rows).predict(ModeArrays.of_device(load_device("agx-xavier")))
    for col in Prediction.ARRAYS:
        assert np.isfinite(getattr(p, col)).all(), col
    assert np.all(p.epoch_time_s_low <= p.epoch_time_s) and np.all(p.epoch_time_s <= p.epoch_time_s_high)


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
    ref = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")
    lenet = ref[(ref.workload == "lenet5-mnist") & ref["mode"].isin(list("efij"))].reset_index(drop=True)
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


@pytest.mark.parametrize("workload", ["lenet5-mnist", "resnet18-cifar10", "mobilenetv3-gld23k"])
def test_power_without_readings_has_intervals_as_wide_as_real_workloads_differ(workload):
    """Rows timed without a meter take the reference's power. LeNet-5 draws a sixth of the GPU-bound
    networks' dynamic power, so under their reference its power is ~2x too high: the intervals must hold
    every real mode's power and energy anyway (before the level SD: 0 of 10 and 0 of 10)."""
    ref = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")
    sweep = ref[ref.workload == workload].reset_index(drop=True)
    timed = sweep[sweep["mode"].isin(list("efij"))].drop(columns=["epoch_energy_j", "avg_power_w", "base_power_w"])
    model = fit_workload(timed)
    assert not model.has_power
    p = predict_on(model, ModeArrays.from_frame(sweep))
    for low, high, real in ((p.avg_power_w_low, p.avg_power_w_high, sweep.avg_power_w),
                            (p.epoch_energy_j_low, p.epoch_energy_j_high, sweep.epoch_energy_j)):
        assert ((low <= real.to_numpy()) & (real.to_numpy() <= high)).all()
    # As wide as that, and no wider: about 6-7x from the low end (never below the idle bound) to the high one
    # (LeNet-5 7.3x, ResNet-18 6.6x, MobileNetV3 6.2x) ...
    assert 5.8 < float(np.median(p.avg_power_w_high / p.avg_power_w_low)) < 7.8
    # ... and never above what the module can draw (at MAXN ResNet-18's tail would reach 76 W, not 60).
    top_w = load_device("agx-xavier").power_range_w[1]
    assert (p.avg_power_w_high <= top_w).all() and (p.epoch_energy_j_high <= top_w * p.epoch_time_s_high).all()
    if workload == "resnet18-cifar10":
        assert p.avg_power_w_high.max() == top_w
