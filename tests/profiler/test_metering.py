"""One measurement window (profiler.metering): time and energy over exactly the timed block, null energy
with a reason (never 0) without a meter, sync before each clock read, and a window opened late."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest
from jetpredict.profiler.metering import MeteredWindow, cuda_sync, metered
from jetpredict.profiler.power import NullPowerMeter, PowerMeter, PowerReadError, detect_power_meter


class ConstantMeter(PowerMeter):
    """A meter reading ``watts`` (W) on every read."""

    name = "const"

    def __init__(self, watts: float) -> None:
        self.watts = watts
        self.closed = False

    def read_power_w(self) -> float:
        return self.watts

    def close(self) -> None:
        self.closed = True


class BrokenMeter(ConstantMeter):
    name = "broken"

    def read_power_w(self) -> float:
        raise PowerReadError("sensor gone")


def test_energy_is_power_integrated_over_exactly_the_timed_window():
    meter = ConstantMeter(12.0)
    with metered(meter, hz=100.0) as w:
        assert w.sampling and w.t0_s is not None and w.time_s is None
        time.sleep(0.2)
    assert w.time_s == pytest.approx(w.t1_s - w.t0_s) and w.time_s >= 0.2
    assert w.energy_j == pytest.approx(12.0 * w.time_s)
    assert w.avg_power_w == pytest.approx(12.0)
    assert w.null_reason is None and w.samples >= 2 and w.meter == "const"
    assert w.trace.times_s[0] <= w.t0_s and w.trace.times_s[-1] >= w.t1_s  # the window is bracketed
    assert not w.sampling and not meter.closed  # the sampler stopped; the meter is the caller's


@pytest.mark.parametrize("meter, reason", [(None, "none: no sensor found"),
                                           (NullPowerMeter("no INA3221"), "none: no INA3221")])
def test_no_meter_gives_null_energy_with_the_reason_never_zero(meter, reason):
    with metered(meter) as w:
        time.sleep(0.01)
    assert w.time_s >= 0.01 and w.trace is None and not w.sampling
    assert w.energy_j is None and w.avg_power_w is None and w.null_reason == reason


def test_failed_reads_give_null_energy_naming_the_error():
    with metered(BrokenMeter(1.0), hz=100.0) as w:
        time.sleep(0.05)
    assert w.energy_j is None and "failed reads" in w.null_reason and "sensor gone" in w.null_reason


def test_sync_runs_before_each_clock_read_and_the_block_may_raise():
    calls: list[float] = []
    with pytest.raises(ZeroDivisionError), metered(ConstantMeter(5.0), hz=100.0,
                                                   sync=lambda: calls.append(time.perf_counter())) as w:
        time.sleep(0.05)
        1 / 0  # noqa: B018
    assert len(calls) == 2 and calls[0] <= w.t0_s and calls[1] <= w.t1_s
    assert w.energy_j == pytest.approx(5.0 * w.time_s)  # closed and measured on the way out
    assert not w.sampling


def test_a_sync_that_raises_on_exit_stops_the_sampler_and_says_why():
    calls: list[int] = []

    def sync() -> None:  # fine when the window opens, a CUDA error when it closes
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

    with pytest.raises(RuntimeError, match="illegal memory access"), metered(ConstantMeter(5.0), hz=100.0,
                                                                            sync=sync) as w:
        time.sleep(0.02)
    assert not w.sampling and w.trace is not None  # stopped: the trace is whole
    assert not any(t.name == "jetpredict-power-sampler" and t.is_alive() for t in threading.enumerate())
    assert w.energy_j is None and w.time_s is None
    assert "could not be closed" in w.null_reason and "illegal memory access" in w.null_reason


def test_restart_opens_the_window_later_and_keeps_the_lead_in_the_trace():
    with metered(ConstantMeter(8.0), hz=50.0) as w:
        first = w.t0_s
        time.sleep(0.1)
        w.restart(hz=200.0)
        time.sleep(0.1)
    assert w.t0_s > first + 0.09 and w.time_s == pytest.approx(w.t1_s - w.t0_s)
    assert w.trace.times_s[0] <= first  # the lead-in was sampled too
    assert w.energy_j == pytest.approx(8.0 * w.time_s)
    with pytest.raises(RuntimeError, match="closed"):
        w.restart()


def test_a_fake_ina3221_reads_as_the_module_power(fake_root):
    fake_root.add_ina3221_hwmon("1-0040", 1, [("VDD_IN", 5000, 2400), ("VDD_CPU_GPU_CV", 1000, 500),
                                              ("VDD_SOC", 1000, 300)])
    meter = detect_power_meter("orin-nano")
    with meter, metered(meter, hz=100.0) as w:
        time.sleep(0.1)
    assert isinstance(w, MeteredWindow) and "VDD_IN" in w.meter
    assert w.avg_power_w == pytest.approx(12.0)


@pytest.mark.parametrize("available, initialised, synced", [(True, True, 1), (True, False, 0), (False, False, 0)])
def test_cuda_sync_synchronizes_only_a_cuda_this_process_initialised(monkeypatch, available, initialised, synced):
    """cuda_sync reads the torch already imported (a spy in its place: the CPU wheel has no CUDA to wait on):
    it waits for CUDA only where torch has initialised it; a process training on the CPU has nothing queued."""
    calls: list[str] = []
    cuda = SimpleNamespace(is_available=lambda: available, is_initialized=lambda: initialised,
                           synchronize=lambda: calls.append("synchronize"))
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=cuda))
    cuda_sync()
    assert calls == ["synchronize"] * synced


def test_metering_imports_neither_torch_nor_the_sampler():
    code = ("import sys; sys.modules['torch'] = None; import jetpredict.profiler.metering as m; "
            "w = m.metered(None)\nwith w: pass\n"
            "print('jetpredict.profiler.power.sampler' in sys.modules, w.null_reason)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False none: no sensor found"
