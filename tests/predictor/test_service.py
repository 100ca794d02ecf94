"""The service facade on a real fit: mode resolution, vectorised prediction, recommendation, plans."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from jetpredict.models.catalogue import MODE_FIELDS, SAME_CLOCK_REL, ModeArrays, load_device, resolve_device
from jetpredict.models.errors import InputError, ModeOutOfRangeError, UnknownDeviceError
from jetpredict.models.profile_files import read_mode_table, read_profile_csv
from jetpredict.predictor import limits, service
from jetpredict.predictor.bundled import fit_workload, predict_modes
from jetpredict.predictor.checks import check_confidence
from jetpredict.predictor.constants import OUTSIDE_TOLERANCE_LN
from jetpredict.predictor.fit_check import fit_caveats
from jetpredict.predictor.limits import FIT_CAVEAT_FIELDS
from jetpredict.predictor.reference import REFERENCE_DIR

PROFILED = ["a", "d", "g", "h"]  # four of the published AGX Xavier modes


@pytest.fixture(scope="module")
def resnet():
    rows = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")
    rows = rows[(rows["workload"] == "resnet18-cifar10") & rows["mode"].isin(PROFILED)]
    return fit_workload(rows.reset_index(drop=True), load_device("agx-xavier"))


def test_resolve_presets_and_all():
    presets = service.resolve_modes("agx-xavier", "presets")
    assert list(presets.columns) == list(service.MODE_COLUMNS)
    assert "MAXN" in set(presets["mode"])
    every = service.resolve_modes(load_device("agx-xavier"), "all")  # a Device object works the same
    assert len(every) == 29232 == len(load_device("agx-xavier").modes())
    every.loc[0, "mode"] = "changed"  # callers get a copy, not the cached table
    assert service.resolve_modes("agx-xavier", "all").loc[0, "mode"] != "changed"


def test_resolve_table_ignores_other_columns_and_accepts_off_step_knobs():
    df = pd.DataFrame([{"mode": "a", "cpu_cores": 4, "cpu_mhz": 1200, "gpu_mhz": 670, "emc_mhz": 1333,
                        "epoch_time_s": 1.0, "note": "x"}])
    out = service.resolve_modes("agx-xavier", df)
    assert list(out.columns) == list(service.MODE_COLUMNS)
    assert out.iloc[0].to_dict() == {"mode": "a", "cpu_cores": 4, "cpu_mhz": 1200.0, "gpu_mhz": 670.0,
                                     "emc_mhz": 1333.0}


def test_an_unlabelled_mode_out_of_range_is_named_by_its_place_alone():
    modes = [{"cpu_cores": 10, "cpu_mhz": 2000, "gpu_mhz": 900, "emc_mhz": 1600}]  # labels filled (HTTP)
    with pytest.raises(ModeOutOfRangeError) as err:
        service.mode_table(load_device("agx-xavier"), modes, fill_labels=True)
    assert err.value.field == "modes.0.cpu_cores" and err.value.message.startswith("modes[0]: cpu_cores=10 ")


@pytest.mark.parametrize(("modes", "field", "words"), [
    ([{"mode": "x", "cpu_cores": 8, "cpu_mhz": 2000, "gpu_mhz": 900}], "modes.emc_mhz", "missing column"),
    ([{"mode": "x", "cpu_cores": 8, "cpu_mhz": 2000, "gpu_mhz": "fast", "emc_mhz": 1600}],
     "modes.0.gpu_mhz", "must be a number"),
    ([{"mode": "ok", "cpu_cores": 8, "cpu_mhz": 2000, "gpu_mhz": 900, "emc_mhz": 1600},
      {"mode": "hot", "cpu_cores": 8, "cpu_mhz": 2000, "gpu_mhz": 3000, "emc_mhz": 1600}],
     "modes.1.gpu_mhz", "outside device 'agx-xavier'"),
    ([{"mode": "x", "cpu_cores": 12, "cpu_mhz": 2000, "gpu_mhz": 900, "emc_mhz": 1600}],
     "modes.0.cpu_cores", "outside"),
    ([{"mode": "", "cpu_cores": 8, "cpu_mhz": 2000, "gpu_mhz": 900, "emc_mhz": 1600}], "modes.0.mode",
     "required"),
    ([{"device": "nano", "mode": "m", "cpu_cores": 4, "cpu_mhz": 1400, "gpu_mhz": 900, "emc_mhz": 1600}],
     "modes.device", "cross-device"),
    ([], "modes", "empty"),
    ("fastest", "modes", "presets"),
])
def test_bad_modes_name_field_and_rule(modes, field, words):
    with pytest.raises(InputError) as err:
        service.resolve_modes("agx-xavier", modes)
    assert err.value.field == field
    assert words in err.value.message


@pytest.mark.parametrize("blank", [float("nan"), None, "", "  "])
def test_a_blank_knob_cell_is_said_to_be_required_and_empty(blank, tmp_path):
    """As an uploaded row's blank cell is worded, not "must be a number, got nan"."""
    modes = [{"mode": "x", "cpu_cores": 8, "cpu_mhz": 2000, "gpu_mhz": blank, "emc_mhz": 1600}]
    with pytest.raises(InputError) as err:
        service.resolve_modes("agx-xavier", modes)
    assert err.value.field == "modes.0.gpu_mhz"
    assert err.value.message == "modes[0] (x): gpu_mhz is required and empty"


