"""Adaptive profiling: the next mode for a decision (``plan --after``) and the loop, replayed on real rows."""

from __future__ import annotations

import json
import re
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest
from jetpredict.models.catalogue import MODE_FIELDS, load_device
from jetpredict.models.errors import InputError
from jetpredict.models.profile_files import read_profile_csv
from jetpredict.predictor import adaptive as A
from jetpredict.predictor import decision as D
from jetpredict.predictor import service
from jetpredict.predictor.model import z_of
from jetpredict.predictor.reference import build_reference

from jetpredict.cli import main
from tools import replay as R

REAL_CSV = Path(__file__).resolve().parents[2] / "models" / "reference" / "agx-xavier-published.csv"


@pytest.fixture(scope="module")
def real() -> pd.DataFrame:
    return read_profile_csv(REAL_CSV)


@pytest.fixture(scope="module")
def resnet(real) -> pd.DataFrame:
    return real[real["workload"] == "resnet18-cifar10"].reset_index(drop=True)


@pytest.fixture(scope="module")
def others(real):
    """The reference without the target workload (leave one workload out)."""
    return build_reference(real[real["workload"] != "resnet18-cifar10"].reset_index(drop=True), "agx-xavier")


def _by_mode(rows: pd.DataFrame, letters: str) -> pd.DataFrame:
    return rows.set_index("mode").loc[list(letters)].reset_index()


def test_proposal_narrows_the_decision_and_skips_profiled_modes(resnet, others):
    adviser = A.Adviser(load_device("agx-xavier"), D.Goal("min-time", max_power_w=15.0), resnet[["mode", *MODE_FIELDS]],
                        others)
    rows = _by_mode(resnet, "ha")
    proposal = adviser.propose(rows, budget=2)
    modes = proposal.modes
    assert list(modes.columns[:6]) == ["mode", *MODE_FIELDS, "est_profile_s"]
    assert len(modes) == 2 and modes["mode"].is_unique
    assert not set(modes["mode"]) & set("ha")
    assert (modes["est_profile_s"] > 0).all() and modes["reason"].str.len().gt(0).all()
    # The expected uncertainty after the first mode is below the decision's now, and the second lowers it
    # again (or keeps it): a pseudo-row that confirms the prediction narrows, never widens, the decision.
    first, second = modes["expected_uncertainty"]
    assert first < proposal.decision.uncertainty and modes["score"].iloc[0] > 0
    assert second <= first + 1e-9
    assert "recommended" in proposal.summary()


@pytest.mark.parametrize(("workload", "design", "goal", "expected"), [
    ("lenet5-mnist", "efij", D.Goal("min-time", max_power_w=15.0), "5c-2265.6-1377-1600"),
    ("lenet5-mnist", "efij", D.Goal("min-time"), None),
    ("lenet5-mnist", "efij", D.Goal("min-energy", max_power_w=8.0), None),
    ("mobilenetv3-gld23k", "bfgh", D.Goal("min-time", max_power_w=11.0), "2c-1190.4-522.75-1065.6"),
])
def test_the_decision_over_the_device_space_is_the_one_recommend_makes(real, workload, design, goal, expected):
    """LeNet-5 from e,f,i,j under 15 W: MAXN (EMC 2133 MHz, outside the profiled 1333-1600) beats every
    in-range mode on its point but not beyond its interval, so ``recommend`` keeps the in-range mode (it used
    to take the preset on its point alone). MobileNetV3 from b,f,g,h under 11 W: MODE_10W (clocks off the
    catalogue steps) won beyond its interval and was taken by name until the catalogue gave it the half GPU its
    TPC mask leaves powered; now both take the custom mode at its clocks with the whole GPU. (A preset rarely
    wins beyond its interval since the power noise floor rose to 5%.)"""
    rows = _by_mode(real[real["workload"] == workload], design)
    adviser = A.Adviser(load_device("agx-xavier"), goal)
    model = adviser.fit_model(rows)
    table, open_ = adviser.decision_set(rows)
    decision = adviser.decide(model, table, open_)
    best = service.recommend(model, goal.objective, goal.max_power_w, confidence=goal.confidence).best
    assert decision.best_row["mode"] == best["mode"]
    assert decision.best_row["epoch_time_s"] == pytest.approx(best["epoch_time_s"])
    if expected is not None:
        assert best["mode"] == expected


