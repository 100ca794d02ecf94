"""The GPU test's comparison (``test_power_nvml_real.sampled_vs_counter``) on any machine: against a stand-in
NVML whose power reading and energy counter disagree, it must see the disagreement. The sampler reads the
counter with every sample, so integrating the trace as it is would compare the counter with itself."""

from __future__ import annotations

import time
import types

import pytest
from jetpredict.profiler.power import NvmlMeter
from test_power_nvml_real import sampled_vs_counter


def counter_nvml(power_w: float, counter_w: float) -> types.SimpleNamespace:
    """One GPU reading ``power_w`` (mW in NVML's units) whose energy counter (mJ) advances at ``counter_w``."""
    start = time.perf_counter()
    return types.SimpleNamespace(
        nvmlInit=lambda: None, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: 1,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetPowerUsage=lambda h: int(power_w * 1e3),
        nvmlDeviceGetTotalEnergyConsumption=lambda h: int((time.perf_counter() - start) * counter_w * 1e3))


def _window(power_w: float, counter_w: float):
    with NvmlMeter(0, nvml=counter_nvml(power_w, counter_w)) as meter:
        return sampled_vs_counter(meter, time.sleep, seconds=0.5, hz=50, margin_s=0.2)


def test_a_power_reading_half_the_counters_is_caught():
    w = _window(power_w=50.0, counter_w=100.0)
    span = w.t1_s - w.t0_s
    assert w.sampled_j == pytest.approx(50.0 * span)  # the sampled power alone, not the counter
    assert w.counter_j == pytest.approx(100.0 * span, rel=0.02)
    assert w.mean_sampled_w == pytest.approx(50.0)
    assert w.sampled_j != pytest.approx(w.counter_j, rel=0.15)  # the GPU test's assertion fails, as it must


def test_agreeing_power_and_counter_pass_the_comparison():
    w = _window(power_w=100.0, counter_w=100.0)
    assert w.samples >= 10
    assert w.sampled_j == pytest.approx(w.counter_j, rel=0.15)
