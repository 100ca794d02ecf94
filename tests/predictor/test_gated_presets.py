"""Predictions at presets that power only part of the GPU: the GPU's throughput and power follow the
powered share, rows profiled under such a preset are read as such, and the every-mode prediction (custom
modes, the whole GPU) never stands in for them. Rows: the twin's Orin NX sweep (simulated)."""

from __future__ import annotations

import pandas as pd
import pytest
from jetpredict.models.catalogue import ModeArrays, load_device
from jetpredict.models.paths import data_path
from jetpredict.predictor import bundled, service, space
from jetpredict.predictor.terms import ProfileArrays

SWEEP = data_path("reference") / "orin-nx-simulated.csv"
KNOBS = ["cpu_cores", "cpu_mhz", "gpu_mhz", "emc_mhz"]


def _rows(workload: str) -> pd.DataFrame:
    rows = pd.read_csv(SWEEP)
    return rows[rows["workload"] == workload].reset_index(drop=True)


def _preset_and_custom(model, name: str) -> tuple[pd.Series, pd.Series]:
    presets = service.predict(model, "presets").set_index("mode")
    custom = service.predict(model, [{"mode": "custom", **presets.loc[name, KNOBS].to_dict()}])
    return presets.loc[name], custom.iloc[0]


def test_a_gated_preset_is_predicted_slower_on_less_power_than_its_clocks_ungated():
    rows = _rows("resnet18-cifar10")
    model = bundled.fit_workload(rows[~rows["mode"].isin(["10W", "15W"])].iloc[[0, 3, 30, 60]])
    preset, custom = _preset_and_custom(model, "15W")
    assert preset["epoch_time_s"] > 1.4 * custom["epoch_time_s"]
    assert preset["avg_power_w"] < 0.85 * custom["avg_power_w"]
    # Half the GPU at 612 MHz reaches as far as the whole GPU at 306 MHz, below what was profiled.
    assert "gpu_mhz" in preset["extrapolated_knobs"]


def test_rows_profiled_under_a_gated_preset_are_read_as_such():
    rows = _rows("resnet18-cifar10")
    profiled = rows[rows["mode"].isin(["MAXN", "10W", "15W", "25W"])]
    assert ProfileArrays.from_frame(profiled).modes.gpu_share.tolist() == [1.0, 0.5, 0.5, 1.0]
    model = bundled.fit_workload(profiled.iloc[[0, 1, 3]])
    preset, _ = _preset_and_custom(model, "15W")
    measured = float(profiled.loc[profiled["mode"] == "15W", "epoch_time_s"].iloc[0])
    assert preset["epoch_time_s"] == pytest.approx(measured, rel=0.08)


def test_the_every_mode_prediction_never_stands_in_for_a_gated_preset():
    rows = _rows("resnet18-cifar10")
    model = bundled.fit_workload(rows.iloc[[0, 3, 30, 60]])
    device = load_device("orin-nx")
    presets = ModeArrays.from_modes(device.presets)
    assert space.catalogue_index(device, presets) is None
    assert space.catalogue_index(device, presets.take(~presets.gated)) is not None
    space.space_prediction(model, device, 0.9)  # computed and kept: short lists would read it
    direct = bundled.predict_modes(model, presets, device, 0.9).columns()
    served = service.predict_knobs(model, presets, device, 0.9)
    assert served["epoch_time_s"].tolist() == direct["epoch_time_s"].tolist()


def test_a_model_fitted_before_gating_was_read_is_refitted_not_mixed(tmp_path, capsys):
    """A file of an older form whose training rows hold a gated preset was fitted reading them as the whole
    GPU: loading it says to refit, naming the version, instead of failing a consistency check."""
    import json

    from jetpredict.predictor.serialization import model_to_dict
    from model_files import assert_refused_at_load, forge

    rows = _rows("resnet18-cifar10")
    doc = model_to_dict(bundled.fit_workload(rows[rows["mode"].isin(["MAXN", "10W", "15W", "25W"])]))
    path = tmp_path / "old.json"
    forge(path, json.dumps({**doc, "model_version": "mech-15"}).encode(), kind="workload-model")
    assert_refused_at_load(path, ".model_version is mech-15, fitted before presets that power part of the GPU",
                           "mech-15", capsys)
    forge(path, json.dumps(doc).encode(), kind="workload-model")
    assert bundled.load_model(path).model_version == doc["model_version"]


def test_the_transfer_compares_a_gated_presets_rows_as_it_ran():
    """The shares a transfer weighs reference workloads by come from the rows' own modes: a gated preset's
    row read as the whole GPU made the workload look unlike its own twin sweep."""
    from jetpredict.predictor.transfer import _profile_signature

    rows = _rows("resnet18-cifar10")
    profiled = rows[rows["mode"].isin(["MAXN", "10W", "15W", "25W"])]
    model = bundled.fit_workload(profiled)
    fits = {n: f.coef for n, f in model.time_fits.items()}
    seen = _profile_signature(model.training_rows, None, (0.0, 0.0))
    fitted = _profile_signature(model.training_rows, fits, (model.kappa_cpu, model.kappa_pipe))
    # The fit's own terms at the rows' modes reproduce what the rows show (within the fit's error).
    assert abs(fitted - seen).max() < 0.1


def test_the_adaptive_candidates_keep_a_gated_preset_and_the_custom_mode_at_its_clocks():
    from jetpredict.predictor import adaptive as A
    from jetpredict.predictor import decision as D

    adviser = A.Adviser(load_device("orin-nx"), D.Goal("min-time", max_power_w=15.0))
    at = adviser.candidates[KNOBS].eq(pd.Series(load_device("orin-nx").preset("15W").knobs(), index=KNOBS)).all(axis=1)
    assert sorted(adviser.candidates.loc[at, "mode"]) == ["15W", "4c-1651.2-612-3199"]
    assert adviser.is_preset[at.to_numpy()].tolist() == [True, False]