def test_a_preset_profiled_at_the_boards_own_caps_is_not_proposed_again(real):
    """``profile`` records a preset at the caps the board's nvpmodel.conf gives it, which may differ from the
    catalogue's: the preset is profiled all the same (by its name), so it is not proposed again."""
    rows = _by_mode(real[real["workload"] == "resnet18-cifar10"], "efij").copy()
    device = load_device("agx-xavier")
    board = {**device.preset("MODE_15W").as_dict(), "gpu_mhz": 522.75}  # the catalogue caps it at 670 MHz
    rows.loc[rows.index[0], ["mode", *MODE_FIELDS]] = [board[k] for k in ["mode", *MODE_FIELDS]]
    adviser = A.Adviser(device, D.Goal("min-energy"))
    table, open_ = adviser.decision_set(rows)
    preset = int(np.flatnonzero((table["mode"] == "MODE_15W").to_numpy())[0])
    assert adviser.is_preset[preset] and not open_[preset]
    assert table.loc[preset, "gpu_mhz"] == device.preset("MODE_15W").gpu_mhz  # the catalogue's row, closed


def test_a_start_preset_profiled_at_the_boards_own_caps_is_not_profiled_again(real):
    """``profile --adaptive --modes MAXN,MODE_10W,...``: a start preset the board capped otherwise than the
    catalogue counts as profiled by its name; it was profiled again in every start slot (the budget spent
    on copies, the other start modes never profiled)."""
    device = load_device("agx-xavier")
    chooser = A.make_chooser("agx-xavier", device.presets[:3], budget=6)
    assert chooser.next_mode([])["mode"] == "MAXN"
    row = real[real["workload"] == "resnet18-cifar10"].iloc[0].to_dict()
    row.update({**device.preset("MAXN").as_dict(), "gpu_mhz": 1236.75})  # the board's own MAXN cap
    assert chooser.next_mode([row])["mode"] == "MODE_10W"
    measured = chooser._measured_s([row])  # the catalogue's MAXN counts as measured, for the stop's check too
    maxn = A.mode_keys(device, pd.DataFrame([{"mode": "MAXN", **device.preset("MAXN").as_dict()}]))[0]
    assert measured[maxn] == row["epoch_time_s"]


def test_pseudo_row_holds_predictions_only_where_the_rows_measure(resnet):
    template = {**resnet.iloc[0].to_dict(), "stall_time_s": float("nan"), "minibatch_time_p50_s": 0.2}
    pred = {"epoch_time_s": 500.0, "stall_time_s": 20.0, "compute_time_s": 470.0, "avg_power_w": 14.0,
            "epoch_energy_j": 7000.0, "base_power_w": 5.0}
    mode = {"mode": "x", "cpu_cores": 4, "cpu_mhz": 1500.0, "gpu_mhz": 900.0, "emc_mhz": 1600.0}
    row = A.pseudo_row(template, mode, pred)
    assert row["epoch_time_s"] == 500.0 and row["compute_time_s"] == 470.0 and row["cpu_mhz"] == 1500.0
    assert row["stall_time_s"] is None  # the workload's rows do not measure it: not invented
    assert "minibatch_time_p50_s" not in row and row["workload"] == "resnet18-cifar10"


# Measured: min-time under 15 W stops after 4 modes (pick b, -0.20%), min-energy after 5 (pick c, +2.13%);
# each count is pinned at what it measures, the error at the 3% bar.
@pytest.mark.parametrize(("goal", "max_modes"), [(D.Goal("min-time", max_power_w=15.0), 4),
                                                 (D.Goal("min-energy"), 5)])
def test_replayed_real_sweep_stops_within_budget_near_the_measurement(resnet, others, goal, max_modes):
    replay = R.SweepReplay(resnet)
    chooser = A.AdaptiveChooser(load_device("agx-xavier"), goal, budget=6, candidates=replay.modes(), reference=others)
    rows = R.run_loop(chooser, replay.measure)
    assert 2 <= len(rows) <= max_modes
    assert len({r["mode"] for r in rows}) == len(rows)  # never the same mode twice
    last = chooser.steps[-1]
    assert last.next_mode is None and last.stop
    best = last.decision.best_row
    measured = resnet.set_index("mode").loc[best["mode"], "epoch_time_s"]
    # The real sweep answers: the recommended mode's predicted time is close to its measurement.
    assert best["epoch_time_s"] == pytest.approx(measured, rel=0.03)


def test_a_rival_that_alone_holds_the_stop_back_is_profiled_next(resnet, others):
    """ResNet-18 under 16 W from e, f: once the recommended mode's interval is narrow, only mode c (14.85 W
    measured, its interval below 16 W once profiled) may still beat it; the loop measures c next (then d,
    15.7 W, the next such rival) and stops within 3% in 6 modes, the issue's bar."""
    replay = R.SweepReplay(resnet)
    chooser = A.AdaptiveChooser(load_device("agx-xavier"), D.Goal("min-time", max_power_w=16.0), budget=10,
                                candidates=replay.modes(), reference=others, start=_by_mode(resnet, "ef")[
                                    ["mode", *MODE_FIELDS]])
    rows = R.run_loop(chooser, replay.measure)
    held = [st for st in chooser.steps if st.next_mode is not None and st.reason.startswith("settles the stop")]
    assert held and held[0].decision.time_width_rel < A.DEFAULT_TARGET_WIDTH_REL
    assert held[0].next_mode["mode"] == resnet.iloc[held[0].decision.top_rival]["mode"] == "c"
    assert held[0].decision.rival_gain > A.MAX_RIVAL_GAIN
    assert len(rows) <= 6 and chooser.steps[-1].stop
    best = chooser.steps[-1].decision.best_row
    assert best["epoch_time_s"] == pytest.approx(resnet.set_index("mode").loc[best["mode"], "epoch_time_s"],
                                                 rel=0.03)


