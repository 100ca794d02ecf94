"""The service facade on a real fit: mode resolution, vectorised prediction, recommendation, plans."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from jetpredict.models.catalogue import MODE_FIELDS, load_device
from jetpredict.models.errors import InputError, ModeOutOfRangeError, UnknownDeviceError
from jetpredict.models.profile_rows import read_profile_csv
from jetpredict.predictor import service
from jetpredict.predictor.model import fit_workload
from jetpredict.predictor.reference import REFERENCE_DIR

PROFILED = ["a", "d", "g", "h"]  # four of the published AGX Xavier modes


@pytest.fixture(scope="module")
def resnet():
    rows = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")
    rows = rows[(rows["workload"] == "resnet18-cifar10") & rows["mode"].isin(PROFILED)]
    return fit_workload(rows.reset_index(drop=True), "agx-xavier")


def test_resolve_presets_and_all():
    presets = service.resolve_modes("agx-xavier", "presets")
    assert list(presets.columns) == list(service.MODE_COLUMNS)
    assert "MAXN" in set(presets["mode"])
    every = service.resolve_modes("agx-xavier", "all")
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


def test_unknown_device():
    with pytest.raises(UnknownDeviceError, match="valid devices"):
        service.resolve_modes("jetson-tx9", "presets")


def test_predict_columns_intervals_and_provenance(resnet):
    df = service.predict(resnet, "presets")
    for col in (*service.MODE_COLUMNS, *service.PREDICTION_COLUMNS, *service.PROVENANCE_COLUMNS):
        assert col in df.columns
    assert (df["epoch_time_s_low"] <= df["epoch_time_s"]).all()
    assert (df["epoch_time_s"] <= df["epoch_time_s_high"]).all()
    assert (df["epoch_energy_j_low"] <= df["epoch_energy_j"]).all()
    assert (df["epoch_energy_j"] <= df["epoch_energy_j_high"]).all()
    assert not df["cross_device"].any()
    assert set(df["reference_source"]) == {"published"}
    assert set(df["profiled_modes"]) == {4}
    maxn = df[df["mode"] == "MAXN"].iloc[0]
    assert maxn["epoch_time_s"] == df["epoch_time_s"].min()


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
    df = service.predict(resnet, "presets", device_id="xavier-nx")
    assert df["cross_device"].all()
    assert set(df["mode"]) == {p.mode for p in load_device("xavier-nx").presets}


def test_recommend_min_time_under_20_w_is_on_front(resnet):
    out = service.recommend(resnet, "min-time", max_power_w=20)
    best = out["best"]
    assert out["feasible"] and best["avg_power_w"] <= 20
    assert best["mode"] in {r["mode"] for r in out["pareto"]}
    assert best["mode"] in {r["mode"] for r in out["pareto_power"]}
    every = service.predict(resnet, "all")
    under = every[every["avg_power_w"] <= 20]
    assert best["epoch_time_s"] == pytest.approx(under["epoch_time_s"].min())
    # The front is sorted fastest first and trades time for energy monotonically.
    t = [r["epoch_time_s"] for r in out["pareto"]]
    e = [r["epoch_energy_j"] for r in out["pareto"]]
    assert t == sorted(t) and e == sorted(e, reverse=True)


def test_recommend_min_energy_under_time_limit(resnet):
    out = service.recommend(resnet, "min-energy", max_epoch_time_s=400)
    assert out["best"]["epoch_time_s"] <= 400
    assert out["best"]["epoch_energy_j"] == pytest.approx(min(r["epoch_energy_j"] for r in out["pareto"]))


def test_recommend_infeasible_reports_reason(resnet):
    out = service.recommend(resnet, "min-time", max_power_w=1.0)
    assert out["best"] is None and not out["feasible"] and "lowest predicted power" in out["reason"]


def test_plan_profiling_picks_distinct_modes_and_estimates_time():
    plan = service.plan_profiling("agx-xavier", 4)
    assert list(plan.columns) == [*service.MODE_COLUMNS, "est_profile_s"]
    assert len(plan.drop_duplicates(subset=["cpu_cores", "cpu_mhz", "gpu_mhz", "emc_mhz"])) == 4
    for knob in ("cpu_mhz", "gpu_mhz", "emc_mhz"):
        assert plan[knob].nunique() >= 2, knob
    # settle + idle window alone are 10 s; 50 minibatches add more.
    assert (plan["est_profile_s"] > 10).all()


def test_default_plan_stays_in_the_upper_half_of_every_clock_and_given_candidates_are_kept():
    from jetpredict.models.catalogue import load_device
    from jetpredict.predictor.planning import MIN_CLOCK_SHARE, MIN_CORES

    for device_id in ("agx-xavier", "orin-nano"):
        top = load_device(device_id).knob_ranges()
        plan = service.plan_profiling(device_id, 4)
        assert (plan["cpu_cores"] >= MIN_CORES).all()
        for knob in ("cpu_mhz", "gpu_mhz", "emc_mhz"):
            assert (plan[knob] >= MIN_CLOCK_SHARE * top[knob][1]).all(), (device_id, knob)
    slow = pd.DataFrame([dict(mode=f"m{i}", cpu_cores=1 + i % 2, cpu_mhz=115.2, gpu_mhz=g, emc_mhz=204.0)
                         for i, g in enumerate((114.75, 216.75, 318.75))])
    assert set(service.plan_profiling("agx-xavier", 2, slow)["mode"]) <= {"m0", "m1", "m2"}


def test_plan_profiling_from_candidates(resnet):
    cands = service.predict(resnet, "presets")[list(service.MODE_COLUMNS)]
    plan = service.plan_profiling("agx-xavier", 2, cands)
    assert set(plan["mode"]) <= set(cands["mode"])
    with pytest.raises(InputError) as err:
        service.plan_profiling("agx-xavier", len(cands) + 1, cands)
    assert err.value.field == "budget"


def test_power_constraints_apply_without_measured_power():
    rows = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")
    rows = rows[(rows["workload"] == "mobilenetv3-gld23k") & rows["mode"].isin(PROFILED)].reset_index(drop=True)
    rows[["epoch_energy_j", "avg_power_w", "base_power_w"]] = np.nan
    model = fit_workload(rows, "agx-xavier")
    out = service.recommend(model, "min-time", max_power_w=20)
    assert out["feasible"] and out["best"]["avg_power_w"] <= 20
    assert out["best"]["power_source"] == "reference"


def test_cross_device_provenance_names_the_least_trustworthy_reference(resnet):
    # The AGX Xavier rows and reference are published; Orin Nano's reference sweeps are simulated.
    assert set(service.predict(resnet, "presets")["reference_source"]) == {"published"}
    moved = service.predict(resnet, "presets", device_id="orin-nano")
    assert set(moved["reference_source"]) == {"simulated"}
    assert moved["cross_device"].all()


def test_catalogue_modes_read_from_the_space_prediction_match_a_direct_prediction(resnet):
    from jetpredict.predictor.space import catalogue_index

    space = load_device("agx-xavier").modes()
    picked = [space[i].as_dict() for i in (0, 4321, 17777, len(space) - 1)]
    table = pd.DataFrame(picked)
    assert catalogue_index("agx-xavier", {c: table[c].to_numpy() for c in MODE_FIELDS}) is not None
    df = service.predict(resnet, table)
    direct = resnet.predict_arrays(*(table[c].to_numpy() for c in MODE_FIELDS))
    for column in service.PREDICTION_COLUMNS:
        np.testing.assert_allclose(df[column].to_numpy(), direct[column], rtol=1e-12)
    # A knob between steps (an nvpmodel cap) is predicted directly, not snapped to a step.
    capped = table.assign(cpu_mhz=1200.0)
    assert catalogue_index("agx-xavier", {c: capped[c].to_numpy() for c in MODE_FIELDS}) is None
    direct = resnet.predict_arrays(*(capped[c].to_numpy() for c in MODE_FIELDS))
    np.testing.assert_allclose(service.predict(resnet, capped)["epoch_time_s"], direct["epoch_time_s"])
