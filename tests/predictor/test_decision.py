"""The decision's rivals keep physics: no mode the pick dominates (fewer cores, slower clocks) can beat it on
time, and a mode's time cannot fall below the lower bound of a mode that dominates it."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

import numpy as np
import pandas as pd
import pytest
from jetpredict.models.catalogue import MODE_FIELDS, load_device
from jetpredict.predictor import adaptive as A
from jetpredict.predictor import decision as D
from jetpredict.predictor.model import WorkloadModel


class MinTime(NamedTuple):
    """An agx-xavier min-time decision under a power cap, with what it was made from."""

    rows: pd.DataFrame
    goal: D.Goal
    adviser: A.Adviser
    model: WorkloadModel
    table: pd.DataFrame
    open_: np.ndarray
    decision: D.Decision


@pytest.fixture(scope="module")
def min_time(lenet) -> Callable[[float], MinTime]:
    """``decide(cap_w)``: the min-time decision of real LeNet-5 from e, f, i, j under ``cap_w`` (W), decided once
    per cap for the module (two tests read the 8 W one) from one fit (a fit of real rows is the slow part, and
    it does not depend on the goal)."""
    rows = lenet[lenet["mode"].isin(list("efij"))].reset_index(drop=True)
    model = A.Adviser(load_device("agx-xavier"), D.Goal("min-time")).fit_model(rows)

    @lru_cache
    def decide(cap_w: float) -> MinTime:
        goal = D.Goal("min-time", max_power_w=cap_w)
        adviser = A.Adviser(load_device("agx-xavier"), goal)
        table, open_ = adviser.decision_set(rows)
        return MinTime(rows, goal, adviser, model, table, open_, adviser.decide(model, table, open_))

    return decide


def _brute_floor(knobs: np.ndarray, values: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    out = values.copy()
    for i in np.flatnonzero(eligible):
        above = eligible & np.all(knobs >= knobs[i], axis=1)
        out[i] = values[above].max()
    return out


def test_the_dominance_floor_is_the_largest_value_of_every_mode_at_or_above():
    rng = np.random.default_rng(5)
    knobs = np.column_stack([rng.choice(v, 400) for v in ([2, 4, 6, 8], [730, 1200, 2265], [114, 670, 1377],
                                                           [800, 1600, 2133])]).astype(float)
    values = rng.uniform(10, 100, 400)
    eligible = rng.random(400) > 0.1
    floor = D.dominance_floor(knobs, values, eligible)
    assert np.array_equal(floor, _brute_floor(knobs, values, eligible))
    assert np.array_equal(floor[~eligible], values[~eligible])
    assert (floor > values).sum() > 100  # the floor binds for many modes, not for none


def test_the_dominance_floor_leaves_a_lattice_past_its_limit_as_it_is(monkeypatch):
    knobs = np.array([[2.0, 1000, 500, 800], [4.0, 2000, 900, 1600]])
    monkeypatch.setattr(D, "MAX_LATTICE_CELLS", 16)  # 2 x 2 x 2 x 2 cells
    assert np.array_equal(D.dominance_floor(knobs, np.array([1.0, 5.0]), np.ones(2, bool)), [5.0, 5.0])
    monkeypatch.setattr(D, "MAX_LATTICE_CELLS", 15)
    assert np.array_equal(D.dominance_floor(knobs, np.array([1.0, 5.0]), np.ones(2, bool)), [1.0, 5.0])


@pytest.mark.parametrize("cap_w", [8.0, 15.0])
def test_no_mode_the_pick_dominates_is_a_rival_for_min_time(cap_w, min_time):
    # Real LeNet-5 from e, f, i, j: under 8 W the pick was 5c-1958.4-675.75-1065.6 and plan --after proposed
    # 5c-1958.4-114.75-1065.6, the same mode at the lowest GPU clock, as likely to beat it (P = 0.22).
    rows, _, adviser, model, table, open_, d = min_time(cap_w)
    knobs = d.table[list(MODE_FIELDS)].to_numpy(float)
    dominated = np.all(knobs <= knobs[d.best], axis=1)
    assert not dominated[d.rivals].any()
    assert d.top_rival is not None and not dominated[d.top_rival]
    proposed = adviser.propose(rows).modes.iloc[0][list(MODE_FIELDS)].to_numpy(float)
    assert not np.all(proposed <= knobs[d.best])
    # Only dominated modes left to profile: none has any chance or gain, however wide its interval.
    only_dominated = adviser.decide(model, table, open_ & dominated)
    assert only_dominated.top_rival is None and only_dominated.rival_gain == 0.0


def test_a_rivals_chance_under_caps_is_its_lower_half_floored_by_dominating_modes_times_meeting_them_once(min_time):
    # Oracle from the docstring: P = Phi(gap / hypot(rival's lower half-SD, best's upper half-SD)) x P(meets the
    # caps), the lower bound floored by every dominating mode's (once counted, not squared; floor not skipped).
    from jetpredict.predictor.model import z_of
    from scipy.special import ndtr

    made = min_time(8.0)
    goal, open_, d = made.goal, made.open_, made.decision
    df, b, z = d.table, d.best, z_of(goal.confidence)
    value, low, high = (df[c].to_numpy(float) for c in ("epoch_time_s", "epoch_time_s_low", "epoch_time_s_high"))
    knobs = df[list(MODE_FIELDS)].to_numpy(float)
    floored = np.minimum(D.dominance_floor(knobs, low, np.ones(len(df), bool)), value)
    assert (floored > low * 1.001).sum() > 100  # the floor binds here
    spread = np.hypot(np.log(value / floored) / z, np.log(high[b] / value[b]) / z)
    meets = D._meets_caps(df, goal, z, ~open_)
    expected = ndtr(np.log(value[b] / value) / spread) * meets
    assert d.rival_p == pytest.approx(expected[d.rivals], rel=1e-9)
    assert (meets[d.rivals] < 0.999).any()  # the caps bind on some rival: P is not just Phi


def test_the_best_mode_is_never_its_own_rival(min_time):
    """The pick cannot beat itself: over the eight AGX Xavier presets (a decision set as small as adaptive
    profiling may hold, where the pick would rank among the strongest rivals), min-energy's rivals leave it
    out, and U is its width plus its rivals' chances times theirs."""
    from jetpredict.predictor import service

    model = min_time(8.0).model  # the module's one fit of LeNet-5 from e, f, i, j
    presets = service.resolve_modes(load_device("agx-xavier"), "presets")
    d = D.decide(model, presets, D.Goal("min-energy"))
    assert d.best is not None and len(d.rivals) > 0 and d.best not in d.rivals.tolist()
    widths = D._width(d.table, D.OBJECTIVES["min-energy"])
    assert d.uncertainty == pytest.approx(widths[d.best] + float(np.sum(d.rival_p * widths[d.rivals])), rel=1e-12)
