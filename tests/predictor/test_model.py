"""The few-shot workload model: fit, predict, regimes, intervals, bad input."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
from jetpredict.models.catalogue import load_device
from jetpredict.models.errors import InputError
from jetpredict.models.profile_rows import read_profile_csv
from jetpredict.predictor.model import PriorLinearRegression, WorkloadModel, fit_workload
from jetpredict.predictor.reference import REFERENCE_DIR

REF = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")
MODES = {"a": (4, 1200, 670, 1333), "b": (8, 1200, 670, 1333), "c": (8, 1200, 900, 1333),
         "d": (8, 1200, 900, 1600), "e": (8, 2100, 900, 1600), "f": (2, 2100, 900, 1600),
         "g": (8, 2265, 1377, 2133), "h": (8, 2265, 1377, 1066), "i": (8, 2265, 1377, 1333),
         "j": (8, 2265, 1377, 1600), "low": (8, 1036.8, 420.75, 1600), "low2": (4, 960, 420.75, 1331.2)}


def fv2(f, f_max):
    """Dynamic power f V^2 relative to the top clock, V rising as a power law (not the model's curve)."""
    r = f / f_max
    return r * (0.55 + 0.45 * r ** 1.5) ** 2


def sweep(cpu_ms: float, gpu_ms: float, modes, workload="w", power=True, components=True) -> pd.DataFrame:
    """Rows of a workload whose minibatch is CPU launch work + GPU work (ms at the top clocks)."""
    rows = []
    for m in modes:
        c, cpu, gpu, emc = MODES[m]
        launch = cpu_ms * 2265.6 / cpu * (1 + 0.8 * max(0, 5 - c) / c)
        kernels = gpu_ms * 1377 / gpu + 0.2 * gpu_ms * 2133 / emc
        stall = 1.0 * 2265.6 / cpu * (1 + 1.0 * max(0, 5 - c) / c)
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


def predict(model: WorkloadModel, modes):
    k = np.array([MODES[m] for m in modes], dtype=float)
    return model.predict_arrays(k[:, 0], k[:, 1], k[:, 2], k[:, 3])


def mape(pred, true):
    return float(np.mean(np.abs(np.asarray(pred) - np.asarray(true)) / np.asarray(true)))


@pytest.mark.parametrize("cpu_ms,gpu_ms", [(9.0, 1.5), (3.0, 100.0)])
def test_recognises_regime_from_own_rows_and_extrapolates_below_range(cpu_ms, gpu_ms):
    prof = sweep(cpu_ms, gpu_ms, "efij")
    model = fit_workload(prof)
    test_modes = ["a", "b", "c", "d", "g", "h", "low", "low2"]
    truth = sweep(cpu_ms, gpu_ms, test_modes)
    p = predict(model, test_modes)
    assert mape(p["epoch_time_s"], truth.epoch_time_s) < 0.08
    assert mape(p["epoch_energy_j"], truth.epoch_energy_j) < 0.10


def test_cpu_bound_workload_gets_cpu_dominated_shape():
    model = fit_workload(sweep(9.0, 1.5, "efij"))
    fit = model.time_fits["compute"]
    coef = dict(zip(fit.terms, fit.coef, strict=True))
    # At MAXN clocks, the CPU term must carry most of the compute time for a launch-bound workload.
    cpu_s, gpu_s = coef["cpu"] / 2.2656, coef["gpu"] / 1.377
    assert cpu_s > 3 * gpu_s


def test_one_mode_scales_reference_and_more_modes_tighten():
    one = fit_workload(sweep(3.0, 100.0, "g"))
    p = predict(one, ["g"])
    assert p["epoch_time_s"][0] == pytest.approx(sweep(3.0, 100.0, "g").epoch_time_s[0], rel=0.05)
    four = fit_workload(sweep(3.0, 100.0, "efij"))
    w1 = predict(one, ["low"])
    w4 = predict(four, ["low"])
    width = {k: (v["epoch_time_s_high"] - v["epoch_time_s_low"]) / v["epoch_time_s"] for k, v in
             (("one", w1), ("four", w4))}
    assert width["four"][0] < width["one"][0]


def test_predictions_are_monotone_in_each_clock_and_intervals_ordered():
    model = fit_workload(sweep(5.0, 30.0, "efij"))
    dev = load_device("agx-xavier")
    gpu = np.array(dev.gpu_steps_mhz)
    p = model.predict_arrays(np.full(len(gpu), 8), np.full(len(gpu), 2265.6), gpu, np.full(len(gpu), 2133))
    assert np.all(np.diff(p["epoch_time_s"]) <= 1e-9)
    for key in ("epoch_time_s", "avg_power_w", "epoch_energy_j"):
        assert np.all(p[f"{key}_low"] < p[key]) and np.all(p[key] < p[f"{key}_high"])
    assert np.all(p["base_power_w"] < p["avg_power_w"])
    assert p["cross_device"] is False and p["power_source"] == "workload"


def test_rows_without_power_use_reference_power_model():
    model = fit_workload(sweep(3.0, 100.0, "efij", power=False, components=False))
    p = predict(model, ["g", "a"])
    assert p["power_source"] == "reference" and not model.has_power
    assert np.all(p["avg_power_w"] > 3) and np.all(p["avg_power_w"] < 60)
    assert p["avg_power_w"][0] > p["avg_power_w"][1]  # MAXN draws more than mode a


def test_real_leave_one_workload_out_mobilenet():
    ref = REF[REF.workload == "resnet18-cifar10"]
    new = REF[REF.workload == "mobilenetv3-gld23k"]
    model = fit_workload(new[new["mode"].isin(list("efij"))], reference=ref)
    assert model.reference_source == "measured" or model.reference_source == "published"
    test = new[~new["mode"].isin(list("efij"))]
    p = model.predict_arrays(test.cpu_cores, test.cpu_mhz, test.gpu_mhz, test.emc_mhz)
    assert mape(p["epoch_time_s"], test.epoch_time_s) < 0.06
    assert mape(p["epoch_energy_j"], test.epoch_energy_j) < 0.06


@pytest.mark.parametrize("reference", ["leave-one-workload-out", "bundled"])
def test_real_fact_below_the_reference_clock_range(reference):
    """POMACS 2022 §5.6: ResNet-18 on AGX Xavier, MAXN against the GPU at 114.75 MHz (5.8x below the lowest
    reference GPU clock): speed-up 10.3x, power ratio 3.6x (31 W vs ~8.6 W). Validation only: nothing is
    fitted to this point, so the bounds are loose."""
    from jetpredict.predictor.reference import build_reference

    res = REF[REF.workload == "resnet18-cifar10"]
    ref = build_reference(REF[REF.workload != "resnet18-cifar10"]) if reference != "bundled" else None
    model = fit_workload(res[res["mode"].isin(list("efij"))], reference=ref)
    p = model.predict_arrays([8, 8], [2265.6, 2265.6], [1377, 114.75], [2133, 2133])
    speed_up = p["epoch_time_s"][1] / p["epoch_time_s"][0]
    power_ratio = p["avg_power_w"][0] / p["avg_power_w"][1]
    energy_ratio = p["epoch_energy_j"][0] / p["epoch_energy_j"][1]
    assert speed_up == pytest.approx(10.3, rel=0.15)
    assert power_ratio == pytest.approx(3.6, rel=0.2)
    assert energy_ratio == pytest.approx(3.6 / 10.3, rel=0.25)
    # The slow GPU hides the memory clock: at 114.75 MHz halving EMC barely moves the epoch (<5%), while
    # at MAXN the published modes h vs g show a 35% step.
    q = model.predict_arrays([8, 8], [2265.6, 2265.6], [114.75, 114.75], [2133, 1066])
    assert q["epoch_time_s"][1] / q["epoch_time_s"][0] < 1.05


def test_time_is_monotone_in_gpu_and_emc_clocks_over_the_whole_range():
    """The roofline term keeps every clock's effect monotone, also at low EMC with a fast GPU."""
    dev = load_device("agx-xavier")
    model = fit_workload(REF[REF.workload == "resnet18-cifar10"])
    gpu, emc = np.meshgrid(np.array(dev.gpu_steps_mhz, float), np.array(dev.emc_steps_mhz, float))
    n = gpu.size
    t = model.predict_arrays(np.full(n, 8), np.full(n, 2265.6), gpu.ravel(), emc.ravel())["epoch_time_s"]
    t = t.reshape(gpu.shape)
    assert np.all(np.diff(t, axis=1) <= 1e-9) and np.all(np.diff(t, axis=0) <= 1e-9)


def test_bad_input_is_named():
    rows = sweep(3.0, 100.0, "efij")
    mixed = pd.concat([rows, sweep(3.0, 100.0, "g", workload="other")])
    with pytest.raises(InputError) as e:
        fit_workload(mixed)
    assert e.value.field == "workload"
    host = rows.assign(device="host")
    with pytest.raises(InputError, match="host"):
        fit_workload(host)
    with pytest.raises(InputError) as e:
        fit_workload(rows.assign(device="tx9"))
    assert e.value.field == "device"
    with pytest.raises(InputError) as e:
        fit_workload(rows.drop(columns=["gpu_mhz"]))
    assert e.value.field == "gpu_mhz"
    with pytest.raises(InputError):
        fit_workload(rows.iloc[0:0])
    with pytest.raises(InputError) as e:
        fit_workload(rows, device_id="nano")
    assert e.value.field == "device"
    model = fit_workload(rows)
    with pytest.raises(InputError) as e:
        model.predict_arrays([8], [2265.6], [5000.0], [2133])
    assert e.value.field == "gpu_mhz"


def test_prior_regression_is_nonnegative_and_fades_with_data():
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 2.0, size=(40, 3))
    y = x @ np.array([2.0, 0.0, 1.0])
    est = PriorLinearRegression(prior_mean=[1.0, 1.0, 1.0], prior_sd=[0.5, 0.5, 0.5], noise_rel=0.01)
    est.fit(x, y)
    assert np.all(est.coef_ >= 0)
    np.testing.assert_allclose(est.coef_, [2.0, 0.0, 1.0], atol=0.05)
    mean, sd = est.predict(x[:3], return_std=True)
    assert mean.shape == (3,) and np.all(sd >= 0)


