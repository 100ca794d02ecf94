"""PowerTrace integrates energy over exactly the measured window; unknown stays unknown."""

from __future__ import annotations

import math

import numpy as np
import pytest
from jetpredict.profiler.power import PowerTrace


def test_constant_power_integrates_exactly_over_the_window():
    t = np.arange(0.0, 10.01, 0.1)
    trace = PowerTrace(t, np.full_like(t, 7.5))
    assert trace.energy_j(2.0, 5.0) == pytest.approx(22.5)
    assert trace.mean_power_w(2.0, 5.0) == pytest.approx(7.5)


def test_linear_ramp_is_exact_including_interpolated_edges():
    # P(t) = 2 + 3t sampled at 1 Hz; the window's edges fall between samples.
    t = np.arange(0.0, 11.0)
    trace = PowerTrace(t, 2 + 3 * t)
    t0, t1 = 1.25, 7.6
    exact = 2 * (t1 - t0) + 1.5 * (t1**2 - t0**2)
    assert trace.energy_j(t0, t1) == pytest.approx(exact, rel=1e-12)
    assert trace.samples_in(t0, t1) == 6  # t = 2..7


def test_known_sine_trace_converges_to_the_analytic_energy():
    hz = 10.0
    t = np.arange(0.0, 60.0 + 1e-9, 1 / hz)
    p = 10 + 4 * np.sin(2 * np.pi * t / 20)
    trace = PowerTrace(t, p, hz=hz)
    t0, t1 = 3.05, 43.05
    exact = 10 * (t1 - t0) - 4 * 20 / (2 * np.pi) * (np.cos(2 * np.pi * t1 / 20) - np.cos(2 * np.pi * t0 / 20))
    assert trace.energy_j(t0, t1) == pytest.approx(exact, rel=1e-4)
    assert trace.window_warning(t0, t1) is None  # 400 samples >= 60


def test_short_window_warns_and_too_few_samples_give_none():
    t = np.arange(0.0, 5.0, 1.0)
    trace = PowerTrace(t, np.full_like(t, 3.0), meter_name="ina3221:VDD_IN")
    assert "MLPerf" in trace.window_warning(0.0, 4.0)
    assert trace.energy_j(1.2, 1.8) is None  # no sample inside
    assert trace.energy_j(1.5, 2.5) is None  # one sample inside
    assert trace.energy_j(1.0, 2.0) == pytest.approx(3.0)


@pytest.mark.parametrize("window", [(-1.0, 2.0), (2.0, 9.0), (3.0, 3.0), (3.0, 1.0), (math.nan, 2.0)])
def test_windows_outside_the_samples_or_degenerate_are_unknown(window):
    t = np.arange(0.0, 5.0, 0.5)
    trace = PowerTrace(t, np.ones_like(t))
    assert trace.energy_j(*window) is None
    assert trace.mean_power_w(*window) is None


def test_a_failed_read_inside_the_window_makes_energy_unknown_not_zero():
    t = np.arange(0.0, 10.0, 0.5)
    p = np.full_like(t, 5.0)
    p[8] = np.nan  # t = 4.0
    trace = PowerTrace(t, p)
    assert trace.energy_j(3.0, 6.0) is None
    assert trace.energy_j(4.2, 8.0) is None  # the bad sample brackets the left edge
    assert trace.energy_j(4.5, 8.0) == pytest.approx(5.0 * 3.5)  # the bad sample is outside


def test_empty_trace_and_mismatched_arrays():
    assert PowerTrace(np.array([]), np.array([])).energy_j(0, 1) is None
    with pytest.raises(ValueError):
        PowerTrace(np.zeros(3), np.zeros(4))
