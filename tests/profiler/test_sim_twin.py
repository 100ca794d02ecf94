"""The twin holds the published mechanisms (POMACS 2022): GPU-bound vs CPU-bound models, workers, MAXN."""

from __future__ import annotations

import numpy as np
import pytest
from jetpredict.models.catalogue import load_device
from jetpredict.profiler.sim.complexity import load_complexity
from jetpredict.profiler.sim.physics import DevicePhysics
from jetpredict.profiler.sim.twin import Twin


def twin(device: str, workload: str) -> Twin:
    return Twin(DevicePhysics(device), load_complexity(workload))


def knobs(cores, cpu, gpu, emc):
    return {"cpu_cores": np.atleast_1d(cores), "cpu_mhz": np.atleast_1d(cpu),
            "gpu_mhz": np.atleast_1d(gpu), "emc_mhz": np.atleast_1d(emc)}


def epoch_s(t: Twin, *mode, workers=4, batch=None) -> float:
    return float(t.epoch(knobs(*mode), batch, workers)["epoch_time_s"][0])


@pytest.mark.parametrize("workload", ["resnet18-cifar10", "vgg11-cifar10"])
def test_gpu_bound_models_slow_down_with_lower_gpu_and_emc_clocks(workload):
    t = twin("agx-xavier", workload)
    maxn = epoch_s(t, 8, 2265.6, 1377, 2133)
    assert epoch_s(t, 8, 2265.6, 675.75, 2133) > 1.25 * maxn  # GPU clock halved
    assert epoch_s(t, 8, 2265.6, 1377, 1065.6) > 1.1 * maxn   # EMC clock halved (published: +35%)
    assert epoch_s(t, 8, 1190.4, 1377, 2133) < 1.15 * maxn    # CPU clock halved: small effect


def test_lenet_is_cpu_bound():
    t = twin("xavier-nx", "lenet5-mnist")
    top = epoch_s(t, 6, 1907.2, 1109.25, 1866)
    assert epoch_s(t, 6, 960.0, 1109.25, 1866) > 1.5 * top           # CPU clock halved
    assert epoch_s(t, 2, 1907.2, 1109.25, 1866) > 1.05 * top          # fewer cores, 4 workers
    assert epoch_s(t, 6, 1907.2, 510.0, 1866) < 1.10 * top            # GPU clock halved: hardly


def test_maxn_is_fastest_but_not_lowest_energy_for_resnet18():
    for device in ("agx-xavier", "orin-agx", "nano"):  # the devices with a MAXN preset
        d = load_device(device)
        e = twin(device, "resnet18-cifar10").epoch(list(d.presets))
        i_maxn = [p.mode for p in d.presets].index(d.maxn.mode)
        assert np.argmin(e["epoch_time_s"]) == i_maxn
        assert np.argmin(e["epoch_energy_j"]) != i_maxn
        assert e["epoch_energy_j"][i_maxn] > 1.05 * e["epoch_energy_j"].min()


def test_resnet18_at_the_lowest_gpu_clock_matches_the_published_maxn_fact():
    # facts.csv (S1 §5.6): AGX Xavier MAXN vs the same mode with the GPU at 114.75 MHz, ResNet-18/CIFAR-10:
    # 10.3x speed-up at 3.6x the power.
    e = twin("agx-xavier", "resnet18-cifar10").epoch(knobs([8, 8], [2265.6] * 2, [1377, 114.75], [2133] * 2))
    speedup = e["epoch_time_s"][1] / e["epoch_time_s"][0]
    power_ratio = e["avg_power_w"][0] / e["avg_power_w"][1]
    assert speedup == pytest.approx(10.3, rel=0.20)
    assert power_ratio == pytest.approx(3.6, rel=0.15)
    assert e["epoch_energy_j"][0] < e["epoch_energy_j"][1]  # MAXN uses less energy per epoch here


def test_workers_pipeline_the_fetch_with_compute():
    t = twin("agx-xavier", "mobilenetv3-small-gld23k")
    mode = knobs(8, 2265.6, 1377, 2133)
    stalls = [float(t.epoch(mode, None, w)["stall_time_s"][0]) for w in (0, 1, 2, 4)]
    assert stalls[0] > 5 * stalls[3]                 # published: 285 s vs 13 s
    assert stalls == sorted(stalls, reverse=True)


def test_small_batches_are_launch_bound():
    t = twin("agx-xavier", "resnet18-cifar10")
    per_epoch = [epoch_s(t, 8, 2265.6, 1377, 2133, batch=b) for b in (1, 16, 64)]
    assert per_epoch[0] > 3 * per_epoch[1] > 3 * per_epoch[2] / 1.5


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
    space = d.modes().as_arrays()
    all_modes = t.epoch(space)["epoch_time_s"]
    assert all_modes.shape == (len(d.modes()),) and np.all(np.isfinite(all_modes))
    for i in (0, 17, len(d.modes()) - 1):
        one = {k: v[i:i + 1] for k, v in space.items()}
        assert t.epoch(one)["epoch_time_s"][0] == pytest.approx(all_modes[i])