def test_launch_work_hidden_at_profiled_clocks_widens_and_raises_low_cpu_predictions():
    # Compute = max(CPU launch, GPU latency): at e/f/i/j the GPU side hides the launches, so the rows look
    # clock-independent; at a slow CPU the launches surface. The model must not promise a flat time there.
    rows = []
    for m in ["e", "f", "i", "j", "low"]:
        c, cpu, gpu, emc = MODES[m]
        launch_ms = 4.0 * 2265.6 / cpu
        compute_ms = max(launch_ms, 5.5) + 0.05 * 1377 / gpu
        t = (compute_ms + 1.5 * 2265.6 / cpu + 0.3) * 3750 / 1000
        rows.append(dict(device="agx-xavier", workload="latency-bound", mode=m, cpu_cores=c, cpu_mhz=cpu,
                         gpu_mhz=gpu, emc_mhz=emc, num_workers=4, batch_size=16, minibatches_per_epoch=3750,
                         epoch_time_s=t, stall_time_s=1.5 * 2265.6 / cpu * 3.75,
                         compute_time_s=compute_ms * 3.75, source="simulated: test"))
    rows = pd.DataFrame(rows)
    model = fit_workload(rows.iloc[:4])
    p = predict(model, ["low"])
    truth = rows.epoch_time_s.iloc[4]
    assert p["epoch_time_s_low"][0] <= truth <= p["epoch_time_s_high"][0]
    # Without the hidden-launch variant the clock-independent fit would stay well below the truth.
    flat = copy.copy(model)
    flat.hidden_cpu_ref_mhz = None
    assert p["epoch_time_s"][0] > predict(flat, ["low"])["epoch_time_s"][0]