def test_a_mode_whose_interval_cannot_clear_the_cap_holds_nothing_back(resnet, others):
    """ResNet-18 under 15 W from g, a: mode c draws 14.85 W, so once profiled its interval's upper end still
    passes 15 W and ``recommend`` cannot pick it. Predicted at 14.6 W it may certify (P = 0.19) and 18% faster
    than the pick is worth profiling; once profiled it holds nothing back, and the loop stops within 3% in 4
    modes (6 while a rival counted with its point under the cap; c unprofiled with the 4% power noise floor)."""
    replay = R.SweepReplay(resnet)
    goal = D.Goal("min-time", max_power_w=15.0)
    chooser = A.AdaptiveChooser(load_device("agx-xavier"), goal, budget=10, candidates=replay.modes(),
                                reference=others, start=_by_mode(resnet, "ga")[["mode", *MODE_FIELDS]])
    rows = R.run_loop(chooser, replay.measure)
    assert len(rows) <= 4 and chooser.steps[-1].stop
    best = chooser.steps[-1].decision.best_row
    assert best["mode"] != "c"
    assert best["epoch_time_s"] == pytest.approx(resnet.set_index("mode").loc[best["mode"], "epoch_time_s"],
                                                 rel=0.03)
    # What profiling c would have shown: fitted on every mode, c's power interval still passes the cap.
    everything = chooser.adviser.fit_model(resnet)
    table, open_ = chooser.adviser.decision_set(resnet)
    measured = D.decide(everything, table, goal, open_)
    c = measured.table[measured.table["mode"] == "c"].iloc[0]
    assert c["avg_power_w"] < 15.0 < c["avg_power_w_high"]
    assert measured.best_row["mode"] == best["mode"]
    # At the stop: counted with its point under the cap (no profiled mode's margin), c would look likely to
    # meet it; with the margin of the profiled modes' intervals it is unlikely to certify.
    stop = chooser.steps[-1].decision.table
    is_c = (stop["mode"] == "c").to_numpy()
    z = z_of(goal.confidence)
    profiled = stop["mode"].isin([r["mode"] for r in rows]).to_numpy()
    assert D._meets_caps(stop, goal, z)[is_c][0] > 0.5
    assert D._meets_caps(stop, goal, z, profiled)[is_c][0] < 0.2


def test_a_pick_measured_as_predicted_confirms_the_stop(resnet, others):
    """The pick profiled to confirm a settled stop: measured within the run-to-run noise floor of the time
    that settled it, the stop holds (a rival's gain it nudges past the bar is noise); further off, or once
    another mode is the pick, the loop decides afresh."""
    goal = D.Goal("min-time", max_power_w=15.0)
    chooser = A.AdaptiveChooser(load_device("agx-xavier"), goal, budget=10, candidates=resnet[["mode", *MODE_FIELDS]],
                                reference=others)
    rows = _by_mode(resnet, "haecfb")
    table, open_ = chooser.adviser.decision_set(rows)
    d = D.decide(chooser.adviser.fit_model(rows), table, goal, open_)
    keys = chooser.adviser.table_keys(d.table)
    key = keys[d.best]
    measured = dict(zip(A.mode_keys(chooser.adviser.device, rows), rows["epoch_time_s"], strict=True))
    measured_s = measured[key]
    chooser._confirming = (key, measured_s * 1.02)
    assert "within the run-to-run noise" in chooser._confirmed(measured, d, keys)
    assert chooser._confirming is None and chooser._confirmed(measured, d, keys) is None  # one step only
    chooser._confirming = (key, measured_s * 1.05)
    assert chooser._confirmed(measured, d, keys) is None
    other = next(k for k in measured if k != key)  # a profiled mode of other knobs: not a neighbour in noise
    chooser._confirming = (other, measured[other])
    assert chooser._confirmed(measured, d, keys) is None


def _decision(rows: list[tuple[str, float, float, float, float, float, float]], best: int, time_width_rel: float
              ) -> D.Decision:
    table = pd.DataFrame(rows, columns=["mode", *MODE_FIELDS, "epoch_time_s", "epoch_energy_j"])
    return D.Decision(table, best, time_width_rel, time_width_rel, np.zeros(0, dtype=int), np.zeros(0),
                      time_width_rel)


