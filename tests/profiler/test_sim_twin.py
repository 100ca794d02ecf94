"""The twin holds the published mechanisms (POMACS 2022): GPU-bound vs CPU-bound models, workers, MAXN."""

from __future__ import annotations

import numpy as np
import pytest
from jetpredict.models.catalogue import load_device
from jetpredict.profiler.sim.kernel_costs import load_complexity
from jetpredict.profiler.sim.physics import DevicePhysics
from jetpredict.profiler.sim.twin import Twin


def twin(device: str, workload: str) -> Twin:
    return Twin(DevicePhysics(load_device(device)), load_complexity(workload))


def knobs(cores, cpu, gpu, emc):
    return {"cpu_cores": np.atleast_1d(cores), "cpu_mhz": np.atleast_1d(cpu),
            "gpu_mhz": np.atleast_1d(gpu), "emc_mhz": np.atleast_1d(emc)}


def epoch_s(t: Twin, *mode, workers=4, batch=None) -> float:
    return float(t.epoch(knobs(*mode), batch, workers)["epoch_time_s"][0])


@pytest.mark.parametrize("workload, gpu_halved, emc_halved", [("resnet18-cifar10", 1.87, 1.35),
                                                              ("vgg11-cifar10", 1.79, 1.41)])
def test_gpu_bound_models_slow_down_with_lower_gpu_and_emc_clocks(workload, gpu_halved, emc_halved):
    # Pinned near the twin's values (ResNet-18's EMC figure is the published +35% of mode h vs g): a change of the roofline or the calibration moves them.
    t = twin("agx-xavier", workload)
    maxn = epoch_s(t, 8, 2265.6, 1377, 2133)
    assert epoch_s(t, 8, 2265.6, 675.75, 2133) / maxn == pytest.approx(gpu_halved, rel=0.03)
    assert epoch_s(t, 8, 2265.6, 1377, 1065.6) / maxn == pytest.approx(emc_halved, rel=0.03)
    assert epoch_s(t, 8, 1190.4, 1377, 2133) / maxn < 1.06    # CPU clock halved: small effect


#: Largest error of the twin on the published AGX Xavier sweeps (10 modes each), as measured (4.7% and
#: 8.7%) plus a little: the in-sample fit these figures come from is docs/twin-calibration.md.
SWEEP_TOLERANCE = {"resnet18-cifar10": 0.05, "mobilenetv3-gld23k": 0.09}


@pytest.mark.parametrize("workload", sorted(SWEEP_TOLERANCE))
def test_the_published_agx_xavier_sweeps_mode_by_mode(workload):
    from jetpredict.models.paths import data_path
    from jetpredict.models.profile_files import read_profile_csv

    pub = read_profile_csv(data_path("reference", "agx-xavier-published.csv"))
    pub = pub[pub["workload"] == workload].reset_index(drop=True)
    ours = {"mobilenetv3-gld23k": "mobilenetv3-small-gld23k"}.get(workload, workload)
    sim = twin("agx-xavier", ours).epoch(pub[["cpu_cores", "cpu_mhz", "gpu_mhz", "emc_mhz"]])
    err = sim["epoch_time_s"] / pub["epoch_time_s"].to_numpy() - 1
    assert len(err) == 10
    assert np.abs(err).max() <= SWEEP_TOLERANCE[workload], dict(zip(pub["mode"], err, strict=True))


def test_lenet_is_cpu_bound():
    t = twin("xavier-nx", "lenet5-mnist")
    top = epoch_s(t, 6, 1907.2, 1109.25, 1866)
    # CPU clock halved: a CPU-bound epoch takes longer, but less than the clock ratio (1907.2 / 960 = 1.99):
    # its memory stalls follow the memory clock (real LeNet-5 on AGX Xavier, d -> e: CPU 1.75x faster,
    # epoch 1.59x shorter).
    slower = epoch_s(t, 6, 960.0, 1109.25, 1866) / top
    assert 1.4 < slower < 1907.2 / 960.0 and slower == pytest.approx(1.66, rel=0.03)
    assert epoch_s(t, 2, 1907.2, 1109.25, 1866) / top == pytest.approx(1.52, rel=0.03)  # 2 cores, 4 workers
    assert epoch_s(t, 6, 1907.2, 510.0, 1866) / top < 1.01            # GPU clock halved: hardly


def test_maxn_is_fastest_but_not_lowest_energy_for_resnet18():
    for device in ("agx-xavier", "orin-agx", "nano"):  # the devices with a MAXN preset
        d = load_device(device)
        e = twin(device, "resnet18-cifar10").epoch(list(d.presets))
        i_maxn = [p.mode for p in d.presets].index(d.maxn.mode)
        assert np.argmin(e["epoch_time_s"]) == i_maxn
        assert np.argmin(e["epoch_energy_j"]) != i_maxn
        # Measured 1.20-2.25x; the twin: AGX Xavier 1.32x, Orin AGX 2.08x, Nano 1.15x.
        assert e["epoch_energy_j"][i_maxn] > 1.1 * e["epoch_energy_j"].min()


def test_resnet18_at_the_lowest_gpu_clock_matches_the_published_maxn_fact():
    # POMACS 2022 §5.6 (tools/data/ratio_facts.csv): AGX Xavier MAXN vs the same mode with the GPU at
    # 114.75 MHz, ResNet-18/CIFAR-10: 10.3x speed-up at 3.6x the power (the twin: 9.8x, 3.41x; 3.46x on the
    # DVFS knee once set by hand, 0.35).
    e = twin("agx-xavier", "resnet18-cifar10").epoch(knobs([8, 8], [2265.6] * 2, [1377, 114.75], [2133] * 2))
    speedup = e["epoch_time_s"][1] / e["epoch_time_s"][0]
    power_ratio = e["avg_power_w"][0] / e["avg_power_w"][1]
    assert speedup == pytest.approx(10.3, rel=0.06)
    assert power_ratio == pytest.approx(3.6, rel=0.06)
    assert e["epoch_energy_j"][0] < e["epoch_energy_j"][1]  # MAXN uses less energy per epoch here