def test_a_boolean_knob_of_a_json_modes_file_is_no_number(tmp_path):
    """JSON true is no core count: read as 1 it would be a mode inside the range."""
    path = tmp_path / "modes.json"
    mode = {"mode": "x", "cpu_cores": True, "cpu_mhz": 2000, "gpu_mhz": 900, "emc_mhz": 1600}
    path.write_text(json.dumps([mode]))
    with pytest.raises(InputError) as err:
        service.mode_table(load_device("agx-xavier"), read_mode_table(path, "modes"))
    assert err.value.field == "modes.0.cpu_cores" and "must be a number, got True" in err.value.message


def test_a_blank_knob_cell_of_a_modes_file_names_its_line(resnet, tmp_path, capsys):
    from jetpredict.predictor.bundled import save_model

    from jetpredict.cli import main

    save_model(resnet, tmp_path / "m.json")
    (tmp_path / "q.csv").write_text("mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz\nx,8,2265.6,,2133\n")
    assert main(["predict", "--model", str(tmp_path / "m.json"), "--modes", str(tmp_path / "q.csv")]) == 2
    err = capsys.readouterr().err
    assert "q.csv line 2 (x): gpu_mhz is required and empty" in err and "nan" not in err


def test_too_many_modes_is_refused_at_the_shared_limit():
    one = {"mode": "x", "cpu_cores": 8, "cpu_mhz": 2000.0, "gpu_mhz": 900.0, "emc_mhz": 1600.0}
    table = pd.DataFrame([one] * (limits.MAX_MODES + 1))
    with pytest.raises(InputError, match=f"at most {limits.MAX_MODES}"):
        service.resolve_modes("agx-xavier", table)


def test_unknown_device():
    with pytest.raises(UnknownDeviceError, match="valid devices"):
        service.resolve_modes("jetson-tx9", "presets")
    with pytest.raises(InputError) as err:
        resolve_device(7)
    assert err.value.field == "device"


def test_predict_columns_intervals_and_provenance(resnet):
    df = service.predict(resnet, "presets")
    for col in (*service.MODE_COLUMNS, *service.PREDICTION_COLUMNS, *service.FLAG_COLUMNS,
                *service.PROVENANCE_COLUMNS):
        assert col in df.columns
    for base in ("epoch_time_s", "avg_power_w", "epoch_energy_j"):
        assert (df[f"{base}_low"] < df[base]).all() and (df[base] < df[f"{base}_high"]).all(), base
    assert not df["cross_device"].any()
    assert set(df["reference_source"]) == {"published"}
    assert set(df["profiled_modes"]) == {4} and set(df["confidence"]) == {limits.DEFAULT_CONFIDENCE}
    maxn = df[df["mode"] == "MAXN"].iloc[0]
    assert maxn["epoch_time_s"] == df["epoch_time_s"].min()