@pytest.mark.parametrize(("pick", "time_width_rel", "holds"), [
    (("p", 5, 2265.6, 675.75, 1600, 40.2, 400.0), 0.10, True),    # one CPU step away, 0.5% apart
    (("p", 5, 2265.6, 675.75, 1600, 40.2, 380.0), 0.10, False),   # ... but 5% apart in energy
    (("p", 5, 2265.6, 675.75, 1600, 43.0, 400.0), 0.10, False),   # ... or 6% apart in time
    (("p", 5, 2265.6, 675.75, 1600, 40.2, 400.0), 0.15, False),   # ... or its interval too wide
    (("p", 4, 2265.6, 675.75, 1600, 40.2, 400.0), 0.10, False),   # two knobs away (cores, CPU): measured
])
def test_a_confirmed_stop_holds_when_the_new_pick_is_a_neighbour_within_noise(pick, time_width_rel, holds):
    """After the pick measured to confirm a stop agrees with its prediction, a refit that moves the pick to
    a neighbour one knob away, within the run-to-run noise in time and objective, keeps the stop (twin
    LeNet-5 min-energy over the whole space measured three such neighbours in a row before); a pick apart
    in more knobs or beyond the noise is decided afresh (real ResNet-18: c confirmed, b 0.3% apart in
    energy measured 6% off its predicted time)."""
    chooser = A.AdaptiveChooser(load_device("agx-xavier"), D.Goal("min-energy"), budget=10)
    measured = ("m", 5, 2188.8, 675.75, 1600, 40.0, 402.0)
    d = _decision([measured, pick], best=1, time_width_rel=time_width_rel)
    keys = A.mode_keys(chooser.adviser.device, d.table)
    key_measured = keys[0]  # knobs and the whole GPU
    chooser._confirming = (key_measured, 40.5)  # the prediction that settled the stop, 1.2% off the measurement
    reason = chooser._confirmed({key_measured: 40.0}, d, keys)
    assert (reason is not None) == holds
    if holds:
        assert "one knob from it" in reason and "epoch_energy_j (0.5%)" in reason


@pytest.mark.parametrize("budget", [1, 3])
def test_loop_starts_from_the_plan_and_honours_the_budget(resnet, others, budget):
    """A budget below the plan's START_MODES takes the plan's first modes only (the start once took
    START_MODES whatever the budget, and profiled two under --budget 1)."""
    replay = R.SweepReplay(resnet)
    chooser = A.AdaptiveChooser(load_device("agx-xavier"), D.Goal("min-energy"), budget=budget, target_width=1e-6,
                                candidates=replay.modes(), reference=others)
    rows = R.run_loop(chooser, replay.measure)
    assert len(rows) == budget
    start = chooser.start_modes()["mode"].tolist()
    assert len(start) == min(budget, A.START_MODES)
    assert [r["mode"] for r in rows[:len(start)]] == start
    assert f"budget of {budget} profiled modes spent" in chooser.steps[-1].stop


def test_unmeetable_cap_says_so_and_still_proposes(resnet, others):
    adviser = A.Adviser(load_device("agx-xavier"), D.Goal("min-time", max_power_w=1.0), resnet[["mode", *MODE_FIELDS]],
                        others)
    proposal = adviser.propose(_by_mode(resnet, "ga"))
    assert proposal.decision.best is None and "no mode meets" in proposal.summary()
    assert len(proposal.modes) == 1


@pytest.mark.parametrize(("cap_w", "hopeless"), [(1.0, True), (13.0, False)])
def test_a_cap_no_mode_can_meet_stops_the_loop_and_plan_after(tmp_path, resnet, others, capsys, cap_w, hopeless):
    """Under 1 W (every point 6+ W) profiling more cannot help: the loop stops after its start modes instead
    of spending the budget (minutes per mode on a board), and ``plan --after`` exits 1 saying so. A cap the
    points meet but no upper end does yet (13 W) still profiles on."""
    replay = R.SweepReplay(resnet)
    goal = D.Goal("min-time", max_power_w=cap_w)
    chooser = A.AdaptiveChooser(load_device("agx-xavier"), goal, budget=5, candidates=replay.modes(),
                                reference=others)
    rows = R.run_loop(chooser, replay.measure)
    stop = chooser.steps[-1].stop
    assert ("profiling more cannot help" in stop) == hopeless, stop
    if hopeless:
        assert len(rows) == len(chooser.start_modes())
    profiles, cands = tmp_path / "p.csv", tmp_path / "a-j.csv"
    _by_mode(resnet, "ga").to_csv(profiles, index=False)
    resnet[["mode", *MODE_FIELDS]].to_csv(cands, index=False)
    rc = main(["plan", "--device", "agx-xavier", "--after", str(profiles), "--candidates", str(cands),
               "--objective", "min-time", "--max-power-w", str(cap_w)])
    assert rc == (1 if hopeless else 0)
    assert ("relax them (profiling more cannot help)" in capsys.readouterr().err) == hopeless


