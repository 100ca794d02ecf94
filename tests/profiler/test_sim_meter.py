"""The twin's power meter reads what an averaging sensor reports, so its windows hold the twin's true mean."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from jetpredict.models.catalogue import PowerMode, load_device, mode_label
from jetpredict.models.profiling_protocol import WARMUP_MINIBATCHES
from jetpredict.profiler import runner, sim
from jetpredict.profiler.power.base import MIN_SAMPLES_PER_WINDOW
from jetpredict.profiler.power.sampler import hz_for_window
from jetpredict.profiler.sim.clock import PowerTimeline


def _pulses(period_s: float, n: int, low_w: float, high_w: float) -> PowerTimeline:
    """``n`` cycles of half a period at ``low_w`` then half at ``high_w``, from t = 0."""
    timeline = PowerTimeline()
    for k in range(n):
        t = k * period_s
        timeline.add(t, t + period_s / 2, low_w)
        timeline.add(t + period_s / 2, t + period_s, high_w)
    return timeline


def test_mean_over_integrates_the_segments_and_the_default_between_them():
    timeline = PowerTimeline()
    timeline.add(1.0, 2.0, 10.0)
    timeline.add(3.0, 3.5, 4.0)  # a gap 2.0..3.0 at the default
    starts = np.array([0.0, 1.5, 1.5, 3.25, 5.0, 2.0])
    ends = np.array([4.0, 1.75, 3.25, 3.25, 6.0, 3.5])
    got = timeline.mean_over(starts, ends, 2.0)
    # 0..4: 1 s at the default 2 W + 1 s x 10 W + 1 s x 2 W + 0.5 s x 4 W + 0.5 s x 2 W = 17 J over 4 s;
    # an empty interval (3.25) reads the power there.
    assert got == pytest.approx([17 / 4, 10.0, (5.0 + 2.0 + 1.0) / 1.75, 4.0, 2.0, (2.0 + 2.0) / 1.5])
    assert PowerTimeline().mean_over(starts, ends, 3.0) == pytest.approx(np.full(6, 3.0))


def test_a_sampling_rate_locked_to_the_minibatch_cycle_still_reads_the_mean_power():
    # A sample every cycle, each at the same phase: read instantaneously, every sample would see the
    # high half (25 W); averaged since the sample before, each sees a whole cycle (15 W).
    dev = load_device("agx-xavier")
    rig = sim.simulated_rig(dev, "lenet5-mnist")
    rig.backend.state.timeline = _pulses(0.05, 200, 5.0, 25.0)
    trace = rig.meter.trace(0.0, 10.0, 20.0)
    assert np.all(rig.backend.state.timeline.at(trace.times_s[1:-1] + 0.03, 0.0) == 25.0)
    assert trace.mean_power_w(1.0, 9.0) == pytest.approx(15.0, rel=0.01)


def test_a_twin_row_reads_the_twins_own_mean_power_where_the_cycle_aliased():
    # The sweep row that read 19.3 W against the twin's 27.1 W (2026-12-04): VGG-11 on AGX Xavier at
    # 4 cores, 1420.8 / 1377 / 1600 MHz, profiled as tools.make_reference_sweeps does.
    dev = load_device("agx-xavier")
    knobs = (4, 1420.8, 1377.0, 1600.0)
    mode = PowerMode(mode_label(*knobs), *knobs)
    rig = sim.simulated_rig(dev, "vgg11-cifar10", seed=3)  # its seed in the sweep
    with rig.controller:
        rig.controller.apply(mode)
        run = rig.runner.run_mode(mode, runner.RunSettings(warmup=WARMUP_MINIBATCHES, minibatches=100))
    t0, t1 = run.measured[0].start_s, run.measured[-1].end_s
    true_w = rig.backend.state.timeline.mean_over(np.array([t0]), np.array([t1]), rig.meter.idle_power_w())[0]
    assert run.trace.mean_power_w(t0, t1) == pytest.approx(true_w, rel=0.01)
    # The rate comes from the warm-up's fastest minibatch: the window holds MLPerf Power's 60 samples.
    assert run.trace.samples_in(t0, t1) >= MIN_SAMPLES_PER_WINDOW
    # At the rate the warm-up's mean pace gave (51 samples), instant readings locked to the cycle and read
    # 17% low; averaged ones still read the mean.
    locked_hz = hz_for_window(statistics.fmean(t.total_s for t in run.warmup) * 100)
    t_start = run.idle_window_s[0] - runner.RunSettings().settle_s
    locked = rig.meter.trace(t_start, t1, locked_hz)
    assert locked.samples_in(t0, t1) < MIN_SAMPLES_PER_WINDOW
    assert locked.mean_power_w(t0, t1) == pytest.approx(true_w, rel=0.01)