def test_confidence_sets_the_width_of_every_interval(resnet):
    narrow = service.predict(resnet, "presets", confidence=0.5)
    wide = service.predict(resnet, "presets", confidence=0.99)
    np.testing.assert_allclose(narrow["epoch_time_s"], wide["epoch_time_s"])
    for base in ("epoch_time_s", "avg_power_w", "epoch_energy_j"):
        assert (wide[f"{base}_high"] > narrow[f"{base}_high"]).all(), base
        assert (wide[f"{base}_low"] < narrow[f"{base}_low"]).all(), base
    for bad in (0.3, 1.0, 90, "high", True):
        with pytest.raises(InputError) as err:
            service.predict(resnet, "presets", confidence=bad)
        assert err.value.field == "confidence"


def test_extrapolated_knobs_name_the_knobs_outside_the_profiled_ranges(resnet):
    # Profiled: a, d, g, h -> 4..8 cores, CPU 1200..2265 MHz, GPU 670..1377 MHz, EMC 1066..2133 MHz.
    table = pd.DataFrame([
        {"mode": "inside", "cpu_cores": 8, "cpu_mhz": 2265.6, "gpu_mhz": 900.0, "emc_mhz": 1600.0},
        {"mode": "slow-gpu", "cpu_cores": 8, "cpu_mhz": 2265.6, "gpu_mhz": 114.75, "emc_mhz": 1600.0},
        {"mode": "corner", "cpu_cores": 1, "cpu_mhz": 115.2, "gpu_mhz": 114.75, "emc_mhz": 204.0}])
    df = service.predict(resnet, table)
    assert df["extrapolated_knobs"].tolist() == ["", "gpu_mhz", "cpu_cores;cpu_mhz;gpu_mhz;emc_mhz"]
    assert df["extrapolated"].tolist() == [False, True, True]

def test_cross_device_predictions_flag_knobs_beyond_the_profiled_shares_of_their_top(resnet):
    # Profiled on AGX Xavier at a, d, g, h: every knob from about half its top to its top. On Xavier NX a
    # knob is outside where it sits below the lowest NX step at or above that share of the NX's own top (the
    # range snapped inward); there the interval widens as it would on AGX Xavier, on top of the transfer's SD.
    from jetpredict.predictor.features import device_maxima

    nx = load_device("xavier-nx")
    moved = service.predict(resnet, "presets", device="xavier-nx")
    assert moved["cross_device"].all() and moved["extrapolated"].any() and not moved["extrapolated"].all()
    src, dst = device_maxima(resnet.device), device_maxima(nx)
    steps = nx.knob_steps()
    low = {k: min(s for s in steps[k] if s * (1 + SAME_CLOCK_REL) >= resnet.profiled_ranges[k][0] * dst[k] / src[k])
           for k in MODE_FIELDS}
    for _, row in moved.iterrows():
        expected = [k for k in MODE_FIELDS if row[k] < low[k] * np.exp(-OUTSIDE_TOLERANCE_LN)]
        assert row["extrapolated_knobs"] == ";".join(expected), row["mode"]
    unflagged = service.predict(replace(resnet, profiled_ranges=None), "presets", device="xavier-nx")
    assert not unflagged["extrapolated"].any()
    np.testing.assert_allclose(moved["epoch_time_s"], unflagged["epoch_time_s"])  # the flags move no point
    inside = ~moved["extrapolated"].to_numpy()
    for col in ("epoch_time_s_high", "avg_power_w_high", "epoch_energy_j_high"):
        np.testing.assert_allclose(moved[col][inside], unflagged[col][inside])
        assert (moved[col][~inside] > unflagged[col][~inside]).all(), col


def test_predict_all_is_monotone_in_gpu_clock(resnet):
    df = service.predict(resnet, "all")
    assert len(df) == 29232 and np.isfinite(df[list(service.PREDICTION_COLUMNS)].to_numpy()).all()
    one = df[(df["cpu_cores"] == 8) & (df["cpu_mhz"] == 2265.6) & (df["emc_mhz"] == 2133.0)]
    times = one.sort_values("gpu_mhz")["epoch_time_s"].to_numpy()
    assert (np.diff(times) < 0).all()