@pytest.mark.parametrize("share", [0.8, 1.25])
def test_a_cap_is_given_up_on_below_the_unreachable_chance_only(resnet, others, share):
    """ResNet-18 from g and a, min-time under a power cap set so that the likeliest of a-j meets it once
    profiled with ``share`` x UNREACHABLE_CAP_CHANCE (by its point, the SD of its power interval's upper
    half): below the threshold the loop is told to relax the cap, above it to profile on. (9.75 W: 0.6%.)"""
    adviser = A.Adviser(load_device("agx-xavier"), D.Goal("min-time", max_power_w=9.75),
                        resnet[["mode", *MODE_FIELDS]], others)
    rows = _by_mode(resnet, "ga")
    model, (table, open_) = adviser.fit_model(rows), adviser.decision_set(rows)
    z = z_of(adviser.goal.confidence)
    # The chance a cap is met is Phi((ln cap - ln point) / sd) per mode: the cap that the likeliest mode
    # meets with the wanted chance is the least, over modes, of point x exp(sd x Phi^-1(chance)).
    chance = share * D.UNREACHABLE_CAP_CHANCE
    predicted = D.decide(model, table, adviser.goal, open_).table
    point, high = predicted["avg_power_w"].to_numpy(), predicted["avg_power_w_high"].to_numpy()
    cap_w = float(np.min(point * np.exp(np.log(high / point) / z * NormalDist().inv_cdf(chance))))
    goal = D.Goal("min-time", max_power_w=cap_w)
    d = D.decide(model, table, goal, open_)
    assert d.best is None  # no upper end meets the cap yet
    said = D.unreachable_caps(d, goal)
    if share < 1:
        assert said is not None and f"a {chance:.1%} chance" in said and "relax them" in said
    else:
        assert said is None


@pytest.mark.parametrize(("goal", "field"), [
    (D.Goal("fastest"), "objective"), (D.Goal("min-time", max_power_w=-3.0), "max_power_w"),
    (D.Goal("min-time", max_epoch_time_s=float("nan")), "max_epoch_time_s"),
    (D.Goal("min-time", confidence=90.0), "confidence"),
    # the device's cap range, as recommend checks it: 7000 is milliwatts, 0.05 below any module
    (D.Goal("min-time", max_power_w=7000.0), "max_power_w"), (D.Goal("min-time", max_power_w=0.05), "max_power_w")])
def test_bad_goal_names_the_field(goal, field):
    with pytest.raises(InputError) as err:
        A.Adviser(load_device("agx-xavier"), goal)
    assert err.value.field == field


def test_bad_budget_and_width_name_the_field(resnet):
    with pytest.raises(InputError) as err:
        A.AdaptiveChooser(load_device("agx-xavier"), D.Goal(), budget=0)
    assert err.value.field == "budget"
    for width, said in ((0.0, "> 0"), (12, "a share between 0 and 1 (e.g. 0.12 for 12%), got 12"), (1.0, "got 1")):
        with pytest.raises(InputError) as err:  # 12: a percent typed for the share, once taken as 1,200%
            A.AdaptiveChooser(load_device("agx-xavier"), D.Goal(), budget=3, target_width=width)
        assert err.value.field == "target_width" and said in err.value.message, err.value.message
    with pytest.raises(InputError) as err:  # more start modes than the budget: refused before profiling
        A.AdaptiveChooser(load_device("agx-xavier"), D.Goal(), budget=2, start=resnet[["mode", *MODE_FIELDS]][:3])
    assert err.value.field == "budget" and "below the 3 --modes" in err.value.message
    with pytest.raises(InputError) as err:
        A.Adviser(load_device("agx-xavier"), D.Goal()).propose(_by_mode(resnet, "a"), budget=0)
    assert err.value.field == "budget"


