"""A reading is stamped with the time it was taken, not the time the sampler polled it: tegrastats hands out
the latest line, read up to one interval earlier, and one line polled twice is one sample, not two."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest
from jetpredict.profiler.power import PowerMeter, PowerReadError, PowerSampler, TegrastatsMeter

#: A Nano line whose module rail (POM_5V_IN, mW) the tests set per line, so that a sample names its line.
NANO_LINE = ("RAM 1504/3956MB (lfb 331x4MB) CPU [44%@1479,22%@1479] EMC_FREQ 7%@1600 GR3D_FREQ 86%@921 "
             "POM_5V_IN {mw}/3285 POM_5V_GPU 1113/213 POM_5V_CPU 539/722")


class LineMeter(PowerMeter):
    """tegrastats in miniature: a line every ``interval_s`` from ``origin_s`` (perf_counter s) holding
    ``power(t)`` (W) at that line's time; a read hands out the latest line, stamped with its time."""

    name = "test:lines"

    def __init__(self, interval_s: float, origin_s: float, power: Callable[[float], float]) -> None:
        self.interval_s, self.origin_s, self.power = interval_s, origin_s, power

    @property
    def update_hz(self) -> float:
        return 1.0 / self.interval_s

    def line_time(self, k: int) -> float:
        return self.origin_s + k * self.interval_s

    def read_timed_power_w(self) -> tuple[float, float]:
        t = self.line_time(math.floor((time.perf_counter() - self.origin_s) / self.interval_s))
        return t, self.power(t)

    def read_power_w(self) -> float:
        return self.read_timed_power_w()[1]


def _sleep_until(t: float) -> None:
    time.sleep(max(0.0, t - time.perf_counter()))


def test_each_line_is_one_sample_stamped_with_the_line_time():
    """Polled five times per line, each line is recorded once, at the time it was taken."""
    meter = LineMeter(0.1, time.perf_counter() - 0.05, lambda t: 5.0)
    with PowerSampler(meter, hz=50) as sampler:
        _sleep_until(meter.line_time(8))
    t = sampler.trace.times_s
    k = np.round((t - meter.origin_s) / meter.interval_s)
    assert np.array_equal(t, [meter.line_time(int(i)) for i in k])  # every stamp is a line's own time
    assert np.all(np.diff(k) > 0), "a line was recorded twice"
    assert k[0] == 0 and k[-1] >= 8


def test_a_power_step_is_integrated_where_it_happened():
    """5 W, then 15 W from halfway between lines 10 and 11: with the lines' own times the trapezoids give the
    exact energy; stamped when polled, the step lands up to a line late (up to 1 J low here)."""
    # Lines 0.2 s apart, polled every 20 ms: a poll misses a line only if the sampler stalls for 0.2 s.
    origin = time.perf_counter() - 0.1
    step = origin + 10.5 * 0.2
    meter = LineMeter(0.2, origin, lambda t: 5.0 if t < step else 15.0)
    with PowerSampler(meter, hz=50) as sampler:
        _sleep_until(origin + 0.66)
        t0 = time.perf_counter()
        _sleep_until(origin + 3.74)
        t1 = time.perf_counter()
    trace = sampler.trace
    assert trace.energy_j(t0, t1) == pytest.approx(5.0 * (step - t0) + 15.0 * (t1 - step), abs=0.05)
    assert {meter.line_time(10), meter.line_time(11)} <= set(trace.times_s)  # the lines either side of the step


def test_stop_waits_for_a_reading_taken_after_it():
    """The window's end is bracketed although the latest line, when stop() comes, is older than the end."""
    meter = LineMeter(0.1, time.perf_counter() - 0.05, lambda t: 7.0)
    sampler = PowerSampler(meter, hz=50).start()
    t0 = time.perf_counter()
    _sleep_until(meter.line_time(3) + 0.02)
    t1 = time.perf_counter()
    trace = sampler.stop()
    assert trace.times_s[-1] >= t1 and trace.times_s[-1] in {meter.line_time(k) for k in (4, 5)}
    assert trace.energy_j(t0, t1) == pytest.approx(7.0 * (t1 - t0))


class PreviousPollMeter(PowerMeter):
    """Each read hands out the reading of the poll before it, stamped with that poll's time (a sensor that
    reports its last finished conversion): every read is a new reading, and every one older than the read.
    ``polls``: (perf_counter s, thread id) of each poll, the first one at construction."""

    name = "test:previous-poll"

    def __init__(self) -> None:
        self.polls = [(time.perf_counter(), threading.get_ident())]

    def read_timed_power_w(self) -> tuple[float, float]:
        taken = self.polls[-1][0]
        self.polls.append((time.perf_counter(), threading.get_ident()))
        return taken, 7.0

    def read_power_w(self) -> float:
        return self.read_timed_power_w()[1]