def test_predict_with_epochs_adds_to_accuracy(resnet):
    df = service.predict(resnet, "presets", epochs=150)
    np.testing.assert_allclose(df["time_to_accuracy_s"], 150 * df["epoch_time_s"])
    assert (df["time_to_accuracy_s_high"] > 150 * df["epoch_time_s_high"]).all()
    assert (df["energy_to_accuracy_j_low"] < 150 * df["epoch_energy_j_low"]).all()
    with pytest.raises(InputError, match="epochs"):
        service.predict(resnet, "presets", epochs=0)


def test_model_refuses_another_devices_modes(resnet):
    nano_maxn = [load_device("nano").maxn.as_dict()]
    nano_maxn[0]["cpu_cores"] = 4
    nano_maxn[0]["gpu_mhz"] = 2000.0  # no Nano reaches this, and no AGX Xavier either
    with pytest.raises(ModeOutOfRangeError) as err:
        service.predict(resnet, nano_maxn)
    assert err.value.field == "modes.0.gpu_mhz"


def test_cross_device_prediction_is_marked(resnet):
    df = service.predict(resnet, "presets", device="xavier-nx")
    assert df["cross_device"].all()
    assert set(df["mode"]) == {p.mode for p in load_device("xavier-nx").presets}


def test_recommend_caps_power_with_the_upper_bound(resnet):
    out = service.recommend(resnet, "min-time", max_power_w=20)
    best = out.best
    assert out.feasible and best["avg_power_w_high"] <= 20
    # The modes of the device's space (the presets join them as candidates, not as modes considered).
    assert out.modes_considered == len(load_device("agx-xavier").modes()) == 29232
    every = service.predict(resnet, "all")
    # The point-based choice would have taken a faster mode whose upper bound breaks the cap.
    by_point = every[every["avg_power_w"] <= 20]["epoch_time_s"].min()
    assert by_point < best["epoch_time_s"]
    under = every[(every["avg_power_w_high"] <= 20) & ~every["extrapolated"]]
    assert best["epoch_time_s"] == pytest.approx(under["epoch_time_s"].min()) or best["extrapolated"]
    # The front holds feasible modes only, fastest first, trading time for energy monotonically.
    assert all(r["avg_power_w_high"] <= 20 for r in out.pareto)
    t = [r["epoch_time_s"] for r in out.pareto]
    e = [r["epoch_energy_j"] for r in out.pareto]
    assert t == sorted(t) and e == sorted(e, reverse=True)


def test_higher_confidence_gives_a_more_cautious_choice(resnet):
    loose = service.recommend(resnet, "min-time", max_power_w=20, confidence=0.5)
    strict = service.recommend(resnet, "min-time", max_power_w=20, confidence=0.99)
    assert strict.best["avg_power_w_high"] <= 20 and loose.best["avg_power_w_high"] <= 20
    assert strict.best["avg_power_w"] < loose.best["avg_power_w"]
    assert strict.best["epoch_time_s"] >= loose.best["epoch_time_s"]
    assert strict.confidence == 0.99 and strict.best["confidence"] == 0.99


def test_recommend_min_energy_under_time_limit_uses_the_upper_time_bound(resnet):
    out = service.recommend(resnet, "min-energy", max_epoch_time_s=400)
    assert out.best["epoch_time_s_high"] <= 400
    # The least energy among the modes it may pick (in-range ones when recommend preferred those).
    pool = [r for r in out.pareto if not r["extrapolated_knobs"]] if out.preferred_in_range else out.pareto
    assert out.best["epoch_energy_j"] == pytest.approx(min(r["epoch_energy_j"] for r in pool))