def test_every_plan_path_refuses_a_budget_over_the_one_limit(resnet, monkeypatch):
    from jetpredict.predictor import service
    from jetpredict.predictor.limits import MAX_PLAN_BUDGET

    too_many = MAX_PLAN_BUDGET + 1

    def no_work(*args, **kwargs):
        raise AssertionError("the budget is checked before any fit or plan")

    monkeypatch.setattr(A.Adviser, "fit_model", no_work)
    monkeypatch.setattr(service.planning, "plan", no_work)
    calls = (lambda: A.AdaptiveChooser(load_device("agx-xavier"), D.Goal(), budget=too_many),
             lambda: A.Adviser(load_device("agx-xavier"), D.Goal()).propose(_by_mode(resnet, "a"), budget=too_many),
             lambda: service.plan_profiling("agx-xavier", too_many))
    messages = set()
    for call in calls:
        with pytest.raises(InputError) as err:
            call()
        assert err.value.field == "budget"
        messages.add(err.value.message)
    assert messages == {f"--budget (modes to profile) must be a whole number between 1 and {MAX_PLAN_BUDGET}, "
                        f"got {too_many}"}  # one rule, one message
    assert service.check_budget(np.int64(MAX_PLAN_BUDGET)) == MAX_PLAN_BUDGET
    for bad in (True, 2.0, "2"):
        with pytest.raises(InputError):
            service.check_budget(bad)


def test_replay_refuses_a_mode_it_did_not_measure(resnet):
    with pytest.raises(InputError) as err:
        R.SweepReplay(resnet).measure({"mode": "z", "cpu_cores": 3, "cpu_mhz": 1000.0, "gpu_mhz": 500.0,
                                       "emc_mhz": 800.0})
    assert err.value.field == "mode"


def test_cli_plan_after_writes_the_next_modes(tmp_path, resnet, capsys):
    profiles = tmp_path / "p.csv"
    _by_mode(resnet, "hae").to_csv(profiles, index=False)
    cands = tmp_path / "a-j.csv"
    resnet[["mode", *MODE_FIELDS]].to_csv(cands, index=False)
    out = tmp_path / "next.csv"
    rc = main(["plan", "--device", "agx-xavier", "--after", str(profiles), "--candidates", str(cands),
               "--objective", "min-energy", "--budget", "2", "--out", str(out)])
    assert rc == 0
    got = pd.read_csv(out, dtype={"mode": str})
    # what the proposal rests on travels in columns, as in every verb's CSV from a fit (DESIGN)
    assert list(got.columns) == ["mode", *MODE_FIELDS, "est_profile_s", "score", "expected_uncertainty", "reason",
                                 "reference_source", "workload_source", "split_source", "profiled_modes",
                                 "model_version", "cross_device"]
    assert len(got) == 2 and set(got["mode"]) <= set("bcdfgij")
    assert np.isfinite(got["score"]).all() and set(got["profiled_modes"]) == {3}
    said = capsys.readouterr().err
    assert "profile next" in said
    # the summary names what the recommendation rests on, as recommend's does (the table shows no columns)
    assert f"from 3 profiled mode(s) on agx-xavier; reference: {got['reference_source'][0]}, workload rows: " \
           f"{got['workload_source'][0]}, model {got['model_version'][0]}" in said
    # a cap no upper end meets yet (5.89 W at least), though points may: no bound on the uncertainty, an empty
    # cell (null in JSON), whole cores in both
    rc = main(["plan", "--device", "agx-xavier", "--after", str(profiles), "--max-power-w", "5", "--out", str(out)])
    assert rc == 0 and pd.read_csv(out)["expected_uncertainty"].isna().all()
    assert "inf" not in out.read_text()
    json_out = tmp_path / "next.json"
    assert main(["plan", "--device", "agx-xavier", "--after", str(profiles), "--out", str(json_out)]) == 0
    assert all(isinstance(m["cpu_cores"], int) for m in json.loads(json_out.read_text()))


@pytest.mark.parametrize(("argv", "text"), [
    (["--budget", "4", "--objective", "min-time"], "--objective needs --after"),
    ([], "--budget is required"),
    (["--after", "missing.csv"], "missing.csv"),
])
def test_cli_plan_bad_flags_exit_2(tmp_path, capsys, argv, text, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "--device", "agx-xavier", *argv]) == 2
    assert text in capsys.readouterr().err


