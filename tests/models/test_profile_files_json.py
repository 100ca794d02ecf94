"""A JSON profile file's NaN and Infinity (which Python's reader takes, though strict JSON has neither) are
refused as the CSV reader refuses "nan": a number that is not finite, not an empty cell."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jetpredict.models import profile_files as pf
from jetpredict.models.profile_rows import REQUIRED_AND_EMPTY, ProfileRowsError

ROW = {"device": "orin-agx", "workload": "mobilenetv3-gld23k", "mode": "MAXN", "cpu_cores": 12,
       "cpu_mhz": 2201.6, "gpu_mhz": 1300.5, "emc_mhz": 3199, "batch_size": 16,
       "minibatches_per_epoch": 1000, "epoch_time_s": 60.0}


def _problems(path: Path) -> dict[str, str]:
    with pytest.raises(ProfileRowsError) as err:
        pf.read_profile_rows(path)
    return {p.field: p.message for p in err.value.problems}


@pytest.mark.parametrize("column", ["epoch_time_s", "avg_power_w", "cpu_cores", "power_samples"])
def test_a_json_nan_number_is_not_finite_as_in_a_csv(tmp_path, column):
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([{**ROW, column: float("nan")}]))  # json.dumps writes the literal NaN
    csv_path = tmp_path / "rows.csv"
    pf.write_profile_csv([{**ROW, column: "nan"}], csv_path)
    assert _problems(path)[column] == "must be a finite number, got 'NaN'"
    assert _problems(csv_path)[column] == "must be a finite number, got 'nan'"


def test_a_json_infinity_and_a_null_keep_their_messages(tmp_path):
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([{**ROW, "epoch_time_s": float("inf")}, {**ROW, "epoch_time_s": None}]))
    with pytest.raises(ProfileRowsError) as err:
        pf.read_profile_rows(path)
    said = {(p.line, p.field): p.message for p in err.value.problems}  # lines count items from 1
    assert said[(1, "epoch_time_s")] == "must be a finite number, got inf"
    assert said[(2, "epoch_time_s")] == REQUIRED_AND_EMPTY  # null is JSON's empty cell


def test_a_nan_in_a_text_column_stays_an_empty_one(tmp_path):
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([{**ROW, "workload": float("nan")}]))
    assert _problems(path)["workload"] == REQUIRED_AND_EMPTY
