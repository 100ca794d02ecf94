"""Interval bounds a prediction keeps whatever the posterior's shape: the non-negative posterior a transfer
scales, the FLOPs floor of the epoch time, and the idle-power floor of the power (and so of the energy)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from jetpredict.models.catalogue import ModeArrays, list_devices, load_device
from jetpredict.predictor.bundled import fit_workload, on_device
from jetpredict.predictor.constants import MAX_LOG_HALF_WIDTH
from jetpredict.predictor.model import z_of
from jetpredict.predictor.terms import TermFit

#: Twin MobileNetV3 rows on the 4 modes ``jetpredict plan --device orin-agx --budget 4`` picks (simulated).
PLANNED_ROWS = """\
mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz,num_workers,batch_size,minibatches_per_epoch,epoch_time_s,stall_time_s,compute_time_s,avg_power_w,base_power_w,flops_train
2c-1113.6-1300.5-3199,2,1113.6,1300.5,3199.0,4,16,1443,456.9778867618411,97.7912208685475,356.3129467579082,18.035804620407706,8.961594407500773,331083452.0
12c-2201.6-726.75-3199,12,2201.6,726.75,3199.0,4,16,1443,158.13965258365823,9.843227940325676,147.71002282218993,19.68924664507596,8.312761516104255,331083452.0
12c-2201.6-1300.5-2133,12,2201.6,1300.5,2133.0,4,16,1443,168.44390714325795,11.49649975742532,156.25773383303644,39.08624235809215,8.694639381560705,331083452.0
2c-2201.6-1300.5-2133,2,2201.6,1300.5,2133.0,4,16,1443,328.5785389282452,61.5419132477504,264.97746097062634,23.659152880165085,7.858454694367437,331083452.0
"""


@pytest.fixture(scope="module")
def planned_model():
    rows = pd.read_csv(io.StringIO(PLANNED_ROWS)).assign(
        device="orin-agx", workload="mobilenetv3-small-gld23k", source="simulated")
    rows["epoch_energy_j"] = rows["avg_power_w"] * rows["epoch_time_s"]
    return fit_workload(rows, load_device("orin-agx"))


def rejection_moment(coef: np.ndarray, cov: np.ndarray, draws: int) -> np.ndarray:
    """Second moment about ``coef`` of N(coef, cov) restricted to coefficients >= 0, by rejection."""
    spread = np.random.default_rng(7).multivariate_normal(np.zeros(len(coef)), cov, size=draws)
    inside = spread[(spread + coef).min(axis=1) >= 0.0]
    return inside.T @ inside / len(inside)


def test_the_non_negative_posterior_is_sampled_however_little_mass_lies_inside():
    # Two aliased terms at 0 (correlation -0.9999): 0.2% of the Gaussian lies in the quadrant, ~45 of
    # 20,000 fixed draws, which kept three quarters of the unrestricted covariance (SDs ~0.9 of it).
    sd = np.array([500.0, 400.0])
    cov = np.outer(sd, sd) * np.array([[1.0, -0.9999], [-0.9999, 1.0]])
    fit = TermFit(("gpu", "mem"), np.zeros(2), cov, 0.05)
    kept = fit.non_negative
    exact = rejection_moment(fit.coef, cov, 2_000_000)  # ~4,500 inside
    assert np.sqrt(np.diag(kept.cov)) == pytest.approx(np.sqrt(np.diag(exact)), rel=0.1)
    assert (np.sqrt(np.diag(kept.cov)) < 0.05 * sd).all()
    # 10 independent terms at 0: tests/predictor/test_transfer.py (the half-normal's moments).
    # Deterministic: a second fit of the same numbers restricts to the same covariance.
    again = TermFit(fit.terms, fit.coef.copy(), cov.copy(), 0.05).non_negative
    assert np.array_equal(again.cov, kept.cov)


def test_a_planned_orin_model_moves_to_agx_xavier_without_reaching_the_width_cap(planned_model):
    # Its compute fit sat at 0 on four aliased terms: AGX Xavier MAXN took 146 s +- 883 s, [0.188, 188464].
    xavier = load_device("agx-xavier")
    moved = on_device(planned_model, xavier)
    p = moved.predict(ModeArrays.of_device(xavier))
    half = np.log(p.epoch_time_s_high / p.epoch_time_s)
    assert (half < MAX_LOG_HALF_WIDTH - 0.5).all()
    # Still wide: the planned modes cannot tell CPU work from CPU-side memory work, which move apart.
    maxn = moved.predict(ModeArrays(*xavier.maxn.knobs()))
    assert maxn.epoch_time_s_high[0] / maxn.epoch_time_s_low[0] < 100.0


def test_time_lows_keep_the_flops_floor_on_every_device(planned_model):
    flops = float(331083452.0 * 16 * 1443)  # per epoch: flops_train x batch_size x minibatches
    for device in list_devices():
        modes = ModeArrays.of_device(device)
        p = on_device(planned_model, device).predict(modes)
        floor = np.minimum(flops / device.peak_fp32_flops(modes.gpu_mhz), p.epoch_time_s)
        assert (p.epoch_time_s_low >= floor * (1 - 1e-9)).all(), device.id
        assert (p.epoch_time_s_low <= p.epoch_time_s).all()


def test_power_and_energy_lows_keep_the_idle_power_bound(planned_model):
    z = z_of(0.9)
    for device in list_devices():
        model = on_device(planned_model, device)
        modes = ModeArrays.of_device(device)
        p = model.predict(modes)
        idle = p.base_power_w * np.exp(-z * model.base_sd_rel)
        assert (p.avg_power_w_low >= idle * (1 - 1e-9)).all(), device.id
        assert (p.epoch_energy_j_low >= idle * p.epoch_time_s_low * (1 - 1e-9)).all(), device.id
        assert (p.avg_power_w_low <= p.avg_power_w).all() and (p.epoch_energy_j_low <= p.epoch_energy_j).all()


#: ResNet-18 on Nano through a meter that counts the carrier board too (+5 W): 8-11 W, each row plausible.
BOARD_METERED_NANO_ROWS = """\
mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz,num_workers,batch_size,minibatches_per_epoch,epoch_time_s,stall_time_s,compute_time_s,avg_power_w,base_power_w
3c-1132.8-691.2-1065.6,3,1132.8,691.2,1065.6,4,16,3125,2337.0,28.193,2304.0,11.3357,6.4107
3c-1132.8-460.8-800,3,1132.8,460.8,800.0,4,16,3125,3461.4,30.534,3425.5,8.9946,6.1908
1c-1326-307.2-665.6,1,1326.0,307.2,665.6,4,16,3125,5149.7,33.044,5110.9,8.2309,5.99208
1c-102-460.8-1065.6,1,102.0,460.8,1065.6,4,16,3125,4862.0,447.55,4336.8,7.9766,6.3296
"""


@pytest.mark.parametrize("confidence", [0.5, 0.999])
def test_no_prediction_draws_above_what_the_module_can(confidence):
    # Extrapolated to the top clocks, this fit's power reached 24.7 W against Nano's 20 W range, and the
    # upper end of its interval sat on that point at every confidence.
    rows = pd.read_csv(io.StringIO(BOARD_METERED_NANO_ROWS)).assign(
        device="nano", workload="resnet18-cifar10", source="measured")
    rows["epoch_energy_j"] = rows["avg_power_w"] * rows["epoch_time_s"]
    nano = load_device("nano")
    p = fit_workload(rows, nano).predict(ModeArrays.of_device(nano), confidence)
    top_w = nano.power_range_w[1]
    at_top = p.avg_power_w == top_w
    assert at_top.sum() > 10 and (p.avg_power_w <= top_w).all()
    assert (p.avg_power_w_low <= p.avg_power_w).all() and (p.avg_power_w <= p.avg_power_w_high).all()
    assert (p.avg_power_w_high <= top_w).all() and (p.base_power_w <= p.avg_power_w).all()
    assert np.allclose(p.epoch_energy_j, p.avg_power_w * p.epoch_time_s)
    assert (p.epoch_energy_j_low <= p.epoch_energy_j).all() and (p.epoch_energy_j <= p.epoch_energy_j_high).all()
    # below the limit the interval is as before: open on both sides of its point
    assert (p.avg_power_w_high[~at_top] > p.avg_power_w[~at_top]).all()



@pytest.fixture(scope="module")
def lenet5_efij(lenet):
    """Real LeNet-5 fitted on modes e, f, i, j (published; GPU 900-1377 MHz, CPU 2100-2265 MHz)."""
    return fit_workload(lenet[lenet["mode"].isin(list("efij"))])


def test_the_slowest_gpu_clock_is_never_bounded_faster_than_the_fastest(lenet5_efij):
    # The symmetric extrapolation SD read [28.2, 95.6] s at GPU 114.75 MHz against [38.1, 43.3] s at 1377 MHz.
    p = lenet5_efij.predict(ModeArrays(8, 2265.6, [114.75, 1377.0], 1600.0))
    assert p.epoch_time_s[0] > p.epoch_time_s[1]
    assert p.epoch_time_s_low[0] >= p.epoch_time_s_low[1]


def test_bounds_outside_the_profiled_ranges_keep_the_bounds_of_the_modes_moved_into_them(lenet5_efij):
    # More cores and faster clocks never slow an epoch: below the ranges the lower bound is at least the
    # one with those knobs raised to the ranges' low ends; above them the upper bound at most the one with
    # those knobs lowered to their high ends. The point stays inside.
    space = ModeArrays.of_device(load_device("agx-xavier"))
    modes = space.take(np.random.default_rng(3).choice(len(space), 2000, replace=False))
    p = lenet5_efij.predict(modes)
    ranges = lenet5_efij.profiled_ranges
    raised = ModeArrays(**{k: np.maximum(v, ranges[k][0]) for k, v in modes.as_dict().items()})
    lowered = ModeArrays(**{k: np.minimum(v, ranges[k][1]) for k, v in modes.as_dict().items()})
    up, down = lenet5_efij.predict(raised), lenet5_efij.predict(lowered)
    assert (p.epoch_time_s_low >= np.minimum(up.epoch_time_s_low, p.epoch_time_s) * (1 - 1e-12)).all()
    assert (p.epoch_time_s_high <= np.maximum(down.epoch_time_s_high, p.epoch_time_s) * (1 + 1e-12)).all()
    assert ((p.epoch_time_s_low <= p.epoch_time_s) & (p.epoch_time_s <= p.epoch_time_s_high)).all()
    # The rule binds (the lower bound is the raised mode's) for ~4% of the space: the far-below corner.
    below = np.any(np.column_stack(raised.arrays()) != np.column_stack(modes.arrays()), axis=1)
    assert (np.isclose(p.epoch_time_s_low, up.epoch_time_s_low, rtol=1e-9) & below).mean() > 0.02