@pytest.mark.parametrize(("rival", "measured_s", "holds"), [
    (("r", 5, 729.6, 306.0, 665.6, 40.2, 400.0), 40.0, True),    # one CPU clock away, 0.5% apart
    (("r", 5, 729.6, 306.0, 665.6, 40.2, 400.0), 44.0, False),   # ... but the measured rival was 8% off
    (("r", 5, 729.6, 306.0, 665.6, 40.2, 370.0), 40.0, False),   # ... or the new rival 8% apart in energy
    (("r", 4, 729.6, 306.0, 665.6, 40.2, 400.0), 40.0, False),   # two knobs away (cores, CPU): measured
])
def test_a_measured_rival_settles_the_stop_for_its_neighbours_within_noise(rival, measured_s, holds):
    """The rival profiled to settle a stop measured as predicted and did not become the pick; when the
    rival now likeliest to beat the pick is a neighbour of it one knob away, within the run-to-run noise in
    time and objective, that measurement answers its case too (twin MobileNetV3 min-energy on Orin Nano
    measured such neighbours until the budget ran out)."""
    chooser = A.AdaptiveChooser(load_device("orin-nano"), D.Goal("min-energy"), budget=10)
    measured = ("m", 5, 883.2, 306.0, 665.6, 40.0, 402.0)
    pick = ("p", 5, 806.4, 306.0, 665.6, 41.0, 395.0)
    table = pd.DataFrame([measured, pick, rival], columns=["mode", *MODE_FIELDS, "epoch_time_s", "epoch_energy_j"])
    d = D.Decision(table, 1, 0.10, 0.10, np.array([2]), np.array([0.4]), 0.2, 0.06, top_rival=2)
    keys = A.mode_keys(chooser.adviser.device, d.table)
    key = keys[0]  # knobs and the whole GPU
    chooser._settling = (key, 40.5)  # the prediction it was profiled on
    reason = chooser._rival_explained({key: measured_s}, d, keys)
    assert (reason is not None) == holds
    assert chooser._settling is None  # one step only
    if holds:
        assert "did not beat the pick" in reason and "one knob from it" in reason


def test_recommend_and_plan_after_note_a_recommended_mode_outside_the_profiled_ranges(real, tmp_path, capsys):
    """Two modes at one set of clocks (a, b: 4 and 8 cores at CPU 1200, GPU 670, EMC 1333) leave the fastest
    mode under 15 W outside them: both verbs name the knobs, the same words."""
    lenet = real[real["workload"] == "lenet5-mnist"].reset_index(drop=True)
    profiles, model = tmp_path / "ab.csv", tmp_path / "ab.json"
    _by_mode(lenet, "ab").to_csv(profiles, index=False)
    assert main(["fit", "--device", "agx-xavier", "--profiles", str(profiles), "--out", str(model)]) == 0
    note = "note: the recommended mode lies outside the profiled range of cpu_mhz;gpu_mhz;emc_mhz; profile it"
    capsys.readouterr()
    assert main(["recommend", "--model", str(model), "--objective", "min-time", "--max-power-w", "15"]) == 0
    assert note in capsys.readouterr().err
    assert main(["plan", "--device", "agx-xavier", "--after", str(profiles), "--objective", "min-time",
                 "--max-power-w", "15"]) == 0
    assert note in capsys.readouterr().err


def test_a_measured_pick_that_dominates_every_mode_ends_the_loop(resnet, others):
    """Min-time without caps over a-j: g (MAXN) is at or above every knob of every mode, so once measured no
    mode may beat it; the loop stops there even when its interval is wider than the target (twin Nano: a
    measured MAXN kept a 12-14% interval, and the loop profiled the slowest corners until its budget ran out)."""
    replay = R.SweepReplay(resnet)
    chooser = A.AdaptiveChooser(load_device("agx-xavier"), D.Goal("min-time"), budget=10, target_width=0.01,
                                candidates=replay.modes(), reference=others,
                                start=_by_mode(resnet, "ah")[["mode", *MODE_FIELDS]])
    rows = R.run_loop(chooser, replay.measure)
    assert [r["mode"] for r in rows] == ["a", "h", "g"]
    assert chooser.steps[-1].stop.startswith("the pick is measured and no unprofiled mode may beat it")


def test_a_profiled_gated_preset_leaves_the_whole_gpu_mode_at_its_clocks_open():
    """Orin Nano's 7W powers half the GPU: profiling it says nothing of the custom mode at the same clocks
    with the whole GPU (the loop used to count that mode profiled, and stopped with "every candidate mode is
    profiled" while it, predicted 20% faster than the pick, was never measured)."""
    device = load_device("orin-nano")
    gated = device.preset("7W")
    assert gated.gpu_share < 1.0
    adviser = A.Adviser(device, D.Goal("min-time"))
    table, open_ = adviser.decision_set(pd.DataFrame([{"mode": "7W", **gated.as_dict()}]))
    same_clocks = np.all(table[list(MODE_FIELDS)].to_numpy(float) == np.array(gated.knobs(), float), axis=1)
    preset = same_clocks & (table["mode"] == "7W").to_numpy()
    assert preset.sum() == 1 and not open_[preset].any()
    assert (same_clocks & ~preset).sum() == 1 and open_[same_clocks & ~preset].all()


