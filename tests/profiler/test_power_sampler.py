"""PowerSampler samples a meter in the background and integrates the measured window."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from jetpredict.models.errors import InputError
from jetpredict.profiler.power import NullPowerMeter, PowerMeter, PowerReadError, PowerSampler, hz_for_window

from tools.testing import wait_until


class RampMeter(PowerMeter):
    """A sensor whose power is a known function of perf_counter time: P = 4 + 2 t (W); reads number
    ``fail_reads[0]`` to ``fail_reads[1]`` (1-based, inclusive) fail."""

    name = "test:ramp"

    def __init__(self, fail_reads: tuple[int, int] | None = None) -> None:
        self.t_start = time.perf_counter()
        self.fail_reads = fail_reads
        self.reads = 0

    def read_power_w(self) -> float:
        self.reads += 1
        if self.fail_reads and self.fail_reads[0] <= self.reads <= self.fail_reads[1]:
            raise PowerReadError("i2c read failed")
        return 4.0 + 2.0 * (time.perf_counter() - self.t_start)


class CountingMeter(RampMeter):
    """The ramp's energy counter (J: the integral of 4 + 2 t from a large origin), while the power it reports
    is a flat 1 W: energy that agrees with the ramp can only have come from the counter. Counter reads
    number ``fail_counter[0]`` to ``fail_counter[1]`` fail."""

    name = "test:counter"

    def __init__(self, fail_counter: tuple[int, int] | None = None) -> None:
        super().__init__()
        self.fail_counter = fail_counter
        self.counter_reads = 0

    def read_power_w(self) -> float:
        super().read_power_w()
        return 1.0

    def read_energy_j(self) -> float:
        self.counter_reads += 1
        if self.fail_counter and self.fail_counter[0] <= self.counter_reads <= self.fail_counter[1]:
            raise PowerReadError("counter busy")
        s = time.perf_counter() - self.t_start
        return 5e6 + 4 * s + s ** 2


def _wait_for_reads(meter: RampMeter, reads: int, timeout_s: float = 30.0) -> None:
    """Wait until ``meter`` has been read ``reads`` times: counts of reads, not sleeps, so a loaded machine
    that delays the sampler's thread changes nothing but the wait."""
    wait_until(lambda: meter.reads >= reads, timeout_s, lambda: f"{meter.reads} of {reads} reads in {timeout_s} s",
               poll_s=0.005)


@pytest.mark.parametrize("meter_type", [RampMeter, CountingMeter], ids=["sampled", "counter"])
def test_sampler_integrates_a_known_power_function(meter_type):
    """The ramp's energy from its sampled power (trapezoids) or, where the meter has one, from its energy
    counter (the counting meter's power reads a flat 1 W: only the counter gives the ramp's energy)."""
    meter = meter_type()
    with PowerSampler(meter, hz=50) as sampler:
        _wait_for_reads(meter, 3)
        t0 = time.perf_counter()
        _wait_for_reads(meter, meter.reads + 30)
        t1 = time.perf_counter()
        _wait_for_reads(meter, meter.reads + 3)
    trace = sampler.trace
    a, b = t0 - meter.t_start, t1 - meter.t_start
    exact = 4 * (b - a) + (b**2 - a**2)
    # Linear power: trapezoids are exact up to the time-stamping error of each read.
    assert trace.energy_j(t0, t1) == pytest.approx(exact, rel=0.02)
    assert trace.samples_in(t0, t1) >= 10
    assert trace.meter_name == meter.name and trace.read_errors == 0
    counted = meter.read_energy_j() is not None
    assert (trace.energy_counter_j is not None) == counted  # RampMeter: PowerMeter's default, no counter
    assert not counted or len(trace.energy_counter_j) == len(trace)


def test_failed_counter_reads_fall_back_to_the_sampled_power_at_that_edge():
    meter = CountingMeter(fail_counter=(4, 6))
    with PowerSampler(meter, hz=100) as sampler:
        _wait_for_reads(meter, 12)
    trace = sampler.trace
    assert np.flatnonzero(np.isnan(trace.energy_counter_j)).tolist() == [3, 4, 5]
    assert trace.read_errors == 0  # the power reads all succeeded
    t = trace.times_s
    # An edge next to a failed counter read: the flat 1 W samples; both edges clear of them: the counter.
    assert trace.energy_j(t[4], t[8]) == pytest.approx(t[8] - t[4])
    ramp = trace.energy_counter_j
    assert trace.energy_j(t[1], t[9]) == pytest.approx(ramp[9] - ramp[1])


def test_start_and_stop_bracket_any_window_between_them():
    sampler = PowerSampler(RampMeter(), hz=1).start()
    t0 = time.perf_counter()
    t1 = time.perf_counter() + 1e-4
    while time.perf_counter() < t1:
        pass
    trace = sampler.stop()
    assert len(trace) == 2  # one at start, one at stop: the 1 Hz tick never came
    assert trace.times_s[0] <= t0 and trace.times_s[-1] >= t1
    assert trace.samples_in(t0, t1) == 0 and trace.energy_j(t0, t1) is None


class SignMeter(RampMeter):
    """The ramp, read with the wrong sign on reads ``fail_reads``: a driver's negative (or garbled) power."""

    name = "test:sign"

    def read_power_w(self) -> float:
        try:
            return super().read_power_w()
        except PowerReadError:
            return -(4.0 + 2.0 * (time.perf_counter() - self.t_start))


@pytest.mark.parametrize(("meter_type", "error"), [(RampMeter, "i2c read failed"),
                                                 (SignMeter, "not a finite non-negative power")])
def test_read_errors_and_negative_readings_become_nan_and_unknown_energy(meter_type, error):
    meter = meter_type(fail_reads=(4, 6))
    with PowerSampler(meter, hz=100) as sampler:
        _wait_for_reads(meter, 12)
    trace = sampler.trace
    assert trace.read_errors == 3 and error in trace.last_error
    failed = np.flatnonzero(np.isnan(trace.power_w))
    assert failed.tolist() == [3, 4, 5]
    t = trace.times_s
    # A window that touches a failed read has no energy; one after the last failed read has.
    assert trace.energy_j(t[2], t[7]) is None and trace.energy_j(t[4] + 1e-9, t[5]) is None
    assert trace.energy_j(t[6], t[-1]) is not None and trace.energy_j(t[0], t[2]) is not None


def test_null_meter_gives_an_empty_trace_and_no_thread():
    before = threading.active_count()
    with PowerSampler(NullPowerMeter(), hz=10) as sampler:
        assert threading.active_count() == before
    assert len(sampler.trace) == 0
    assert sampler.trace.meter_name == "none: no sensor found"
    assert sampler.trace.energy_j(0, 1) is None


@pytest.mark.parametrize("hz", [0.5, 0, -3, 5000, "fast"])
def test_rate_outside_the_allowed_range_is_an_input_error(hz):
    with pytest.raises(InputError) as err:
        PowerSampler(NullPowerMeter(), hz=hz)
    assert err.value.field == "hz"


def test_default_rate_is_10_hz_and_double_start_is_refused():
    sampler = PowerSampler(RampMeter())
    assert sampler.hz == 10.0
    sampler.start()
    try:
        with pytest.raises(RuntimeError):
            sampler.start()
    finally:
        sampler.stop()
    assert not sampler.running


@pytest.mark.parametrize("window_s, expected", [(60.0, 10.0), (2.0, 30.0), (0.1, 100.0), (0.0, 10.0)])
def test_rate_for_60_samples_per_window_when_the_window_allows(window_s, expected):
    assert hz_for_window(window_s) == pytest.approx(expected)
