"""A hole in a power trace inside the measured window is named, with its length and place, not bridged silently."""

from __future__ import annotations

import numpy as np
import pytest
from jetpredict.profiler.power import PowerTrace
from jetpredict.profiler.power.base import GAP_PERIODS


def _holed(hz: float = 0.0, counter: bool = False) -> PowerTrace:
    """10 Hz at 8 W over 12 s with no sample from 4 s to 8 s (a blocked read, a starved sampler thread)."""
    t = np.concatenate([np.arange(0, 40) / 10, np.arange(80, 121) / 10])
    energy = 100.0 + 8.0 * t + np.where(t >= 8, 28.0, 0.0) if counter else None  # 15 W (+7) in the hole
    return PowerTrace(t, np.full(t.size, 8.0), meter_name="ina3221:VDD_IN", hz=hz, energy_counter_j=energy)


@pytest.mark.parametrize("hz", [0.0, 10.0])  # the rate unknown (constructed traces) or the sampler's
def test_a_four_second_hole_is_named_with_its_length_and_place(hz):
    trace = _holed(hz)
    warning = trace.window_warning(0.05, 11.95)
    assert warning is not None
    assert "MLPerf" not in warning  # 79 samples: the count is fine, the hole is what is wrong
    assert "gap of 4.1 s" in warning and "+3.85 s" in warning and "ina3221:VDD_IN" in warning
    assert "straight line" in warning
    # The row keeps its figure (a warning in the sidecar, as for too few samples): the samples either
    # side are real, only the stretch between them is interpolated.
    assert trace.energy_j(0.05, 11.95) == pytest.approx(8.0 * 11.9)


def test_a_hole_the_energy_counter_spans_is_named_but_its_energy_is_exact():
    trace = _holed(counter=True)
    warning = trace.window_warning(0.05, 11.95)
    assert "gap of 4.1 s" in warning and "energy counter" in warning and "straight line" not in warning
    assert trace.energy_j(0.05, 11.95) == pytest.approx(8.0 * 11.9 + 28.0)


def test_a_hole_at_the_window_edge_counts_only_its_part_inside():
    t = np.concatenate([[0.0], np.arange(30, 121) / 10])  # the window opens at 0.05; next sample at 3 s
    trace = PowerTrace(t, np.full(t.size, 8.0), hz=10.0)
    warning = trace.window_warning(0.05, 12.0)
    assert "gap of 2.95 s" in warning and "+0 s" in warning


def test_several_holes_are_all_named():
    t = np.concatenate([np.arange(0, 30), np.arange(40, 90), np.arange(100, 160)]) / 10
    warning = PowerTrace(t, np.ones(t.size), hz=10.0).window_warning(0.0, 15.9)
    assert "2 gaps" in warning and "1.1 s at +2.9 s" in warning and "1.1 s at +8.9 s" in warning


def test_jitter_a_slower_lead_in_and_a_slow_meter_are_not_holes():
    rng = np.random.default_rng(0)
    jittery = np.cumsum(rng.uniform(0.05, 0.2, 200))  # 10 Hz on average, some intervals 2 periods long
    assert PowerTrace(jittery, np.ones(200), hz=10.0).window_warning(jittery[0], jittery[-1]) is None
    # 10 Hz lead-in (idle, warm-up), then the raised 100 Hz rate from just before the window opens: the
    # last slow interval crosses the window's start but lies almost wholly before it.
    t = np.concatenate([np.arange(0, 20) / 10, 1.91 + np.arange(0, 100) / 100])
    assert PowerTrace(t, np.ones(t.size), hz=100.0).window_warning(1.905, t[-1]) is None
    # Asked 100 Hz but each read takes 50 ms: slow throughout, no hole (the sample count says the rest).
    slow = np.arange(0, 100) / 20
    assert PowerTrace(slow, np.ones(100), hz=100.0).window_warning(0.0, slow[-1]) is None


def test_a_gap_just_over_the_limit_is_named_and_one_just_under_is_not():
    period = 0.1
    for extra, named in ((1.2, True), (0.8, False)):
        t = np.concatenate([np.arange(0, 40), 39 + GAP_PERIODS * extra + np.arange(0, 40)]) * period
        warning = PowerTrace(t, np.ones(t.size), hz=10.0).window_warning(0.0, t[-1])
        assert (warning is not None) is named, warning
