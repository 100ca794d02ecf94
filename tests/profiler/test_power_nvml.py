"""The NVML meter against a stand-in pynvml module (the library needs an NVIDIA driver)."""

from __future__ import annotations

import itertools
import types

import pytest
from jetpredict.profiler.power import NvmlMeter, PowerReadError, PowerSampler, detect_power_meter


class FakeNvmlError(Exception):
    pass


def fake_pynvml(power_mw=(250_000, 120_000), energy_mj=(5_000_000, None), init_error=None, limits_mw=(None, None)):
    """A module with the pynvml calls the meter uses; records init/shutdown. ``limits_mw``: each GPU's power-limit
    constraints ``(min, max)`` in mW, None where NVML answers "Not Supported"; ``state["power_mw"]`` is what each
    GPU reads."""
    state = {"init": 0, "shutdown": 0, "fail": False, "power_mw": list(power_mw)}
    mod = types.SimpleNamespace(state=state)

    def init():
        if init_error:
            raise FakeNvmlError(init_error)
        state["init"] += 1

    def power(handle):
        if state["fail"]:
            raise FakeNvmlError("GPU is lost")
        return state["power_mw"][handle]

    def energy(handle):
        if energy_mj[handle] is None:
            raise FakeNvmlError("Not Supported")
        return energy_mj[handle]

    def limits(handle):
        if limits_mw[handle] is None:
            raise FakeNvmlError("Not Supported")
        return list(limits_mw[handle])

    mod.nvmlInit = init
    mod.nvmlDeviceGetPowerManagementLimitConstraints = limits
    mod.nvmlShutdown = lambda: state.__setitem__("shutdown", state["shutdown"] + 1)
    mod.nvmlDeviceGetCount = lambda: len(power_mw)
    mod.nvmlDeviceGetHandleByIndex = lambda i: i
    mod.nvmlDeviceGetPowerUsage = power
    mod.nvmlDeviceGetTotalEnergyConsumption = energy
    return mod


def test_reads_board_power_of_the_chosen_gpu():
    nvml = fake_pynvml()
    meter = NvmlMeter(1, nvml=nvml)
    assert meter.name == "nvml:gpu1" and meter.domain == "gpu"
    assert meter.read_power_w() == pytest.approx(120.0)
    assert meter.read_energy_j() is None  # not supported on that GPU
    assert NvmlMeter(0, nvml=nvml).read_energy_j() == pytest.approx(5000.0)
    meter.close()
    meter.close()
    assert nvml.state["shutdown"] == 1


def test_a_window_takes_its_energy_from_the_gpus_counter_where_it_has_one():
    """Board power of 100 W sampled, while the counter (mJ) advances 300 J between the sampler's first and
    last reads: the window's energy is the counter's, in J."""
    nvml = fake_pynvml(power_mw=(100_000, 100_000))
    reads = itertools.count()
    nvml.nvmlDeviceGetTotalEnergyConsumption = lambda handle: 7_000_000 + 300_000 * next(reads)
    trace = PowerSampler(NvmlMeter(0, nvml=nvml), hz=1).start().stop()  # 2 reads, 3 on a stalled machine
    t = trace.times_s
    assert trace.energy_j(t[0], t[-1]) == pytest.approx(300.0 * (len(trace) - 1))
    unsupported = PowerSampler(NvmlMeter(1, nvml=fake_pynvml()), hz=1).start().stop()
    assert unsupported.energy_counter_j is None  # that GPU has no counter: the sampled power integrates
    t = unsupported.times_s
    assert unsupported.energy_j(t[0], t[-1]) == pytest.approx(120.0 * float(t[-1] - t[0]))


def test_lost_gpu_mid_run_is_a_read_error():
    nvml = fake_pynvml()
    meter = NvmlMeter(0, nvml=nvml)
    nvml.state["fail"] = True
    with pytest.raises(PowerReadError, match="GPU is lost"):
        meter.read_power_w()


@pytest.mark.parametrize("limits", [None, (100_000, 450_000)])
def test_a_zero_reading_is_a_failed_read_whether_or_not_nvml_reports_limits(limits):
    """0 mW would integrate to 0 J: no GPU board draws nothing, so the read fails, naming the value and bound."""
    meter = NvmlMeter(0, nvml=fake_pynvml(power_mw=(0, 0), limits_mw=(limits, limits)))
    with pytest.raises(PowerReadError, match=r"^nvml:gpu0: implausible GPU board power 0 W \(below 0\.001 W"):
        meter.read_power_w()


def test_a_reading_far_above_the_max_power_limit_fails_and_a_transient_above_it_does_not():
    """GPU 0 may be capped at most at 450 W: 600 W (a transient above the cap) reads, 1000 W (more than twice
    it) fails naming the bound; GPU 1 reports no constraints, so only the zero rule applies to it."""
    nvml = fake_pynvml(power_mw=(600_000, 10_000_000), limits_mw=((100_000, 450_000), None))
    meter = NvmlMeter(0, nvml=nvml)
    assert meter.read_power_w() == pytest.approx(600.0)
    nvml.state["power_mw"][0] = 1_000_000
    with pytest.raises(PowerReadError) as err:
        meter.read_power_w()
    assert str(err.value).startswith("nvml:gpu0: implausible GPU board power 1000 W (above 900 W")
    assert "450 W maximum power limit" in str(err.value)
    assert NvmlMeter(1, nvml=nvml).read_power_w() == pytest.approx(10_000.0)  # no bound known: not refused


def test_no_driver_or_bad_index_is_a_lookup_error():
    with pytest.raises(LookupError, match="Driver Not Loaded"):
        NvmlMeter(0, nvml=fake_pynvml(init_error="Driver Not Loaded"))
    nvml = fake_pynvml()
    with pytest.raises(LookupError, match="index 5"):
        NvmlMeter(5, nvml=nvml)
    assert nvml.state["shutdown"] == 1  # a failed open does not leak an NVML session


def test_detection_uses_nvml_for_an_nvml_index(fake_root, monkeypatch):
    """``gpuN`` is NVML's own index; a CUDA device is matched by its UUID (test_power_nvml_uuid.py)."""
    monkeypatch.setattr("jetpredict.profiler.power.nvml._load_pynvml", lambda: fake_pynvml())
    meter = detect_power_meter("gpu1")
    assert meter.name == "nvml:gpu1"


def test_cpu_training_on_a_host_does_not_report_gpu_power(fake_root, monkeypatch):
    monkeypatch.setattr("jetpredict.profiler.power.nvml._load_pynvml", lambda: fake_pynvml())
    monkeypatch.setenv("PATH", str(fake_root.bin))
    meter = detect_power_meter("host")
    assert meter.name == "none: " + "; ".join(meter.tried) and not meter.available
    assert any("CPU training" in t for t in meter.tried)
