"""``--modes FILE`` / ``--candidates FILE`` read as JSON: a list of mode objects, ``{"modes": [...]}`` (a mode
list), ``{"rows": [...]}`` (profile rows) and the profiler's own document (``profile --out X.json``, whose
``rows`` are the profile rows and whose ``modes`` are per-mode measurement details, not mode objects)."""

from __future__ import annotations

import json

import pytest
from jetpredict.models import profile_files as pf
from jetpredict.models.catalogue import MODE_FIELDS
from jetpredict.models.errors import InputError

MODE = {"mode": "m", "cpu_cores": 8, "cpu_mhz": 2265.6, "gpu_mhz": 1377, "emc_mhz": 2133}
ROW = {**MODE, "device": "agx-xavier", "workload": "w", "num_workers": 4, "batch_size": 16,
       "minibatches_per_epoch": 100, "epoch_time_s": 10.0, "source": "simulated"}


def _read(tmp_path, payload):
    path = tmp_path / "modes.json"
    path.write_text(json.dumps(payload))
    return pf.read_mode_table(path, "modes")


def test_a_profile_document_gives_its_rows_not_its_measurement_details(tmp_path):
    details = [{"mode": "m", "requested": MODE, "read_back": MODE, "idle_window_s": [5.0, 8.0]},
               {"mode": "n", "requested": {**MODE, "mode": "n"}, "read_back": None}]
    doc = {"format": "jetpredict-profile/1", "device": "agx-xavier", "config": {"modes": "plan.csv"},
           "rows": [ROW, {**ROW, "mode": "n", "cpu_cores": 2}], "modes": details}
    df = _read(tmp_path, doc)
    assert list(df.columns) == ["mode", *MODE_FIELDS, "device"]
    assert df["mode"].tolist() == ["m", "n"] and df["cpu_cores"].tolist() == [8, 2]


def test_a_rows_object_gives_its_rows(tmp_path):
    df = _read(tmp_path, {"rows": [ROW]})
    assert df["mode"].tolist() == ["m"] and df["gpu_mhz"].tolist() == [1377]


def test_a_mode_list_object_still_gives_its_modes(tmp_path):
    assert _read(tmp_path, {"modes": [MODE]})["mode"].tolist() == ["m"]


@pytest.mark.parametrize("payload", [{"rows": 3, "modes": [MODE]}, {"rows": {"a": 1}}, {"other": [MODE]}])
def test_an_object_with_neither_list_is_refused(tmp_path, payload):
    with pytest.raises(InputError, match="must hold a JSON list of mode objects") as err:
        _read(tmp_path, payload)
    assert err.value.field == "modes"


@pytest.mark.parametrize("label", [{"a": [1, 2]}, [1], True])
def test_a_label_that_is_not_text_or_a_preset_id_is_refused(tmp_path, label):
    # It was written as its repr ("{'a': [1, 2]}") and profiled or predicted under that label.
    with pytest.raises(InputError, match="item 1: mode must be a text label or a preset id"):
        _read(tmp_path, [MODE, {**MODE, "mode": label}])


def test_a_preset_id_label_stays_its_text(tmp_path):
    assert _read(tmp_path, [{**MODE, "mode": 0}])["mode"].tolist() == ["0"]


@pytest.mark.parametrize("extra", [{}, {"format": "jetpredict-profile/1"}])
def test_rows_beside_a_list_of_mode_objects_is_refused(tmp_path, extra):
    # Which list is meant is a guess: the rows were taken and the modes the user listed silently dropped.
    with pytest.raises(InputError, match=r"--modes .* holds both \"rows\" and a \"modes\" list of mode objects"
                       ) as err:
        _read(tmp_path, {**extra, "rows": [ROW], "modes": [MODE, {**MODE, "mode": "n"}]})
    assert err.value.field == "modes"


def test_a_profile_document_is_told_by_its_measurement_details_not_its_other_keys(tmp_path):
    # The per-mode records the profiler writes hold "requested" (and no knobs of their own).
    details = [{"mode": "m", "requested": MODE, "read_back": None, "notes": []}]
    assert _read(tmp_path, {"rows": [ROW], "modes": details})["mode"].tolist() == ["m"]


def test_rows_beside_an_empty_modes_list_give_the_rows(tmp_path):
    assert _read(tmp_path, {"rows": [ROW], "modes": []})["mode"].tolist() == ["m"]