@pytest.mark.parametrize("design", ["efij", "abefgh"])
def test_a_filler_says_it_separates_knobs_only_where_the_profiled_modes_alias_some(real, design):
    """``plan --after`` labelled every D-optimal filler "separates knobs the profiled modes do not", also
    where ``fit`` reports no aliased knob."""
    lenet = real[real["workload"] == "lenet5-mnist"].reset_index(drop=True)
    ref = build_reference(real[real["workload"] != "lenet5-mnist"].reset_index(drop=True), "agx-xavier")
    adviser = A.Adviser(load_device("agx-xavier"), D.Goal("min-time", max_power_w=15.0), lenet[["mode", *MODE_FIELDS]],
                        ref)
    rows = _by_mode(lenet, design)
    aliased = bool(adviser.fit_model(rows).aliased_pairs())
    assert aliased == (design == "efij")  # e,f,i,j move the CPU and GPU clocks together
    reasons = list(adviser.propose(rows, budget=10 - len(design)).modes["reason"])
    fillers = [r for r in reasons if "D-optimal gain" in r]
    assert fillers, reasons
    # Each filler is chosen after the pseudo-rows of those before it: once one separates the pair, none need to.
    assert ("separates knobs" in fillers[0]) == aliased and not any("separates knobs" in r for r in fillers[1:]), \
        reasons


def test_a_proposal_never_names_a_profiled_mode_nor_one_twice(resnet, others):
    """ResNet-18 under 15 W after h, a, e, c, f, b: the pick b is profiled, and a proposal of every mode left
    names each of g, j, d, i once. The shortlist scoring the profiled pick again proposed b to be profiled a
    second time; a chosen mode left open was chosen again (g twice)."""
    adviser = A.Adviser(load_device("agx-xavier"), D.Goal("min-time", max_power_w=15.0),
                        resnet[["mode", *MODE_FIELDS]], others)
    proposal = adviser.propose(_by_mode(resnet, "haecfb"), budget=10)
    assert proposal.decision.best_row["mode"] == "b"
    assert sorted(proposal.modes["mode"]) == sorted("gjdi")


def test_a_measured_pick_wider_than_the_target_profiles_on_while_a_rival_may_gain(resnet, others):
    """ResNet-18 under 15 W after h, a, e, c, f, b: the measured pick b keeps a 10% time interval and a rival
    may gain 0.16% (above NEGLIGIBLE_RIVAL_GAIN, below MAX_RIVAL_GAIN). Under a 5% --target-width the loop
    profiles on; only a gain below NEGLIGIBLE_RIVAL_GAIN ends it whatever the interval (stopping on any gain
    under MAX_RIVAL_GAIN ignored the target)."""
    chooser = A.AdaptiveChooser(load_device("agx-xavier"), D.Goal("min-time", max_power_w=15.0), budget=10,
                                target_width=0.05, candidates=resnet[["mode", *MODE_FIELDS]], reference=others)
    rows = _by_mode(resnet, "haecfb")
    mode = chooser.next_mode(rows.to_dict("records"))
    d = chooser.steps[-1].decision
    assert d.best_row["mode"] == "b" and d.time_width_rel > 0.05
    assert A.NEGLIGIBLE_RIVAL_GAIN < d.rival_gain < A.MAX_RIVAL_GAIN
    assert mode is not None and mode["mode"] in set("gjdi"), chooser.steps[-1].stop


def test_a_confirming_measurement_is_held_against_the_picks_predicted_time(resnet, others):
    """ResNet-18 under 15 W: the loop measures the pick b before it stops, then stops because b measured
    within the run-to-run noise of the time predicted for it in the round that chose to measure it (the
    point, 657.8 s; compared with the interval's lower end the confirmation failed and the stop gave
    another reason)."""
    replay = R.SweepReplay(resnet)
    chooser = A.AdaptiveChooser(load_device("agx-xavier"), D.Goal("min-time", max_power_w=15.0), budget=6,
                                candidates=replay.modes(), reference=others)
    R.run_loop(chooser, replay.measure)
    measuring, stop = chooser.steps[-2], chooser.steps[-1]
    assert measuring.reason.startswith("measures the pick before stopping")
    predicted_s = float(measuring.decision.best_row["epoch_time_s"])
    measured_s = float(resnet.set_index("mode").loc[measuring.next_mode["mode"], "epoch_time_s"])
    assert stop.stop == (f"the pick measured {measured_s:.4g} s/epoch, within the run-to-run noise of the "
                         f"{predicted_s:.4g} s that settled the stop")


def test_each_rounds_line_states_the_objectives_figure_first(resnet, others):
    """Under min-energy a round's line says the pick's J/epoch before its s/epoch, as plan --after does (it
    said s/epoch alone, the figure the objective does not rank by)."""
    lines: list[str] = []
    chooser = A.AdaptiveChooser(load_device("agx-xavier"), D.Goal("min-energy"), budget=4, reference=others,
                                log=lines.append)
    chooser.next_mode(_by_mode(resnet, "aceg").to_dict(orient="records"))
    assert lines and re.search(r"recommended \S+ [0-9.]+ J/epoch, [0-9.]+ s/epoch \[", lines[-1]), lines