def test_recommend_prefers_in_range_modes_unless_better_beyond_the_interval(resnet):
    out = service.recommend(resnet, "min-energy")
    every = service.predict(resnet, "all")
    best_any = every.loc[every["epoch_energy_j"].idxmin()]
    inside = every[~every["extrapolated"]]
    best_in = inside.loc[inside["epoch_energy_j"].idxmin()]
    if best_any["epoch_energy_j_high"] < best_in["epoch_energy_j"]:
        assert out.best["mode"] == best_any["mode"] and not out.preferred_in_range
    else:
        assert out.best["mode"] == best_in["mode"] and out.preferred_in_range
    expected = "" if out.preferred_in_range else best_any["extrapolated_knobs"]
    assert out.best["extrapolated_knobs"] == expected


def test_recommend_infeasible_reports_reason(resnet):
    out = service.recommend(resnet, "min-time", max_power_w=1.0)
    assert out.best is None and not out.feasible and "lowest upper bound of power at 90%" in out.reason
    assert out.as_dict()["best"] is None


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"objective": "fastest"}, "objective"),
    ({"objective": "min-time", "max_power_w": -3}, "max_power_w"),
    ({"objective": "min-time", "max_epoch_time_s": float("nan")}, "max_epoch_time_s"),
    ({"objective": "min-time", "max_power_w": "many"}, "max_power_w"),
    ({"objective": "min-time", "confidence": 0.2}, "confidence"),
])
def test_bad_recommend_input_names_the_field(resnet, kwargs, field):
    with pytest.raises(InputError) as err:
        service.recommend(resnet, **kwargs)
    assert err.value.field == field


def test_power_constraints_apply_without_measured_power():
    rows = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")
    rows = rows[(rows["workload"] == "mobilenetv3-gld23k") & rows["mode"].isin(PROFILED)]
    rows = rows.reset_index(drop=True)
    rows[["epoch_energy_j", "avg_power_w", "base_power_w"]] = np.nan
    model = fit_workload(rows, load_device("agx-xavier"))
    out = service.recommend(model, "min-time", max_power_w=20)
    assert out.feasible and out.best["avg_power_w_high"] <= 20
    assert out.best["power_source"] == "reference"


def test_cross_device_provenance_names_the_least_trustworthy_reference(resnet):
    # The AGX Xavier rows and reference are published; Orin Nano's reference sweeps are simulated.
    assert set(service.predict(resnet, "presets")["reference_source"]) == {"published"}
    moved = service.predict(resnet, "presets", device="orin-nano")
    assert set(moved["reference_source"]) == {"simulated"}
    assert moved["cross_device"].all()


def test_catalogue_modes_read_from_the_space_prediction_match_a_direct_prediction(resnet):
    from jetpredict.predictor.space import catalogue_index, space_prediction, space_ready

    device = load_device("agx-xavier")
    space = device.modes()
    table = pd.DataFrame([space[i].as_dict() for i in (0, 4321, 17777, len(space) - 1)])
    assert catalogue_index(device, ModeArrays.from_frame(table)) is not None
    space_prediction(resnet, device)  # kept: a short list reads it (before, it is predicted directly)
    assert space_ready(resnet, device, limits.DEFAULT_CONFIDENCE)
    df = service.predict(resnet, table)
    direct = predict_modes(resnet, ModeArrays.from_frame(table))
    for column in service.PREDICTION_COLUMNS:
        np.testing.assert_allclose(df[column].to_numpy(), getattr(direct, column), rtol=1e-12)
    # A knob between steps (an nvpmodel cap) is predicted directly, not snapped to a step.
    capped = table.assign(cpu_mhz=1200.0)
    assert catalogue_index(device, ModeArrays.from_frame(capped)) is None
    direct = predict_modes(resnet, ModeArrays.from_frame(capped))
    np.testing.assert_allclose(service.predict(resnet, capped)["epoch_time_s"], direct.epoch_time_s)


# -- plans ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("device_id", ["agx-xavier", "xavier-nx", "nano", "orin-agx", "orin-nx", "orin-nano"])
def test_plan_of_four_varies_every_knob_on_every_device(device_id):
    plan = service.plan_profiling(device_id, 4)
    modes = plan.modes
    assert list(modes.columns) == [*service.MODE_COLUMNS, "est_profile_s"]
    assert len(modes.drop_duplicates(subset=list(MODE_FIELDS))) == 4
    for knob in MODE_FIELDS:
        assert modes[knob].nunique() >= 2, (device_id, knob)
    assert plan.constant == ()
    # settle + idle window alone are 10 s; 50 minibatches add more.
    assert (modes["est_profile_s"] > 10).all()


