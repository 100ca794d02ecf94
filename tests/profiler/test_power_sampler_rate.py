"""set_rate() takes effect at once: a raised rate fills the window that opens right after it."""

from __future__ import annotations

import threading
import time

import pytest
from jetpredict.profiler.metering import metered
from jetpredict.profiler.power import PowerMeter, PowerSampler
from jetpredict.profiler.power_defaults import MIN_SAMPLER_HZ

OLD_HZ, NEW_HZ = MIN_SAMPLER_HZ, 100.0  # an old period of 1 s: a tick still waited for at it is obvious


class ClockMeter(PowerMeter):
    """A flat 5 W rail that records when (perf_counter, s) each read happened."""

    name = "test:clock"

    def __init__(self) -> None:
        self.read_times: list[float] = []
        self._read = threading.Condition()

    def read_power_w(self) -> float:
        with self._read:
            self.read_times.append(time.perf_counter())
            self._read.notify_all()
        return 5.0

    def wait_for_reads(self, n: int, timeout_s: float = 30.0) -> None:
        """Block until ``n`` reads in all (counts, not sleeps: a loaded machine only lengthens the wait)."""
        with self._read:
            assert self._read.wait_for(lambda: len(self.read_times) >= n, timeout_s), "sampler stalled"


def test_first_sample_after_a_raised_rate_comes_within_the_new_period_not_the_old():
    meter = ClockMeter()
    sampler = PowerSampler(meter, hz=OLD_HZ).start()  # start() reads once; the thread then waits ~1 s
    try:
        t_set = time.perf_counter()
        sampler.set_rate(NEW_HZ)
        meter.wait_for_reads(2)
        first = meter.read_times[1] - t_set
    finally:
        sampler.stop()
    # Rescheduled at set_rate + 1/NEW_HZ (10 ms); the old tick was ~1 s away. Half the old period leaves
    # a loaded machine ample room either way.
    assert first < 0.5 / OLD_HZ, f"first sample {first:.3f} s after set_rate({NEW_HZ:g})"


def test_a_window_opened_with_a_raised_rate_holds_about_rate_times_window_samples():
    meter = ClockMeter()
    with metered(meter, hz=OLD_HZ) as w:
        w.restart(NEW_HZ)  # as the runner does before the measured minibatches
        meter.wait_for_reads(len(meter.read_times) + 20)
    expected = NEW_HZ * w.time_s
    # Late by one old period, the window is ~1.2 s for ~20 samples (ratio ~0.17); on time it is ~0.2 s.
    assert w.samples >= 0.5 * expected, f"{w.samples} samples in {w.time_s:.3f} s at {NEW_HZ:g} Hz"
    assert w.energy_j == pytest.approx(5.0 * w.time_s)


def test_stop_right_after_set_rate_ends_the_thread_and_brackets_the_trace():
    for _ in range(20):  # the wake from set_rate and the one from stop race each other: neither may hang
        meter = ClockMeter()
        sampler = PowerSampler(meter, hz=OLD_HZ).start()
        sampler.set_rate(NEW_HZ)
        trace = sampler.stop()
        assert not sampler.running
        assert len(trace) >= 2 and trace.hz == NEW_HZ


def test_a_lowered_rate_keeps_an_earlier_tick_and_then_uses_the_new_period():
    meter = ClockMeter()
    sampler = PowerSampler(meter, hz=NEW_HZ).start()
    try:
        meter.wait_for_reads(3)
        sampler.set_rate(OLD_HZ)
        n = len(meter.read_times)
        time.sleep(0.3)
        assert len(meter.read_times) <= n + 1  # at most the tick already due; none every 10 ms
    finally:
        sampler.stop()


class StallMeter(ClockMeter):
    """:class:`ClockMeter` whose ``stall_at``-th read (from 0) takes ``stall_s``, as a bus that hangs once."""

    def __init__(self, stall_at: int, stall_s: float) -> None:
        super().__init__()
        self.stall_at, self.stall_s = stall_at, stall_s

    def read_power_w(self) -> float:
        if len(self.read_times) == self.stall_at:
            time.sleep(self.stall_s)
        return super().read_power_w()


def test_a_slow_read_skips_the_missed_ticks_instead_of_a_burst_of_samples():
    """After a read that stalls for 15 periods the sampler goes on at its rate: a burst of back-to-back reads
    to catch up would record one moment ~15 times and inflate the window's sample count."""
    meter = StallMeter(stall_at=3, stall_s=0.3)
    sampler = PowerSampler(meter, hz=NEW_HZ / 2).start()  # 20 ms period
    try:
        meter.wait_for_reads(10)
    finally:
        sampler.stop()
    gaps = [b - a for a, b in zip(meter.read_times[3:10], meter.read_times[4:11], strict=False)]
    short = sum(g < 0.002 for g in gaps)  # a late wake-up may shorten one interval, never many
    assert short <= 2, f"{short} of {len(gaps)} reads after the stall came < 2 ms apart: {gaps}"
