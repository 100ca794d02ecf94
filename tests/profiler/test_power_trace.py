"""PowerTrace integrates energy over exactly the measured window; unknown stays unknown."""

from __future__ import annotations

import math

import numpy as np
import pytest
from jetpredict.profiler.metering import window_null_reason
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


@pytest.mark.parametrize("failed", [0, 4])
def test_a_failed_read_bracketing_a_window_edge_is_named_as_its_reason(failed):
    """The sample just outside each edge decides the window (its edge is interpolated from it): a failed read
    there is one of the window's failed reads, and the reason its energy is unknown."""
    p = np.full(5, 5.0)
    p[failed] = np.nan  # t = 0 (left of the window) or t = 4 (right of it)
    trace = PowerTrace(np.arange(5.0), p, meter_name="m", read_errors=1, last_error="PowerReadError: i2c")
    assert trace.failed_reads_in(0.5, 3.5) == 1 and trace.energy_j(0.5, 3.5) is None
    assert trace.failed_reads_in(1.0, 3.0) == 0  # both edges on good samples: the failure is outside
    assert window_null_reason("m", trace, 0.5, 3.5) == ("m: 1 failed reads in the measured window "
                                                         "(PowerReadError: i2c)")


def test_a_window_of_exactly_60_samples_has_no_sample_count_warning():
    """MLPerf Power asks for at least 60 samples: 60 is enough, 59 is not."""
    t = np.round(np.arange(60) * 0.1, 6)
    assert PowerTrace(t, np.full(60, 5.0), hz=10.0).window_warning(0.0, t[-1]) is None
    assert "holds 59 samples" in PowerTrace(t[:59], np.full(59, 5.0), hz=10.0).window_warning(0.0, t[58])


def test_empty_trace_and_mismatched_arrays():
    assert PowerTrace(np.array([]), np.array([])).energy_j(0, 1) is None
    with pytest.raises(ValueError):
        PowerTrace(np.zeros(3), np.zeros(4))


def _pulsed_trace(counter_fails: tuple[int, ...] = ()) -> PowerTrace:
    """1 Hz samples that always land between 0.5 s pulses of 20 W over a 5 W floor (the samples read 5 W):
    the hardware counter has the true energy, 12.5 J per second."""
    t = np.arange(0.0, 11.0)
    counter = 1000.0 + 12.5 * t
    counter[list(counter_fails)] = np.nan
    return PowerTrace(t, np.full_like(t, 5.0), energy_counter_j=counter)


def test_an_energy_counter_gives_the_energy_the_samples_miss():
    trace = _pulsed_trace()
    assert trace.energy_j(2.0, 8.0) == pytest.approx(75.0)  # not the samples' 30 J
    assert trace.energy_j(1.25, 7.5) == pytest.approx(12.5 * 6.25)  # edges interpolated on the counter
    assert trace.mean_power_w(2.0, 8.0) == pytest.approx(12.5)


def test_a_counter_read_that_failed_inside_the_window_does_not_matter():
    inside = _pulsed_trace(counter_fails=(5,))
    assert inside.energy_j(2.5, 8.5) == pytest.approx(75.0)  # only the reads around 2.5 and 8.5 are used


@pytest.mark.parametrize("failed", [2, 3, 8, 9])
def test_a_failed_counter_read_at_an_edge_falls_back_to_the_sampled_power_not_nan(failed):
    # The edge is interpolated between the reads on either side of it (2 and 3, 8 and 9 for [2.5, 8.5]):
    # a failed one inside the window voids the counter as one outside does, never a NaN energy.
    trace = _pulsed_trace(counter_fails=(failed,))
    assert trace.energy_j(2.5, 8.5) == pytest.approx(30.0)  # the sampled power's trapezoids instead


def test_a_counter_that_ran_backwards_is_not_trusted():
    trace = _pulsed_trace()
    trace.energy_counter_j[6:] -= 1000.0  # reset mid-window (e.g. the driver reloaded)
    assert trace.energy_j(2.0, 8.0) == pytest.approx(30.0)
    assert trace.energy_j(6.0, 9.0) == pytest.approx(37.5)  # after the reset it counts again
    hidden = _pulsed_trace(counter_fails=(5,))
    hidden.energy_counter_j[6:] -= 1000.0  # the reset next to a failed read
    assert hidden.energy_j(2.0, 8.0) == pytest.approx(30.0)


def test_counter_readings_stay_with_their_samples():
    t = np.array([2.0, 0.0, 1.0, 3.0])
    trace = PowerTrace(t, np.ones(4), energy_counter_j=np.array([20.0, 0.0, 10.0, 30.0]))
    assert trace.energy_counter_j.tolist() == [0.0, 10.0, 20.0, 30.0]
    with pytest.raises(ValueError, match="one reading per sample"):
        PowerTrace(np.zeros(3), np.zeros(3), energy_counter_j=np.zeros(2))