def test_intervals_widen_outside_the_profiled_ranges_by_the_knobs_share():
    # GPU-bound: a mode with the GPU below the profiled range widens, one with the CPU below it hardly.
    gpu_bound = fit_workload(sweep(3.0, 100.0, "efij"))
    assert gpu_bound.profiled_ranges["gpu_mhz"] == (900.0, 1377.0)
    p = predict(gpu_bound, ["e", "low", "c"])
    t = gpu_bound._time(*(np.array([MODES[m][k] for m in ("e", "low", "c")], float) for k in range(4)))
    assert t["extrapolation"][0] == 0.0  # a profiled mode
    assert t["extrapolation"][1] > 0.5  # GPU at 420 MHz: 0.76 ln-units below, nearly all GPU time
    assert t["extrapolation"][2] < 0.2  # CPU at 1200 MHz moves little of a GPU-bound epoch
    width = (p["epoch_time_s_high"] - p["epoch_time_s_low"]) / p["epoch_time_s"]
    assert width[1] > width[0] * 1.5
    # CPU-bound: the CPU below its profiled range is what widens.
    cpu_bound = fit_workload(sweep(9.0, 1.5, "efij"))
    t = cpu_bound._time(*(np.array([MODES["c"][k]], float) for k in range(4)))
    assert t["extrapolation"][0] > 0.3
    # Energy widens too; cross-device models carry their own SD instead of the source device's ranges.
    assert np.all(p["epoch_energy_j_high"] / p["epoch_energy_j"] > 1.0)
    nx = load_device("xavier-nx").maxn
    moved = gpu_bound.predict_arrays(nx.cpu_cores, nx.cpu_mhz, nx.gpu_mhz, nx.emc_mhz, device_id="xavier-nx")
    assert moved["cross_device"] and gpu_bound.__dict__["_transfer_cache"]["xavier-nx"].profiled_ranges is None
    assert moved["epoch_time_s_high"][0] > moved["epoch_time_s"][0]


