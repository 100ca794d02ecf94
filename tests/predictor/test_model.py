"""The few-shot workload model beyond its data: the real-row checks that docs/model-evidence.md cites (its
reproduce commands name this file), modes outside the profiled ranges and workloads outside the references'
regime, the pipeline contention that rows measure. The stand-in sweeps it shares with ``test_model_contract.py``
(what fit and predict promise, bad input named, the fit's parts) live in ``model_sweeps.py``."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from jetpredict.models.catalogue import MODE_FIELDS, ModeArrays, load_device
from jetpredict.models.profile_files import read_profile_csv
from jetpredict.predictor.bundled import fit_workload, load_model, save_model
from jetpredict.predictor.bundled import predict_modes as predict_on
from jetpredict.predictor.constants import MEASURED_KAPPAS, REGIME_FACTOR_MAX
from jetpredict.predictor.features import TOTAL_TERMS, extrapolation_units, time_features
from jetpredict.predictor.limits import DEFAULT_CONFIDENCE
from jetpredict.predictor.model import Prediction
from jetpredict.predictor.reference import REFERENCE_DIR, build_reference
from jetpredict.predictor.regime import regime_factor, regime_kappas, regime_weights
from jetpredict.predictor.serialization import model_from_dict, model_to_dict
from jetpredict.predictor.terms import ProfileArrays
from model_sweeps import MODES, REF, fv2, knobs, predict_modes, sweep

#: The two real GPU-bound workloads alone (the bundled reference also holds the CPU-bound LeNet-5): a
#: reference that a light-pipeline workload lies outside of.
GPU_BOUND_REF = build_reference(REF[REF.workload != "lenet5-mnist"].reset_index(drop=True), "agx-xavier")


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
    assert cols["extrapolated_knobs"][3] == "emc_mhz" and cols["confidence"] == DEFAULT_CONFIDENCE
    assert set(Prediction.ARRAYS) <= set(cols)


def real_loo(target: str, design: str = "efij"):
    ref = REF[REF.workload != target]
    new = REF[REF.workload == target]
    model = fit_workload(new[new["mode"].isin(list(design))], reference=ref)
    test = new[~new["mode"].isin(list(design))]
    return model, test, model.predict(ModeArrays.from_frame(test))


def test_one_real_mode_takes_the_prior_of_the_reference_workload_it_resembles():
    """Real ResNet-18 profiled at one mode, the other two real workloads as reference: its stall/compute split
    resembles MobileNetV3's (weight 0.998), not LeNet-5's, so the prior is MobileNetV3's shape. Measured
    (mech-18): time MAPE 9.0% (e) and 3.8% (j) on the other nine modes, all nine inside the intervals at e;
    the pooled prior of both shapes (GPU- and CPU-bound averaged) gives 17.3% and 6.4%, 6 of 9 inside at e."""
    rows = REF[REF.workload == "resnet18-cifar10"]
    ref = build_reference(REF[REF.workload != "resnet18-cifar10"].reset_index(drop=True), "agx-xavier")
    weights = regime_weights(ProfileArrays.from_frame(rows[rows["mode"] == "e"]), ref)
    assert weights is not None and weights["mobilenetv3-gld23k"] > 0.99
    for design, bound in (("e", 0.12), ("j", 0.05)):
        model, test, p = real_loo("resnet18-cifar10", design)
        assert mape(p.epoch_time_s, test.epoch_time_s) < bound, design
        t = test.epoch_time_s.to_numpy()
        assert design != "e" or np.all((p.epoch_time_s_low <= t) & (t <= p.epoch_time_s_high))


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
    fitted to this point; measured 9.34x / 3.38x / 0.362 with either reference (bench/results/accuracy.md)."""
    res = REF[REF.workload == "resnet18-cifar10"]
    ref = build_reference(REF[REF.workload != "resnet18-cifar10"]) if reference != "bundled" else None
    model = fit_workload(res[res["mode"].isin(list("efij"))], reference=ref)
    p = model.predict(ModeArrays(8, 2265.6, [1377, 114.75], 2133))
    speed_up = p.epoch_time_s[1] / p.epoch_time_s[0]
    # Each tolerance sits just above the measured miss of the published figure (-9.3% / -6.1% / +3.5%), so a
    # fit moving 0.8 / 0.9 / 1.5% further from the fact than these fails.
    assert speed_up == pytest.approx(10.3, rel=0.1)
    assert p.avg_power_w[0] / p.avg_power_w[1] == pytest.approx(3.6, rel=0.07)
    assert p.epoch_energy_j[0] / p.epoch_energy_j[1] == pytest.approx(3.6 / 10.3, rel=0.05)
    # The fact lies inside the 90% interval of the far-extrapolated mode.
    assert p.epoch_time_s_low[1] <= 10.3 * p.epoch_time_s[0] <= p.epoch_time_s_high[1]
    # The slow GPU hides the memory clock: at 114.75 MHz halving EMC barely moves the epoch (<5%), while
    # at MAXN the published modes h vs g show a 35% step.
    q = model.predict(ModeArrays(8, 2265.6, 114.75, [2133, 1066]))
    assert q.epoch_time_s[1] / q.epoch_time_s[0] < 1.05


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


