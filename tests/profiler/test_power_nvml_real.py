"""On a machine with an NVIDIA GPU: sampled NVML power integrates to the GPU's own energy counter.

Skipped where NVML, CUDA or a GPU is missing (CI, Jetsons). Run on a discrete-GPU host:
``pytest tests/profiler/test_power_nvml_real.py -q -s``. The comparison itself (:func:`sampled_vs_counter`)
is checked on any machine against a stand-in NVML in ``test_power_nvml_counter.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from jetpredict.profiler.power import PowerMeter, PowerSampler, PowerTrace, detect_power_meter


@dataclass(frozen=True)
class WindowEnergy:
    """One window ``[t0_s, t1_s]`` (s): the sampled power's integral alone and the counter's increase (J)."""

    t0_s: float
    t1_s: float
    sampled_j: float | None
    counter_j: float
    samples: int
    mean_sampled_w: float | None

    def report(self) -> str:
        drift = (f"{100 * (self.sampled_j - self.counter_j) / self.counter_j:+.1f}%"
                 if self.sampled_j is not None and self.counter_j else "n/a")
        return (f"NVML window {self.t1_s - self.t0_s:.2f} s: sampled {self.sampled_j} J ({self.samples} samples, "
                f"mean {self.mean_sampled_w} W) vs counter {self.counter_j:.1f} J: {drift}")


def sampled_vs_counter(meter: PowerMeter, load: Callable[[float], None], seconds: float, hz: float,
                       margin_s: float = 1.0) -> WindowEnergy:
    """Sample ``meter`` at ``hz`` around ``load(seconds)`` and integrate the sampled power alone over the load's
    window (trapezoids: the sampler also reads the energy counter, which a trace would integrate instead), and
    read the counter itself at both edges."""
    with PowerSampler(meter, hz=hz) as sampler:
        time.sleep(margin_s)
        t0, e0 = time.perf_counter(), meter.read_energy_j()
        load(seconds)
        t1, e1 = time.perf_counter(), meter.read_energy_j()
        time.sleep(margin_s)
    trace = sampler.trace
    power_only = PowerTrace(trace.times_s, trace.power_w, meter_name=trace.meter_name)  # no counter
    assert power_only.energy_counter_j is None
    return WindowEnergy(t0, t1, power_only.energy_j(t0, t1), e1 - e0, trace.samples_in(t0, t1),
                        power_only.mean_power_w(t0, t1))


@pytest.fixture
def meter():
    m = detect_power_meter("cuda:0")  # the GPU torch calls cuda:0, found by its UUID
    if not m.available:
        pytest.skip(m.name)
    if m.read_energy_j() is None:
        m.close()
        pytest.skip("GPU has no hardware energy counter")
    yield m
    m.close()


def _load(seconds: float) -> None:
    """Keep cuda:0 busy with matrix products (the meter needs CUDA through torch to find the GPU)."""
    import torch

    a = torch.randn(8192, 8192, device="cuda:0")
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        a = (a @ a).clamp_(-1, 1)
        torch.cuda.synchronize()


def test_sampled_energy_matches_the_hardware_counter(meter):
    window = sampled_vs_counter(meter, _load, seconds=8.0, hz=10)
    print("\n" + window.report())
    assert window.samples >= 60
    # NVML power is a ~1 s moving average on recent GPUs, so ramps smear; 15% bounds it.
    assert window.sampled_j == pytest.approx(window.counter_j, rel=0.15)
