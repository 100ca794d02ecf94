"""A JSON profile file's NaN and Infinity (which Python's reader takes, though strict JSON has neither) are
refused as the CSV reader refuses "nan": a number that is not finite, not an empty cell. What we write holds
neither: they are written as null."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
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


def test_compact_json_is_strict_json_with_unknowns_as_null():
    out = pf.compact_json({"a": math.nan, "b": np.int64(2), "c": [np.float32(1.5), math.inf]})
    assert out == b'{"a":null,"b":2,"c":[1.5,null]}\n'


def test_frame_records_give_null_for_nan_and_infinite_cells():
    df = pd.DataFrame({"x": [1.0, math.nan, -math.inf], "m": ["a", "b", "c"]})
    assert pf.frame_records(df) == [{"x": 1.0, "m": "a"}, {"x": None, "m": "b"}, {"x": None, "m": "c"}]
