"""Pareto fronts, constraints and time-to-accuracy on prediction tables (no fitted model needed)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from jetpredict.models.catalogue import load_device
from jetpredict.predictor import recommend as rec
from jetpredict.predictor.limits import OBJECTIVES


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
    assert out.best in out.pareto
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


def test_an_extrapolated_mode_that_gives_way_gives_it_to_the_best_that_stands():
    df = _table()
    df.loc[df["mode"].isin(["b", "d"]), "extrapolated_knobs"] = "gpu_mhz"
    df.loc[df["mode"] == "d", "epoch_energy_j_high"] = 2300.0  # not better than c (2250 J) beyond it
    # b (2100 J, up to 2200 J) is better than c beyond its interval: d gives way to b, not to c.
    df.loc[df["mode"] == "b", ["epoch_energy_j", "epoch_energy_j_high"]] = [2100.0, 2200.0]
    out = _choose(df, "min-energy")
    assert df["mode"].iloc[out.best] == "b" and out.preferred_in_range


def test_infeasible_limits_give_reason_not_a_mode():
    out = _choose(_table(), "min-time", max_power_w=5)
    assert not out.feasible and out.best is None and len(out.pareto) == 0
    assert "max_power_w=5" in out.reason and "9.9 W" in out.reason  # e: 9 W, upper bound 9.9 W
    out = _choose(_table(), "min-time", max_power_w=11, max_epoch_time_s=115)
    assert "no mode meets both" in out.reason


def test_an_unknown_bound_is_never_named_the_lowest():
    df = _table()
    first = df["mode"].iloc[0]
    df.loc[df.index[0], "avg_power_w_high"] = float("nan")
    out = _choose(df, "min-time", max_power_w=5)
    assert not out.feasible and "9.9 W" in out.reason and "nan" not in out.reason and f"(mode {first})" not in out.reason
    df["avg_power_w_high"] = float("nan")
    out = _choose(df, "min-time", max_power_w=5)
    assert not out.feasible and "no mode has a known upper bound of power at 90%" in out.reason


def test_to_accuracy_scales_and_widens_by_device_spread():
    df = _table()
    df = df.assign(**rec.to_accuracy(df, 10, "nano"))
    assert df["time_to_accuracy_s"].iloc[0] == pytest.approx(1000.0)
    # Nano's published run-to-run spread is 7.8% (POMACS 2022 §5.4).
    assert df["time_to_accuracy_s_high"].iloc[0] == pytest.approx(1000.0 * 1.1 * 1.078)
    assert df["energy_to_accuracy_j_low"].iloc[0] == pytest.approx(30000.0 * 0.9 * (1 - 0.078))
    agx = rec.to_accuracy(_table(), 10, "agx-xavier")
    assert agx["time_to_accuracy_s_high"][0] < df["time_to_accuracy_s_high"].iloc[0]


# -- caps that hold, checked on the digital twin (simulated: it measures any mode we ask for) ----------
def _twin_profile(device_id: str, workload: str, modes: pd.DataFrame, tmp_path, name: str) -> pd.DataFrame:
    from jetpredict.models.catalogue import MODE_FIELDS
    from jetpredict.models.profile_files import read_profile_csv

    from jetpredict.cli import main

    modes_csv, out = tmp_path / f"{name}-modes.csv", tmp_path / f"{name}.csv"
    modes[["mode", *MODE_FIELDS]].to_csv(modes_csv, index=False)
    assert main(["profile", "--device", f"sim:{device_id}", "--workload", workload, "--modes", str(modes_csv),
                 "--out", str(out), "--no-progress"]) == 0
    return read_profile_csv(out)


@pytest.mark.slow
@pytest.mark.parametrize("device_id", ["agx-xavier", "xavier-nx", "nano", "orin-agx", "orin-nx", "orin-nano"])
def test_power_caps_hold_on_the_twin_for_every_preset_budget(device_id, tmp_path):
    """ResNet-18 and LeNet-5 profiled on the default plan; at each preset's power budget, the mode that
    ``recommend --objective min-time --max-power-w X`` picks draws <= X W when the twin runs it."""
    from jetpredict.predictor import service
    from jetpredict.predictor.bundled import fit_workload

    device = load_device(device_id)
    budgets = device.power_caps_w()
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


# -- the nearest preset under the same cap -------------------------------------------------------------
def _with_presets(*presets: tuple[str, float, float]) -> tuple[pd.DataFrame, np.ndarray]:
    """:func:`_table` after the presets (name, epoch time s, power W), in range, intervals +-10%."""
    names, times, powers = (list(column) for column in zip(*presets, strict=True))
    preset = pd.DataFrame({"mode": names, "epoch_time_s": times, "avg_power_w": powers,
                           "epoch_energy_j": np.multiply(times, powers)})
    for c in ("epoch_time_s", "avg_power_w", "epoch_energy_j"):
        preset[f"{c}_low"] = preset[c] * 0.9
        preset[f"{c}_high"] = preset[c] * 1.1
    preset["extrapolated_knobs"] = ""
    return rec.with_presets(preset, _table())


def _with_preset(preset_time: float, preset_power: float) -> tuple[pd.DataFrame, np.ndarray]:
    return _with_presets(("MODE_X", preset_time, preset_power))


def test_a_preset_that_meets_the_cap_and_is_faster_is_chosen():
    df, presets = _with_preset(140.0, 14.0)  # faster than c (150 s) at 15.4 W upper bound
    out = rec.choose(df, "min-time", 20, None, 0.9, presets)
    assert df["mode"].iloc[out.best] == "MODE_X" and out.preset == 0
    # Over the cap: the preset is neither chosen nor compared with.
    out = rec.choose(df, "min-time", 15, None, 0.9, presets)
    assert df["mode"].iloc[out.best] == "d" and out.preset is None and not out.preferred_preset


def test_an_extrapolated_mode_never_leaves_the_answer_slower_than_a_preset():
    df, presets = _with_preset(125.0, 15.0)  # 16.5 W upper bound
    # b (120 s) is outside the profiled range, and not faster than c (150 s) beyond its interval
    df.loc[df["mode"] == "b", ["extrapolated_knobs", "epoch_time_s_high"]] = ["gpu_mhz", 160.0]
    # Without presets: b is not better beyond its interval, so the in-range c (150 s) would be chosen.
    plain = rec.choose(df.iloc[1:].reset_index(drop=True), "min-time", 25, None, 0.9)
    assert plain.preferred_in_range
    out = rec.choose(df, "min-time", 25, None, 0.9, presets)
    assert df["mode"].iloc[out.best] == "MODE_X" and not out.preferred_preset  # the in-range rule picks it
    # A preset outside the profiled ranges too: the in-range rule picks c, the preset rule the preset.
    df.loc[0, "extrapolated_knobs"] = "cpu_mhz"
    out = rec.choose(df, "min-time", 25, None, 0.9, presets)
    assert df["mode"].iloc[out.best] == "MODE_X" and out.preferred_preset and not out.preferred_in_range


def test_an_out_of_range_preset_wins_only_beyond_its_interval_as_any_mode():
    """Presets and the space go through one out-of-range rule: a preset outside the profiled ranges whose
    upper bound is not below the best in-range point never wins, however low its point (before, it took
    the in-range pick's place on its point alone), and the comparison names the best preset that stands."""
    df, presets = _with_presets(("MODE_X", 125.0, 15.0), ("MODE_Y", 160.0, 12.0))
    # b (120 s, up to 160 s) and MODE_X (125 s, up to 155 s) lie outside the profiled ranges; c (150 s) is
    # the best in-range mode and neither is faster than it beyond its interval.
    df.loc[df["mode"] == "b", ["extrapolated_knobs", "epoch_time_s_high"]] = ["gpu_mhz", 160.0]
    df.loc[df["mode"] == "MODE_X", ["extrapolated_knobs", "epoch_time_s_high"]] = ["cpu_mhz", 155.0]
    out = rec.choose(df, "min-time", 25, None, 0.9, presets)
    assert df["mode"].iloc[out.best] == "c" and out.preferred_in_range and not out.preferred_preset
    assert df["mode"].iloc[out.preset] == "MODE_Y"  # in range: c is 10 s faster than a preset that stands
    # Up to 145 s MODE_X is faster than c beyond its interval: it stands, and its point beats c's.
    df.loc[df["mode"] == "MODE_X", "epoch_time_s_high"] = 145.0
    out = rec.choose(df, "min-time", 25, None, 0.9, presets)
    assert df["mode"].iloc[out.best] == "MODE_X" and out.preferred_preset and not out.preferred_in_range
    assert out.preset == out.best
    # No preset stands (MODE_Y out of range too, up to 176 s): c is kept, and the comparison still names
    # the best preset meeting the cap, MODE_X, which looks faster than c but not beyond its interval.
    df.loc[df["mode"] == "MODE_X", "epoch_time_s_high"] = 155.0
    df.loc[df["mode"] == "MODE_Y", "extrapolated_knobs"] = "emc_mhz"
    out = rec.choose(df, "min-time", 25, None, 0.9, presets)
    assert df["mode"].iloc[out.best] == "c" and not out.preferred_preset
    assert df["mode"].iloc[out.preset] == "MODE_X"


@pytest.mark.parametrize("extrapolated", [False, True])
def test_a_tie_between_a_preset_and_a_mode_keeps_the_preset_name(extrapolated):
    """A preset with the same prediction as a space mode is chosen by its name (nvpmodel sets it), in range
    or outside it (then standing: an upper bound below the in-range pick's point)."""
    df, presets = _with_preset(120.0, 22.0)  # the same figures as b
    if extrapolated:
        df.loc[df["mode"].isin(["MODE_X", "b"]), "extrapolated_knobs"] = "gpu_mhz"
    out = rec.choose(df, "min-time", 25, None, 0.9, presets)
    assert df["mode"].iloc[out.best] == "MODE_X" and out.preset == out.best and not out.preferred_in_range


def test_preset_comparison_states_the_saving_against_the_preset():
    best = {"mode": "c", "cpu_cores": 4, "cpu_mhz": 1.0, "gpu_mhz": 1.0, "emc_mhz": 1.0, "epoch_time_s": 150.0,
            "epoch_energy_j": 2250.0}
    preset = {"mode": "MODE_X", "cpu_cores": 8, "cpu_mhz": 1.0, "gpu_mhz": 1.0, "emc_mhz": 1.0,
              **{c: 1.0 for c in rec.PRESET_COMPARISON_COLUMNS}, "epoch_time_s": 200.0, "epoch_energy_j": 2000.0}
    out = rec.preset_comparison(best, preset, "min-time", 20.0, None, 0.9)
    assert out["preset"] == "MODE_X" and not out["chosen_is_preset"]
    assert out["time_saving_s"] == pytest.approx(50.0) and out["time_saving_share"] == pytest.approx(0.25)
    assert out["energy_saving_j"] == pytest.approx(-250.0)  # faster, but it costs energy
    none = rec.preset_comparison(best, None, "min-time", 5.0, None, 0.9)
    assert none["preset"] is None and "max_power_w=5" in none["reason"] and none["time_saving_s"] is None


def test_a_mode_with_a_presets_knobs_but_another_name_is_not_the_preset():
    """AGX Xavier's MODE_10W powers half the GPU's SMs: the space mode at its knobs (named by them) is another
    mode, drawing more, so choosing it is not choosing the preset even though every knob is equal."""
    from jetpredict.models.catalogue import MODE_FIELDS, mode_label

    gated = load_device("agx-xavier").preset("MODE_10W")
    assert gated.gpu_share < 1.0
    knobs = {k: getattr(gated, k) for k in MODE_FIELDS}
    preset = {**knobs, "mode": gated.mode, **dict.fromkeys(rec.PRESET_COMPARISON_COLUMNS, 1.0),
              "epoch_time_s": 40.0, "epoch_energy_j": 300.0}
    space_mode = {**preset, "mode": mode_label(**knobs), "epoch_time_s": 30.0, "epoch_energy_j": 330.0}
    out = rec.preset_comparison(space_mode, preset, "min-time", 12.0, None, 0.9)
    assert out["preset"] == "MODE_10W" and out["chosen_is_preset"] is False
    assert out["time_saving_s"] == pytest.approx(10.0)
    assert rec.preset_comparison(preset, preset, "min-time", 12.0, None, 0.9)["chosen_is_preset"] is True


def _reference_workloads():
    """(device, name, rows) of the bundled reference workloads of AGX Xavier (published and simulated)
    and AGX Orin (simulated), each profiled on 4 spread modes as a new workload would be; the published
    ones also with all their rows."""
    from jetpredict.models.profile_files import read_profile_csv
    from jetpredict.predictor.reference import reference_csvs

    for device_id in ("agx-xavier", "orin-agx"):
        for path in reference_csvs(device_id):
            rows = read_profile_csv(path)
            for workload, group in rows.groupby("workload", sort=True):
                group = group.reset_index(drop=True)
                if "published" in path.stem:
                    yield device_id, f"{path.stem}:{workload}", group
                four = np.linspace(0, len(group) - 1, 4).round().astype(int)
                yield device_id, f"{path.stem}:{workload}:4-modes", group.iloc[four].reset_index(drop=True)


@pytest.mark.slow
@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_never_worse_than_a_preset_that_meets_the_same_cap(objective):
    """On AGX Xavier and AGX Orin, for every bundled reference workload and every preset's own power
    (its upper bound: the tightest cap it meets) and 15 W: the recommendation is at least as fast (as
    frugal) as every preset meeting the cap that the out-of-range rule lets stand (in range, or with its
    upper bound below the best in-range point of presets and space), never an out-of-range preset that
    does not stand, and the comparison names the best preset that stands."""
    from jetpredict.predictor import service
    from jetpredict.predictor.bundled import fit_workload

    key = OBJECTIVES[objective]
    checked = 0
    for device_id, name, rows in _reference_workloads():
        model = fit_workload(rows, load_device(device_id))
        presets = service.predict(model, "presets", device=device_id)
        space = service.predict(model, "all", device=device_id)
        for cap in [*presets["avg_power_w_high"], 15.0]:
            out = service.recommend(model, objective, max_power_w=float(cap))
            meets = presets[presets["avg_power_w_high"] <= cap]
            if meets.empty:
                continue
            assert out.best is not None, (name, cap)
            feasible = pd.concat([meets, space[space["avg_power_w_high"] <= cap]])
            in_range = feasible.loc[feasible["extrapolated_knobs"] == "", key]
            reference = in_range.min() if len(in_range) else np.inf
            standing = meets[(meets["extrapolated_knobs"] == "") | (meets[f"{key}_high"] < reference)]
            if out.best["mode"] in set(presets["mode"]) and out.best["extrapolated_knobs"]:
                assert out.best[f"{key}_high"] < reference, (name, objective, cap, out.best["mode"])
            comparison = out.preset_comparison
            if standing.empty:  # nothing stands: the comparison names the best preset meeting the cap
                assert comparison["preset"] == meets.loc[meets[key].idxmin(), "mode"], (name, cap)
                checked += 1
                continue
            best_preset = standing.loc[standing[key].idxmin()]
            assert out.best[key] <= best_preset[key] * (1 + 1e-9), (name, objective, cap, out.best["mode"],
                                                                    best_preset["mode"])
            assert comparison["preset"] == best_preset["mode"], (name, cap)
            assert comparison[key] == pytest.approx(best_preset[key], rel=1e-9)
            saving = comparison["time_saving_s" if key == "epoch_time_s" else "energy_saving_j"]
            assert saving >= -1e-9 * best_preset[key]
            checked += 1
    assert checked > 30


def test_preset_comparison_takes_null_cells_as_unknown():
    """A preset row whose cells an answer carries as null (non-finite) compares as unknown, not a crash."""
    from jetpredict.predictor.recommend import PRESET_COMPARISON_COLUMNS, preset_comparison

    knobs = {"mode": "MAXN", "cpu_cores": 8, "cpu_mhz": 2265.6, "gpu_mhz": 1377.0, "emc_mhz": 2133.0}
    preset = {**knobs, **dict.fromkeys(PRESET_COMPARISON_COLUMNS, 1.0), "epoch_energy_j": None,
              "avg_power_w_high": float("inf")}
    best = {**knobs, "mode": "8c-x", "epoch_time_s": 0.5, "epoch_energy_j": 2.0}
    out = preset_comparison(best, preset, "min-time", 20.0, None, 0.9)
    assert out["epoch_energy_j"] is None and out["avg_power_w_high"] is None
    assert out["time_saving_s"] == 0.5 and out["energy_saving_j"] is None and out["energy_saving_share"] is None


@pytest.mark.parametrize("seed", range(20))
def test_lowest_position_is_the_first_of_a_lexsort(seed):
    # Few distinct values, so ties on the value and on the tie-breaker are common; NaN in both ranks last.
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    value = rng.integers(0, 4, n).astype(float)
    tie = rng.integers(0, 3, n).astype(float)
    value[rng.random(n) < 0.2] = np.inf
    value[rng.random(n) < 0.1] = np.nan
    tie[rng.random(n) < 0.2] = np.nan
    if np.isfinite(value).any():  # with no finite value lexsort ranks inf before NaN; no caller asks that
        assert rec.lowest_position(value, tie) == int(np.lexsort((tie, value))[0])


def test_pick_chooses_among_the_allowed_modes_even_when_their_values_are_nan():
    nan = np.nan
    value = np.array([1.0, nan, nan])
    got = rec.pick(value, np.zeros(3), value, np.array([False, True, True]), np.zeros(3, dtype=bool), None)
    assert got.best in (1, 2)


@pytest.mark.parametrize(("level", "text"), [(0.5, "50%"), (0.9, "90%"), (0.95, "95%"), (0.996, "99.6%"),
                                             (0.999, "99.9%")])
def test_confidence_levels_print_without_rounding(level, text):
    """`:.0%` printed 0.999 and 0.996 as "100%"; the one helper keeps the level's digits."""
    from jetpredict.predictor.limits import percent

    assert percent(level) == text


def test_why_infeasible_names_the_level_as_given():
    df = pd.DataFrame({"mode": ["a", "b"], "avg_power_w_high": [20.0, 30.0], "epoch_time_s_high": [100.0, 50.0]})
    reason = rec._why_infeasible(df, 10.0, None, 0.999)
    assert "at 99.9%" in reason and "100%" not in reason


def test_why_infeasible_prints_a_bound_just_over_the_cap_above_it():
    """A bound of 5.81175 W against a cap of 5.8109 W read "5.81 W", as if the cap were met."""
    df = pd.DataFrame({"mode": ["a"], "avg_power_w_high": [5.81175], "epoch_time_s_high": [100.04]})
    reason = rec._why_infeasible(df, 5.8109, 100.0, 0.85)
    assert "the lowest upper bound of power at 85% is 5.812 W" in reason
    assert "the shortest upper bound of the epoch at 85% is 100.04 s" in reason
    assert "is 20 W" in rec._why_infeasible(df.assign(avg_power_w_high=20.0), 10.0, None, 0.9)  # short when far