def test_stop_waits_for_a_reading_taken_after_it_not_just_a_new_one():
    """The first read in stop() brings a new reading, but one taken before the stop: the end is bracketed
    only by the next, taken during stop() itself. Decided by which poll a stamp is, not by timing: at 1 Hz
    the sampler's thread rarely polls at all, and its polls, whenever they come, are told apart by thread."""
    meter = PreviousPollMeter()
    sampler = PowerSampler(meter, hz=1.0).start()
    t0 = time.perf_counter()
    t1 = time.perf_counter()
    trace = sampler.stop()
    me = threading.get_ident()
    stop_polls = [t for t, thread in meter.polls[2:] if thread == me]  # after construction's and start()'s
    assert trace.times_s[0] <= t0 and trace.times_s[-1] >= t1
    assert trace.times_s[-1] in stop_polls, "the end is bracketed by a reading taken before stop()"


@pytest.mark.parametrize("stamp", [math.nan, math.inf, "future"])
def test_a_reading_stamped_at_no_time_or_in_the_future_is_a_failed_read(stamp):
    class BadStamp(PowerMeter):
        name = "test:bad-stamp"

        def read_timed_power_w(self) -> tuple[float, float]:
            return (time.perf_counter() + 60.0 if stamp == "future" else stamp), 5.0

        def read_power_w(self) -> float:
            return 5.0

    sampler = PowerSampler(BadStamp(), hz=50).start()
    trace = sampler.stop()
    assert len(trace) == 2 and np.all(np.isnan(trace.power_w)) and np.all(np.isfinite(trace.times_s))
    assert trace.read_errors == 2 and "time" in trace.last_error


class SlowReadMeter(PowerMeter):
    """A synchronous sensor whose read takes ``read_s``; ``reads``: (start, end) perf_counter s of each."""

    name = "test:slow-read"

    def __init__(self, read_s: float) -> None:
        self.read_s, self.reads = read_s, []

    def read_power_w(self) -> float:
        start = time.perf_counter()
        time.sleep(self.read_s)
        self.reads.append((start, time.perf_counter()))
        return 5.0


def test_a_synchronous_read_is_stamped_within_the_read_not_when_the_poll_began():
    """A read without its own time happened somewhere during the call: its stamp lies inside it (the
    midpoint), not at the poll's start, which would put every sample a whole read early."""
    meter = SlowReadMeter(0.05)
    trace = PowerSampler(meter, hz=1.0).start().stop()
    assert len(trace) == len(meter.reads) >= 2
    for t, (start, end) in zip(trace.times_s, meter.reads, strict=True):
        assert start <= t <= end, f"stamp {t:.4f} s outside the read {start:.4f}..{end:.4f} s"


def test_tegrastats_samples_carry_the_time_the_line_was_printed(fake_root):
    """Against the times the fake tool printed each line (same clock): never before it, and typically well
    within the interval (polled, the lag is spread over the whole interval: 54 ms mean at 50 Hz)."""
    fake_root.add_timed_tegrastats([NANO_LINE.format(mw=1000 + i) for i in range(500)])
    meter = TegrastatsMeter(interval_ms=100)
    try:
        with PowerSampler(meter, hz=50) as sampler:
            deadline = time.perf_counter() + 30.0
            while len(fake_root.tegrastats_printed()) < 12 and time.perf_counter() < deadline:
                time.sleep(0.05)
    finally:
        meter.close()
    printed = dict(fake_root.tegrastats_printed())
    trace = sampler.trace
    lines = np.round(trace.power_w * 1e3).astype(int) - 1000
    assert len(set(lines)) == len(lines) >= 8, "each line once"
    lag = trace.times_s - np.array([printed[i] for i in lines])
    assert np.all(lag >= 0)  # a line is read after it was printed
    assert np.median(lag) < 0.1 / 2


def test_a_stopped_tegrastats_leaves_a_gap_then_failed_reads(fake_root, tegrastats_samples):
    """The last line is one sample, not repeated as fresh until it goes stale; then reads fail (NaN), and the
    stretch between is a gap the window's warning names."""
    fake_root.add_tegrastats([tegrastats_samples[3]["line"]])
    meter = TegrastatsMeter(interval_ms=20)
    sampler = PowerSampler(meter, hz=50).start()
    try:
        time.sleep(0.2)
        meter._proc.terminate()
        meter._proc.wait()
        deadline = time.perf_counter() + 30.0
        while sampler.snapshot().read_errors < 3 and time.perf_counter() < deadline:
            time.sleep(0.02)
    finally:
        trace = sampler.stop()
        meter.close()
    failed = np.isnan(trace.power_w)
    first_failed = int(np.argmax(failed))
    assert first_failed > 0 and failed[first_failed:].all()
    t = trace.times_s
    silent = t[first_failed] - t[first_failed - 1]
    assert silent > 3 * 0.02  # stale only after three intervals without a line
    gaps, _ = trace.gaps_in(t[0], t[-1])
    assert any(start == t[first_failed - 1] for start, _ in gaps)
    assert trace.energy_j(t[0], t[first_failed]) is None
    with pytest.raises(PowerReadError, match="exited"):
        meter.read_power_w()
