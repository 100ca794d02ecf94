"""The ground floor's shared helpers: the one data-path accessor, the one JSON-ready conversion and the
errors' JSON shape."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from jetpredict.models import data_path
from jetpredict.models.catalogue import DEVICES_DIR, device_ids
from jetpredict.models.errors import InputError
from jetpredict.models.jsonsafe import json_safe


def test_data_path_finds_the_shipped_data():
    assert data_path("devices") == DEVICES_DIR
    assert {p.stem for p in data_path("devices").glob("*.toml")} == set(device_ids())
    assert data_path("reference", "agx-xavier-published.csv").is_file()
    assert data_path("fitted").name == "fitted"
    with pytest.raises(ValueError, match="devices, reference, fitted"):
        data_path("weights")


def test_json_safe_turns_unknowns_into_null_and_numpy_into_python():
    value = {"a": float("nan"), "b": np.float32(1.5), "c": [np.int64(3), math.inf], 4: (pd.NA, pd.NaT),
             "d": np.array([1.0, np.nan])}
    out = json_safe(value)
    assert out == {"a": None, "b": 1.5, "c": [3, None], "4": [None, None], "d": [1.0, None]}
    assert json.loads(json.dumps(out, allow_nan=False)) == out
    assert type(out["c"][0]) is int and type(out["b"]) is float


def test_an_error_about_the_whole_input_is_keyed_schema():
    assert InputError("bad body").as_errors() == {"_schema": ["bad body"]}
    assert InputError("bad", "modes").as_errors() == {"modes": ["bad"]}