def test_models_saved_without_profiled_ranges_still_predict():
    model = fit_workload(sweep(3.0, 100.0, "efij"))
    old = copy.copy(model)
    del old.__dict__["profiled_ranges"]  # a model pickled before extrapolation-aware intervals
    a, b = predict(model, ["e", "low"]), predict(old, ["e", "low"])
    assert np.allclose(a["epoch_time_s"], b["epoch_time_s"])
    assert b["epoch_time_s_high"][1] < a["epoch_time_s_high"][1]  # no widening, but a valid interval


def test_interval_scales_set_the_width_of_each_quantity_separately():
    model = fit_workload(sweep(9.0, 1.5, "efij"))
    wide = copy.copy(model)
    wide.interval_scale, wide.power_interval_scale, wide.energy_interval_scale = 1.0, 1.0, 1.0
    narrow = copy.copy(wide)
    narrow.energy_interval_scale = 0.5
    a, b = predict(wide, ["a", "low"]), predict(narrow, ["a", "low"])
    ratio = np.log(b["epoch_energy_j_high"] / b["epoch_energy_j"]) / np.log(a["epoch_energy_j_high"] / a["epoch_energy_j"])
    # The scale shrinks the model's own uncertainty; the run-to-run noise part stays, so not all the way.
    assert np.all(ratio < 0.95) and np.all(ratio > 0.5)
    noise = np.hypot(wide.power_fit.noise_rel, 0.03)  # power noise and the epoch-time noise floor
    assert np.all(np.log(b["epoch_energy_j_high"] / b["epoch_energy_j"]) >= 1.6449 * noise - 1e-9)
    assert np.allclose(a["epoch_time_s_high"], b["epoch_time_s_high"])  # time untouched
    assert np.allclose(a["epoch_energy_j"], b["epoch_energy_j"])  # only the interval moves


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
    k = truth[["cpu_cores", "cpu_mhz", "gpu_mhz", "emc_mhz"]].to_numpy(float).T
    t = model._time(*k)
    compute = t["compute"]
    active = model.gpu_active(t, compute)
    # The GPU waits on a slow main thread: its busy share drops below the compute share at low CPU clocks.
    assert np.all(active < 0.9 * compute / t["epoch"])
    top = model._time(*np.array([MODES["j"]], dtype=float).T)
    assert model.gpu_active(top, top["compute"])[0] == pytest.approx(top["compute"][0] / top["epoch"][0], rel=0.01)
    p = model.predict_arrays(*k)
    # A compute-share GPU term keeps the GPU's power at slow CPU clocks (2.7% power MAPE here).
    assert mape(p["avg_power_w"], truth.avg_power_w) < 0.015
    assert mape(p["epoch_energy_j"], truth.epoch_energy_j) < 0.09