def test_default_plan_stays_in_the_planning_region_and_given_candidates_are_kept():
    from jetpredict.predictor.limits import MIN_CLOCK_SHARE, MIN_CORES

    top = load_device("agx-xavier").knob_ranges()
    modes = service.plan_profiling("agx-xavier", 4).modes
    assert (modes["cpu_cores"] >= MIN_CORES).all()
    for knob in ("cpu_mhz", "gpu_mhz", "emc_mhz"):
        assert (modes[knob] >= MIN_CLOCK_SHARE * top[knob][1]).all(), knob
    # Orin Nano's memory clock has one step in its upper half (2133 MHz): the next one below joins.
    assert set(service.plan_profiling("orin-nano", 4).modes["emc_mhz"]) == {665.6, 2133.0}
    slow = pd.DataFrame([dict(mode=f"m{i}", cpu_cores=1 + i % 2, cpu_mhz=115.2, gpu_mhz=g, emc_mhz=204.0)
                         for i, g in enumerate((114.75, 216.75, 318.75))])
    assert set(service.plan_profiling("agx-xavier", 2, slow).modes["mode"]) <= {"m0", "m1", "m2"}


def test_plan_says_which_knobs_stay_extrapolated(resnet):
    cands = service.predict(resnet, "presets")[list(service.MODE_COLUMNS)]
    plan = service.plan_profiling("agx-xavier", 2, cands)
    assert set(plan.modes["mode"]) <= set(cands["mode"])
    lo = plan.modes[list(MODE_FIELDS)].min()
    hi = plan.modes[list(MODE_FIELDS)].max()
    for knob in MODE_FIELDS:
        share = float(((cands[knob] < lo[knob]) | (cands[knob] > hi[knob])).mean())
        assert plan.extrapolated.get(knob, 0.0) == pytest.approx(share), knob
    one = service.plan_profiling("agx-xavier", 1, cands)
    assert set(one.constant) == set(MODE_FIELDS) and "cannot vary" in one.summary()
    with pytest.raises(InputError) as err:
        service.plan_profiling("agx-xavier", len(cands) + 1, cands)
    assert err.value.field == "budget"


def test_a_budget_past_the_distinct_candidates_says_which_repeat():
    """Candidates with the same knobs are one mode: the refusal counts the distinct ones and says how many
    of the given repeat another, rather than naming a count the user never passed."""
    fast = dict(cpu_cores=8, cpu_mhz=2265.6, gpu_mhz=1377.0, emc_mhz=2133.0)
    slow = dict(cpu_cores=4, cpu_mhz=1190.4, gpu_mhz=675.75, emc_mhz=1331.2)
    cands = [dict(mode="x", **fast), dict(mode="y", **fast), dict(mode="z", **slow)]
    with pytest.raises(InputError) as err:
        service.plan_profiling("agx-xavier", 3, cands)
    assert err.value.field == "budget"
    assert "2 distinct candidate modes" in str(err.value) and "1 of the 3 given repeats" in str(err.value)
    assert set(service.plan_profiling("agx-xavier", 2, cands).modes["mode"]) == {"x", "z"}


def test_a_plan_for_one_device_refuses_a_model_fitted_on_another(resnet):
    """The model times the plan's profiling runs: one of another device would time them on the wrong board."""
    with pytest.raises(InputError) as err:
        service.plan_profiling("xavier-nx", 4, model=resnet)
    assert err.value.field == "device"
    assert "the model was fitted on 'agx-xavier', the plan is for 'xavier-nx'" in err.value.message
    assert len(service.plan_profiling("agx-xavier", 4, model=resnet).modes) == 4


