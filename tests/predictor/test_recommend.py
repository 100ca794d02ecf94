"""Pareto fronts, constraints and time-to-accuracy on prediction tables (no fitted model needed)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from jetpredict.models.errors import InputError
from jetpredict.predictor import recommend as rec


def _brute_front(x: np.ndarray, y: np.ndarray) -> set[int]:
    front = set()
    for i in range(len(x)):
        dominated = any((x[j] <= x[i] and y[j] <= y[i] and (x[j] < x[i] or y[j] < y[i]))
                        or (x[j] == x[i] and y[j] == y[i] and j < i) for j in range(len(x)))
        if not dominated:
            front.add(i)
    return front


@pytest.mark.parametrize("seed", range(5))
def test_pareto_mask_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    # Rounded values create ties and duplicates, the cases a sort-based front gets wrong.
    x = np.round(rng.uniform(1, 10, 300), 1)
    y = np.round(rng.uniform(1, 10, 300), 1)
    assert set(np.flatnonzero(rec.pareto_mask(x, y))) == _brute_front(x, y)


def test_pareto_mask_ignores_nan():
    mask = rec.pareto_mask(np.array([1.0, np.nan, 2.0]), np.array([2.0, 0.0, 1.0]))
    assert mask.tolist() == [True, False, True]


def _table() -> pd.DataFrame:
    # Energy = power x time, as on a real board: faster modes draw more power.
    t = np.array([100.0, 120.0, 150.0, 200.0, 300.0, 130.0])
    p = np.array([30.0, 22.0, 15.0, 10.0, 9.0, 40.0])
    df = pd.DataFrame({"mode": list("abcdef"), "epoch_time_s": t, "avg_power_w": p, "epoch_energy_j": t * p})
    for c in ("epoch_time_s", "epoch_energy_j"):
        df[f"{c}_low"] = df[c] * 0.9
        df[f"{c}_high"] = df[c] * 1.1
    return df


def test_choose_min_time_under_power_cap_is_on_front():
    df = _table()
    out = rec.choose(df, "min-time", max_power_w=20)
    assert out["feasible"] and df.loc[out["best"], "mode"] == "c"
    assert out["best"] in out["pareto"] and out["best"] in out["pareto_power"]
    assert all(df.loc[out["pareto"], "avg_power_w"] <= 20)
    assert set(df.loc[out["pareto"], "mode"]) == {"c", "d"}  # e (2700 J) is dominated by d (2000 J)


def test_choose_min_energy_under_time_limit():
    df = _table()
    out = rec.choose(df, "min-energy", max_epoch_time_s=160)
    assert df.loc[out["best"], "mode"] == "c"  # 2250 J, the least among modes <= 160 s
    out = rec.choose(df, "min-energy")
    assert df.loc[out["best"], "mode"] == "d"


def test_infeasible_limits_give_reason_not_a_mode():
    out = rec.choose(_table(), "min-time", max_power_w=5)
    assert not out["feasible"] and out["best"] is None and out["pareto"] == []
    assert "max_power_w=5" in out["reason"] and "9 W" in out["reason"]
    out = rec.choose(_table(), "min-time", max_power_w=10, max_epoch_time_s=110)
    assert "no mode meets both" in out["reason"]


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"objective": "fastest"}, "objective"),
    ({"objective": "min-time", "max_power_w": -3}, "max_power_w"),
    ({"objective": "min-time", "max_epoch_time_s": float("nan")}, "max_epoch_time_s"),
    ({"objective": "min-time", "max_power_w": "many"}, "max_power_w"),
])
def test_bad_limits_name_the_field(kwargs, field):
    with pytest.raises(InputError) as err:
        rec.choose(_table(), **kwargs)
    assert err.value.field == field


def test_to_accuracy_scales_and_widens_by_device_spread():
    df = rec.add_to_accuracy(_table(), 10, "nano")
    assert df["time_to_accuracy_s"].iloc[0] == pytest.approx(1000.0)
    # Nano's published run-to-run spread is 7.8% (POMACS 2022 §5.4).
    assert df["time_to_accuracy_s_high"].iloc[0] == pytest.approx(1000.0 * 1.1 * 1.078)
    assert df["energy_to_accuracy_j_low"].iloc[0] == pytest.approx(30000.0 * 0.9 * (1 - 0.078))
    agx = rec.add_to_accuracy(_table(), 10, "agx-xavier")
    assert agx["time_to_accuracy_s_high"].iloc[0] < df["time_to_accuracy_s_high"].iloc[0]


@pytest.mark.parametrize("epochs", [0, -1, 2.5, True])
def test_bad_epochs(epochs):
    with pytest.raises(InputError, match="epochs"):
        rec.check_epochs(epochs)