def test_workers_pipeline_the_fetch_with_compute():
    t = twin("agx-xavier", "mobilenetv3-small-gld23k")
    mode = knobs(8, 2265.6, 1377, 2133)
    stalls = [float(t.epoch(mode, None, w)["stall_time_s"][0]) for w in (0, 1, 2, 4)]
    # Published (POMACS Fig 2a): 285.3 s with no workers, 12.9 s with 4; the twin: 384 s (+35%; +15% before
    # its CPU work waited on memory, see docs/twin-calibration.md), 13.4 s.
    assert stalls[0] == pytest.approx(384.0, rel=0.05) and stalls[3] == pytest.approx(12.9, rel=0.08)
    assert stalls == sorted(stalls, reverse=True)


def test_small_batches_are_launch_bound():
    t = twin("agx-xavier", "resnet18-cifar10")
    per_epoch = [epoch_s(t, 8, 2265.6, 1377, 2133, batch=b) for b in (1, 16, 64)]
    # Published (POMACS Fig 4): 2013.7 s at batch 1, 345.5 s at 16 (the twin: +5%, -2%), 205.5 s at 64,
    # where the twin is 25% slow (the batch-size hold-out of docs/twin-calibration.md).
    assert per_epoch[0] == pytest.approx(2013.7, rel=0.06) and per_epoch[1] == pytest.approx(345.5, rel=0.03)
    assert per_epoch[0] > per_epoch[1] > per_epoch[2]


@pytest.mark.parametrize("workload, low, high", [("lenet5-mnist", 0.3, 0.42), ("resnet18-cifar10", 0.02, 0.08)])
def test_a_kernels_latency_draws_its_share_of_gpu_power(workload, low, high):
    """LeNet-5's kernels are ~90% fixed latency, ResNet-18's ~10%: with the latency at the calibrated share
    (0.6) LeNet-5's GPU activity falls ~36% against counting it in full, ResNet-18's ~5%; time is unchanged."""
    ph = DevicePhysics(load_device("agx-xavier"))
    full = DevicePhysics(ph.device, ph.constants, {**ph.shared, "gpu_latency_power_share": 1.0})
    mode = knobs(8, 2265.6, 1377, 2133)
    calibrated, counted = (Twin(p, load_complexity(workload)).minibatch(mode) for p in (ph, full))
    assert ph.shared["gpu_latency_power_share"] == pytest.approx(0.6)
    drop = 1.0 - float(calibrated.gpu_util[0] / counted.gpu_util[0])
    assert low < drop < high
    assert calibrated.total_s[0] == counted.total_s[0] and calibrated.power_w[0] < counted.power_w[0]


def test_power_between_base_and_budget_and_rises_with_clocks():
    d = load_device("orin-agx")
    e = twin("orin-agx", "resnet18-cifar10").epoch(list(d.presets))
    assert np.all(e["avg_power_w"] > e["base_power_w"])
    for p, power in zip(d.presets, e["avg_power_w"], strict=True):
        assert power <= (p.power_budget_w or d.specs.module_power_w) * 1.05, p.mode
    order = np.argsort([p.gpu_mhz for p in d.presets])
    assert np.all(np.diff(e["avg_power_w"][order]) > 0)


def test_vectorised_over_the_whole_space_matches_single_modes():
    d = load_device("orin-nano")
    t = twin("orin-nano", "resnet18-cifar10")
    space = d.modes().arrays().columns()
    all_modes = t.epoch(space)["epoch_time_s"]
    assert all_modes.shape == (len(d.modes()),) and np.all(np.isfinite(all_modes))
    for i in (0, 17, len(d.modes()) - 1):
        one = {k: v[i:i + 1] for k, v in space.items()}
        assert t.epoch(one)["epoch_time_s"][0] == pytest.approx(all_modes[i])


def test_epoch_energy_is_power_times_the_whole_epoch_stalls_included():
    # LeNet-5 stalls on data a third of each step on AGX Xavier: energy over the compute time alone read 39% low.
    d = load_device("agx-xavier")
    e = twin("agx-xavier", "lenet5-mnist").epoch(list(d.presets))
    assert np.all(e["stall_time_s"] > 0.3 * e["epoch_time_s"])
    assert e["epoch_energy_j"] == pytest.approx(e["avg_power_w"] * e["epoch_time_s"], rel=1e-12)


def test_a_data_bound_network_trains_faster_with_every_added_core():
    # MobileNetV3 decodes JPEGs in its DataLoader workers: on one core they share half of it (2.4x the 8-core epoch).
    e = twin("agx-xavier", "mobilenetv3-small-gld23k").epoch(
        knobs([1, 2, 4, 8], [2265.6] * 4, [1377] * 4, [2133] * 4))["epoch_time_s"]
    assert np.all(np.diff(e) < 0) and e[0] > 2 * e[-1]


def test_a_last_partial_minibatch_counts_in_the_epoch():
    t = twin("agx-xavier", "lenet5-mnist")
    e = t.epoch(knobs(8, 2265.6, 1377, 2133), batch_size=7)
    assert e["minibatches_per_epoch"][0] == 8572  # ceil(60000 / 7)
    assert e["epoch_time_s"][0] == pytest.approx(8572 * t.minibatch(knobs(8, 2265.6, 1377, 2133), 7).total_s[0])
