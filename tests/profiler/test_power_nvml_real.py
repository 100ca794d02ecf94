"""On a machine with an NVIDIA GPU: sampled NVML power integrates to the GPU's own energy counter.

Skipped where NVML or a GPU is missing (CI, Jetsons). Run on a discrete-GPU host:
``pytest tests/profiler/test_power_nvml_real.py -q -s``.
"""

from __future__ import annotations

import time

import pytest
from jetpredict.profiler.power import NvmlMeter, PowerSampler, detect_power_meter


@pytest.fixture
def meter():
    try:
        m = NvmlMeter(0)
    except LookupError as err:
        pytest.skip(str(err))
    if m.read_energy_j() is None:
        m.close()
        pytest.skip("GPU has no hardware energy counter")
    yield m
    m.close()


def _load(seconds: float) -> None:
    """Keep the GPU busy with matrix products when torch with CUDA is present, else stay idle."""
    try:
        import torch
    except ImportError:
        time.sleep(seconds)
        return
    if not torch.cuda.is_available():
        time.sleep(seconds)
        return
    a = torch.randn(8192, 8192, device="cuda")
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        a = (a @ a).clamp_(-1, 1)
        torch.cuda.synchronize()


def test_sampled_energy_matches_the_hardware_counter(meter):
    assert detect_power_meter("cuda:0").name == "nvml:gpu0"
    with PowerSampler(meter, hz=10) as sampler:
        time.sleep(1.0)
        t0, e0 = time.perf_counter(), meter.read_energy_j()
        _load(8.0)
        t1, e1 = time.perf_counter(), meter.read_energy_j()
        time.sleep(1.0)
    trace = sampler.trace
    sampled = trace.energy_j(t0, t1)
    counter = e1 - e0
    print(f"\nNVML window {t1 - t0:.2f} s: sampled {sampled:.1f} J ({trace.samples_in(t0, t1)} samples, "
          f"mean {trace.mean_power_w(t0, t1):.1f} W) vs counter {counter:.1f} J: "
          f"{100 * (sampled - counter) / counter:+.1f}%")
    assert trace.samples_in(t0, t1) >= 60
    # NVML power is a ~1 s moving average on recent GPUs, so ramps smear; 15% bounds it.
    assert sampled == pytest.approx(counter, rel=0.15)