def test_http_schemas_accept_exactly_what_the_service_accepts():
    """Limits, objectives and the confidence range are defined once (predictor.limits): a request the
    schema lets through is one the service takes, and the first value past a limit fails in both."""
    from jetpredict.api import query_schemas
    from marshmallow import ValidationError

    clients = [{"id": f"c{i}", "device": "nano"} for i in range(limits.MAX_CLIENTS + 1)]
    body = {"workload": {"id": "w"}, "deadline_s": 100.0}
    query_schemas.FleetPlanRequestSchema().load({**body, "clients": clients[:-1]})
    with pytest.raises(ValidationError, match="clients"):
        query_schemas.FleetPlanRequestSchema().load({**body, "clients": clients})
    request = {"workload": {"id": "w"}, "objective": "min-time"}
    assert [query_schemas.RecommendationRequestSchema().load({**request, "objective": objective})["objective"]
            for objective in limits.OBJECTIVES] == list(limits.OBJECTIVES)
    for ok in (limits.MIN_CONFIDENCE, limits.MAX_CONFIDENCE):
        assert query_schemas.RecommendationRequestSchema().load({**request, "confidence": ok})["confidence"] == ok
    for bad in (limits.MIN_CONFIDENCE - 0.01, 1.0):
        with pytest.raises(ValidationError, match="confidence"):
            query_schemas.RecommendationRequestSchema().load({**request, "confidence": bad})
        with pytest.raises(InputError):
            check_confidence(bad)
    assert query_schemas.RecommendationRequestSchema().load(request)["confidence"] == limits.DEFAULT_CONFIDENCE


# -- one answer pipeline (issue 19) ----------------------------------------------------------------------
@pytest.mark.parametrize("modes", ["presets", "all", [
    {"mode": "", "cpu_cores": 3, "cpu_mhz": 1000.0, "gpu_mhz": 600.0, "emc_mhz": 1300.0},
    {"mode": "b", "cpu_cores": 8, "cpu_mhz": 2265.6, "gpu_mhz": 1377.0, "emc_mhz": 2133.0}]])
def test_prediction_answer_is_the_table_of_predict_with_provenance_once(resnet, modes):
    answer = service.prediction_answer(resnet, modes, epochs=5, workload_id="w", fill_labels=True)
    assert answer.device == "agx-xavier" and answer.workload_id == "w" and answer.epochs == 5
    assert set(answer.provenance) == {*service.PROVENANCE_FIELDS, *FIT_CAVEAT_FIELDS}
    assert answer.provenance == {**service.provenance(resnet, "agx-xavier"), **fit_caveats(resnet)}
    assert set(answer.constants) == set(service.CONSTANT_COLUMNS)
    assert [*answer.columns, *service.CONSTANT_COLUMNS] == list(service.ROW_COLUMNS)
    table_modes = modes if isinstance(modes, str) else [{**m, "mode": m["mode"] or "3c-1000-600-1300"}
                                                         for m in modes]
    df = service.predict(resnet, table_modes, epochs=5)
    assert answer.count == len(df) and list(answer.columns["mode"]) == list(df["mode"])
    for name in ("epoch_time_s", "avg_power_w_high", "time_to_accuracy_s_high"):
        np.testing.assert_allclose(np.asarray(answer.columns[name], dtype=float), df[name].to_numpy(), rtol=1e-12)
    rows = answer.records()
    assert list(rows[0]) == list(service.ROW_COLUMNS) and rows[0]["confidence"] == pytest.approx(0.9)
    assert list(answer.frame().columns) == list(df.columns)


def test_unlabelled_modes_get_their_knob_label_only_when_asked(resnet):
    modes = [{"cpu_cores": 3, "cpu_mhz": 1000.0, "gpu_mhz": 600.0, "emc_mhz": 1300.0}]
    assert service.prediction_answer(resnet, modes, fill_labels=True).columns["mode"] == ["3c-1000-600-1300"]
    with pytest.raises(InputError) as err:
        service.prediction_answer(resnet, modes)
    assert err.value.field == "modes.mode"
    with pytest.raises(InputError) as err:
        service.prediction_answer(resnet, [{**modes[0], "gpu_mhz": True}], fill_labels=True)
    assert err.value.field == "modes.0.gpu_mhz"  # a boolean is not a clock


