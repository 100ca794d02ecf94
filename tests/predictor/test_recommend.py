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
    for c in ("epoch_time_s", "avg_power_w", "epoch_energy_j"):
        df[f"{c}_low"] = df[c] * 0.9
        df[f"{c}_high"] = df[c] * 1.1
    df["extrapolated_knobs"] = ""
    return df


def _choose(df, objective, max_power_w=None, max_epoch_time_s=None):
    return rec.choose(df, objective, max_power_w, max_epoch_time_s, 0.9)


def test_choose_min_time_under_power_cap_uses_the_upper_bound():
    df = _table()
    # c draws 15 W (16.5 W upper bound): under a 16 W cap only d and e hold.
    out = _choose(df, "min-time", max_power_w=16)
    assert out.feasible and df["mode"].iloc[out.best] == "d"
    out = _choose(df, "min-time", max_power_w=20)
    assert df["mode"].iloc[out.best] == "c"
    assert out.best in out.pareto and out.best in out.pareto_power
    assert all(df["avg_power_w_high"].iloc[out.pareto] <= 20)
    assert set(df["mode"].iloc[out.pareto]) == {"c", "d"}  # e (2700 J) is dominated by d (2000 J)


def test_choose_min_energy_under_time_limit_uses_the_upper_bound():
    df = _table()
    out = _choose(df, "min-energy", max_epoch_time_s=170)
    assert df["mode"].iloc[out.best] == "c"  # 165 s upper bound; d (220 s) breaks the limit
    out = _choose(df, "min-energy", max_epoch_time_s=160)
    assert df["mode"].iloc[out.best] == "b"
    out = _choose(df, "min-energy")
    assert df["mode"].iloc[out.best] == "d"


def test_an_extrapolated_mode_must_win_beyond_its_interval():
    df = _table()
    df.loc[df["mode"] == "d", "extrapolated_knobs"] = "gpu_mhz"
    # d (2000 J, up to 2300 J) is not better than c (2250 J, in range) beyond its interval: c is taken.
    df.loc[df["mode"] == "d", "epoch_energy_j_high"] = 2300.0
    out = _choose(df, "min-energy")
    assert df["mode"].iloc[out.best] == "c" and out.preferred_in_range
    # With a tighter interval (up to 2200 J) d is better beyond it and keeps its place.
    df.loc[df["mode"] == "d", "epoch_energy_j_high"] = 2200.0
    out = _choose(df, "min-energy")
    assert df["mode"].iloc[out.best] == "d" and not out.preferred_in_range
    # With nothing in range, the extrapolated best stands.
    df["extrapolated_knobs"] = "cpu_mhz"
    out = _choose(df, "min-energy")
    assert df["mode"].iloc[out.best] == "d" and not out.preferred_in_range


def test_infeasible_limits_give_reason_not_a_mode():
    out = _choose(_table(), "min-time", max_power_w=5)
    assert not out.feasible and out.best is None and len(out.pareto) == 0
    assert "max_power_w=5" in out.reason and "9.9 W" in out.reason  # e: 9 W, upper bound 9.9 W
    out = _choose(_table(), "min-time", max_power_w=11, max_epoch_time_s=115)
    assert "no mode meets both" in out.reason


@pytest.mark.parametrize(("check", "value", "field"), [
    (rec.check_objective, "fastest", "objective"),
    (lambda v: rec.check_limit(v, "max_power_w"), -3, "max_power_w"),
    (lambda v: rec.check_limit(v, "max_epoch_time_s"), float("nan"), "max_epoch_time_s"),
    (lambda v: rec.check_limit(v, "max_power_w"), "many", "max_power_w"),
    (lambda v: rec.check_limit(v, "max_power_w"), True, "max_power_w"),
    (rec.check_confidence, 0.4, "confidence"),
    (rec.check_confidence, 90, "confidence"),
    (rec.check_confidence, "high", "confidence"),
])
def test_bad_limits_name_the_field(check, value, field):
    with pytest.raises(InputError) as err:
        check(value)
    assert err.value.field == field


def test_to_accuracy_scales_and_widens_by_device_spread():
    df = _table()
    df = df.assign(**rec.to_accuracy(df, 10, "nano"))
    assert df["time_to_accuracy_s"].iloc[0] == pytest.approx(1000.0)
    # Nano's published run-to-run spread is 7.8% (POMACS 2022 §5.4).
    assert df["time_to_accuracy_s_high"].iloc[0] == pytest.approx(1000.0 * 1.1 * 1.078)
    assert df["energy_to_accuracy_j_low"].iloc[0] == pytest.approx(30000.0 * 0.9 * (1 - 0.078))
    agx = rec.to_accuracy(_table(), 10, "agx-xavier")
    assert agx["time_to_accuracy_s_high"][0] < df["time_to_accuracy_s_high"].iloc[0]


@pytest.mark.parametrize("epochs", [0, -1, 2.5, True])
def test_bad_epochs(epochs):
    with pytest.raises(InputError, match="epochs"):
        rec.check_epochs(epochs)


# -- caps that hold, checked on the digital twin (simulated: it measures any mode we ask for) ----------
def _twin_profile(device_id: str, workload: str, modes: pd.DataFrame, tmp_path, name: str) -> pd.DataFrame:
    from jetpredict.models.catalogue import MODE_FIELDS
    from jetpredict.models.profile_rows import read_profile_csv

    from jetpredict.cli import main

    modes_csv, out = tmp_path / f"{name}-modes.csv", tmp_path / f"{name}.csv"
    modes[["mode", *MODE_FIELDS]].to_csv(modes_csv, index=False)
    assert main(["profile", "--device", f"sim:{device_id}", "--workload", workload, "--modes", str(modes_csv),
                 "--out", str(out), "--no-progress"]) == 0
    return read_profile_csv(out)


@pytest.mark.parametrize("device_id", ["agx-xavier", "xavier-nx", "nano", "orin-agx", "orin-nx", "orin-nano"])
def test_power_caps_hold_on_the_twin_for_every_preset_budget(device_id, tmp_path):
    """ResNet-18 and LeNet-5 profiled on the default plan; at each preset's power budget, the mode that
    ``recommend --objective min-time --max-power-w X`` picks draws <= X W when the twin runs it."""
    from jetpredict.models.catalogue import load_device
    from jetpredict.predictor import service
    from jetpredict.predictor.bundled import fit_workload

    device = load_device(device_id)
    budgets = sorted({p.power_budget_w for p in device.presets if p.power_budget_w})
    plan = service.plan_profiling(device, 4).modes
    for workload in ("resnet18-cifar10", "lenet5-mnist"):
        model = fit_workload(_twin_profile(device_id, workload, plan, tmp_path, f"{workload}-plan"))
        picks = []
        for cap in budgets:
            out = service.recommend(model, "min-time", max_power_w=cap)
            assert out.feasible, (workload, cap, out.reason)
            picks.append({**out.best, "mode": f"cap-{cap:g}", "cap": cap})
        picked = pd.DataFrame(picks)
        measured = _twin_profile(device_id, workload, picked, tmp_path, f"{workload}-picks")
        over = picked["cap"].to_numpy() < measured["avg_power_w"].to_numpy()
        assert not over.any(), (workload, picked.loc[over, ["cap", "avg_power_w_high"]].to_dict("records"),
                                measured.loc[over, "avg_power_w"].tolist())