def test_clock_independent_time_widens_with_the_cpu_knobs_outside_their_range():
    """Rows that barely move the CPU clock cannot tell CPU work from clock-independent time, so the ``one``
    term's share of the epoch is as unknown as the CPU's beyond the CPU clock or core range [E6]: an epoch
    all clock-independent gets share x ln-distance extrapolation units there, none for the GPU clock."""
    modes = knobs(["e", "e", "e"])
    feats = time_features(modes, 4.0, 1.0, 1.0)
    coef = {t: 10.0 if t == "one" else 0.0 for t in TOTAL_TERMS}
    zero = np.zeros(3)
    d = {"cpu_mhz": np.array([0.5, 0.0, 0.0]), "cpu_cores": np.array([0.0, 0.7, 0.0]),
         "gpu_mhz": np.array([0.0, 0.0, 0.9]), "emc_mhz": zero}
    units = extrapolation_units(coef, feats, d, np.full(3, 10.0))
    np.testing.assert_allclose(units, [0.5, 0.7, 0.0], atol=1e-12)


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


@pytest.mark.parametrize("workload", ["resnet18-cifar10", "mobilenetv3-gld23k"])
def test_leave_one_mode_out_of_the_gpu_bound_sweeps_holds_the_committed_form_check(workload):
    """The form check of the two GPU-bound sweeps, as for LeNet-5 above: fitted on 9 of the 10 modes (the other
    two real workloads as reference), the 10th's time, energy and power MAPE within 0.2 points of the
    committed run's (bench/results/real_cv.json, "Leave one mode out": ResNet-18 1.6 / 2.0 / 2.0%,
    MobileNetV3 1.8 / 3.8 / 4.1%), and each mode's time error within 0.3 points of its own."""
    import json
    from pathlib import Path

    committed = {r["target"]: r for r in json.loads((Path(__file__).resolve().parents[2] / "bench" / "results"
                                                     / "real_cv.json").read_text(encoding="utf-8"))["leave_one_mode_out"]}
    rows = REF[REF.workload == workload].reset_index(drop=True)
    reference = build_reference(REF[REF.workload != workload].reset_index(drop=True), "agx-xavier")
    modes = ModeArrays.from_frame(rows)
    errors: dict[str, list[float]] = {"time": [], "energy": [], "power": []}
    for i in range(len(rows)):
        p = fit_workload(rows.drop(index=i), reference=reference).predict(modes.take(np.array([i])))
        for name, pred, col in (("time", p.epoch_time_s, "epoch_time_s"), ("energy", p.epoch_energy_j, "epoch_energy_j"),
                                ("power", p.avg_power_w, "avg_power_w")):
            errors[name].append(abs(pred[0] / rows[col][i] - 1.0) * 100)
    for name, errs in errors.items():
        assert np.mean(errs) == pytest.approx(committed[workload][f"{name}_mape"], abs=0.2), name
    assert errors["time"] == pytest.approx([committed[workload]["per_mode"][m] for m in rows["mode"]], abs=0.3)


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


def test_rows_eleven_orders_apart_give_finite_bounds():
    rows = REF[(REF.workload == "resnet18-cifar10") & REF["mode"].isin(list("eg"))].copy()
    rows["epoch_time_s"] = [1e-3, 1e8]
    rows = rows.drop(columns=["stall_time_s", "compute_time_s", "epoch_energy_j"])
    p = fit_workload(rows).predict(ModeArrays.of_device(load_device("agx-xavier")))
    for col in Prediction.ARRAYS:
        assert np.isfinite(getattr(p, col)).all(), col
    assert np.all(p.epoch_time_s_low <= p.epoch_time_s) and np.all(p.epoch_time_s <= p.epoch_time_s_high)


@pytest.mark.parametrize("workload", ["lenet5-mnist", "resnet18-cifar10", "mobilenetv3-gld23k"])
def test_power_without_readings_has_intervals_as_wide_as_real_workloads_differ(workload):
    """Rows timed without a meter take the reference's power. LeNet-5 draws a sixth of the GPU-bound
    networks' dynamic power, so under their reference its power is ~2x too high: the intervals must hold
    every real mode's power and energy anyway (before the level SD: 0 of 10 and 0 of 10)."""
    sweep = REF[REF.workload == workload].reset_index(drop=True)
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