def test_cached_tables_and_presets_cannot_be_changed_by_callers(resnet):
    first = service.prediction_answer(resnet, "presets")
    again = service.prediction_answer(resnet, "presets")
    assert again.columns["epoch_time_s"] is first.columns["epoch_time_s"]  # kept per fitted model
    with pytest.raises(ValueError):
        first.columns["epoch_time_s"][0] = 0.0
    frame = first.frame()
    frame.loc[0, "epoch_time_s"] = -1.0  # a caller's table is its own copy
    assert service.prediction_answer(resnet, "presets").columns["epoch_time_s"][0] > 0


def test_a_new_model_at_a_kept_models_id_gets_its_own_space_prediction(resnet, monkeypatch):
    """The space prediction is kept per model object: a new model that CPython places at the id of a kept one
    (an id is reused once its object is freed) must not read the old model's prediction. Every model is
    given one id here, which forces that reuse; the kept entry's weak reference tells the two apart (without
    it, LeNet-5 got ResNet-18's all-modes prediction)."""
    from jetpredict.predictor import space

    rows = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")
    rows = rows[(rows["workload"] == "lenet5-mnist") & rows["mode"].isin(PROFILED)]
    lenet = fit_workload(rows.reset_index(drop=True), load_device("agx-xavier"))
    monkeypatch.setattr(space, "_spaces", space.PerModelCache(space.MAX_CACHED))  # the suite's entries untouched
    monkeypatch.setattr(space, "id", lambda obj: 1, raising=False)  # the module's id(): one for every object
    device = load_device("agx-xavier")
    first = space.space_prediction(resnet, device)
    assert space.kept_prediction(lenet, device, limits.DEFAULT_CONFIDENCE) is None
    own = space.space_prediction(lenet, device)
    assert own is not first
    direct = predict_modes(lenet, ModeArrays.of_device(device), device)
    np.testing.assert_allclose(own.epoch_time_s, direct.epoch_time_s)
    assert service.predict(lenet, "all")["epoch_time_s"].to_numpy() == pytest.approx(direct.epoch_time_s)


def test_recommendation_and_fleet_answers_state_provenance_from_the_service(resnet):
    result = service.recommend(resnet, "min-time", max_power_w=20)
    rec = service.recommendation_answer(resnet, result, workload_id="w")
    assert {k: rec[k] for k in service.PROVENANCE_FIELDS} == service.provenance(resnet, "agx-xavier")
    assert rec["workload_id"] == "w" and set(rec["best"]) <= set(service.ROW_COLUMNS)
    clients = [{"id": "a", "device": "agx-xavier"}, {"id": "b", "device": "orin-nx"}]
    plan = service.fleet_answer(resnet, clients, 3600.0, workload_id="w")
    assert plan["reference_source"] == "simulated"  # orin-nx rests on simulated sweeps
    assert plan["workload_id"] == "w" and [c["id"] for c in plan["clients"]] == ["a", "b"]
    import json

    json.dumps(plan, allow_nan=False)  # JSON-ready: no NaN, no numpy scalars


@pytest.mark.parametrize(("caps", "stated"), [
    ({"max_power_w": 20.0}, {"max_power_w": 20.0}),
    ({"max_epoch_time_s": 1e4}, {"max_epoch_time_s": 1e4}),
    ({}, {}),
])
def test_the_recommendation_answer_states_only_the_caps_that_were_set(resnet, caps, stated):
    result = service.recommend(resnet, "min-energy", **caps)
    assert None in result.constraints.values()  # the result keeps a cap not set as None; the answer drops it
    assert service.recommendation_answer(resnet, result)["constraints"] == stated


@pytest.mark.parametrize("epochs", [None, 3])
def test_table_columns_are_the_prediction_tables_columns(resnet, epochs):
    # recommend --format csv writes them as the header when no mode meets the caps
    df = service.predict(resnet, "presets", epochs=epochs)
    assert service.table_columns(epochs) == tuple(df.columns)
