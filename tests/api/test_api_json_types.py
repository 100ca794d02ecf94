"""JSON bodies carry numbers as JSON numbers: the OpenAPI document types them so, and the server holds to it.

A CSV cell is text (``"8"``); the CLI's readers parse it. A JSON request is typed: a number given as text
(``"cpu_cores": "8"``, ``"flops_train": "1e5"``) or as a boolean is a 422 that names the field and the
rule, in profile rows as in the other fields of a body. Clients that read CSV files (the page, the Python
client's :func:`jetpredict.client.read_rows_csv`) send numbers as numbers.
"""

from __future__ import annotations

import json

import pytest
from api_fixtures import published_rows


@pytest.mark.parametrize("field, value", [("cpu_cores", "8"), ("epoch_time_s", "518.6"), ("gpu_mhz", "9e2"),
                                          ("flops_train", "1e5"), ("batch_size", True), ("epoch_energy_j", "")])
def test_a_number_given_as_text_in_a_json_row_is_refused_naming_the_field(client, auth, field, value):
    rows = published_rows(as_id="typed")
    rows[3][field] = value
    r = client.post("/v1/profiles", json={"rows": rows}, headers=auth)
    assert r.status_code == 422, r.json
    assert list(r.json["errors"]) == [f"rows.3.{field}"]
    assert r.json["message"].startswith(f"rows.3.{field}: must be a number")
    assert client.get("/v1/workloads/typed").status_code == 404  # nothing stored
    inline = client.post("/v1/predictions", json={"workload": {"rows": rows}, "modes": "presets"})
    assert inline.status_code == 422 and list(inline.json["errors"]) == [f"workload.rows.3.{field}"]


@pytest.mark.parametrize("field, value", [("mode", 3), ("source", False), ("power_meter", 1.5)])
def test_text_columns_take_text(client, auth, field, value):
    rows = published_rows(as_id="typed-text")
    rows[1][field] = value
    r = client.post("/v1/profiles", json={"rows": rows}, headers=auth)
    assert r.status_code == 422 and r.json["errors"][f"rows.1.{field}"][0].startswith("must be text"), r.json


def test_a_whole_file_of_text_cells_names_a_bounded_number_of_them(client, auth):
    from jetpredict.api.schemas import MAX_CELL_TYPE_ERRORS

    rows = [{k: (str(v) if isinstance(v, int | float) else v) for k, v in r.items()}
            for r in published_rows(as_id="all-text", n=10)] * 50
    r = client.post("/v1/profiles", json={"rows": rows}, headers=auth)
    assert r.status_code == 422
    assert MAX_CELL_TYPE_ERRORS <= len(r.json["errors"]) < MAX_CELL_TYPE_ERRORS + 20


@pytest.mark.parametrize("body, field", [
    ({"modes": [{"mode": "m", "cpu_cores": 8, "cpu_mhz": "1200", "gpu_mhz": 670, "emc_mhz": 1333}]},
     "modes.0.cpu_mhz"),
    ({"confidence": "0.9"}, "confidence"),
    ({"confidence": True}, "confidence"),
])
def test_numbers_of_a_prediction_request_are_json_numbers(client, stored, body, field):
    r = client.post("/v1/predictions", json={"device": "agx-xavier", "workload": {"id": "my-resnet"}, **body})
    assert r.status_code == 422 and field in r.json["errors"], r.json
    assert "must be a number" in r.json["errors"][field][0]


@pytest.mark.parametrize("route, body, field", [
    ("/v1/predictions", {"modes": "presets", "epochs": "3"}, "epochs"),
    ("/v1/predictions", {"modes": "presets", "epochs": True}, "epochs"),
    ("/v1/predictions", {"modes": "presets", "epochs": 1.5}, "epochs"),
    ("/v1/predictions", {"modes": [{"mode": "m", "cpu_cores": "8", "cpu_mhz": 1200, "gpu_mhz": 670,
                                    "emc_mhz": 1333}]}, "modes.0.cpu_cores"),
    ("/v1/fleet-plans", {"deadline_s": 3600, "epochs": "2", "clients": [{"id": "a", "device": "nano"}]}, "epochs"),
])
def test_whole_numbers_of_a_request_are_json_integers_in_the_same_words(client, stored, route, body, field):
    r = client.post(route, json={"device": "agx-xavier", "workload": {"id": "my-resnet"}, **body})
    assert r.status_code == 422 and field in r.json["errors"], r.json
    assert r.json["errors"][field][0] == "must be a whole number (a JSON number, not text or a boolean)"


def test_a_whole_number_written_with_a_fraction_of_zero_is_taken(client, stored):
    mode = {"mode": "m", "cpu_cores": 8.0, "cpu_mhz": 1190.4, "gpu_mhz": 675.75, "emc_mhz": 1065.6}
    r = client.post("/v1/predictions", json={"workload": {"id": "my-resnet"}, "modes": [mode], "epochs": 3.0})
    assert r.status_code == 200, r.json
    assert r.json["predictions"][0]["cpu_cores"] == 8


def test_caps_and_deadlines_are_json_numbers(client, stored):
    r = client.post("/v1/recommendations", json={"workload": {"id": "my-resnet"}, "objective": "min-energy",
                                                 "constraints": {"max_power_w": "15"}})
    assert r.status_code == 422 and "constraints.max_power_w" in r.json["errors"], r.json
    r = client.post("/v1/fleet-plans", json={"workload": {"id": "my-resnet"}, "deadline_s": "3600",
                                             "clients": [{"id": "a", "device": "agx-xavier"}]})
    assert r.status_code == 422 and "deadline_s" in r.json["errors"], r.json


def test_rows_typed_as_a_csv_reader_types_them_upload(client, auth, tmp_path):
    """What the page and read_rows_csv send for a profile CSV: numbers as numbers (ints as ints), an empty
    cell as null, text as text; the numbers round-trip exactly into the stored rows."""
    from jetpredict.client import read_rows_csv

    rows = published_rows(as_id="from-csv")
    columns = list(rows[0])
    lines = [",".join(columns)] + [",".join("" if r[c] is None or c == "base_power_w" else
                                            f'"{r[c]}"' if isinstance(r[c], str) else repr(r[c])
                                            for c in columns) for r in rows]
    path = tmp_path / "rows.csv"
    path.write_text("\n".join(lines) + "\n")
    sent = read_rows_csv(path)
    assert type(sent[0]["cpu_cores"]) is int and type(sent[0]["cpu_mhz"]) is float
    assert sent[0]["base_power_w"] is None and sent[0]["mode"] == rows[0]["mode"]
    r = client.post("/v1/profiles", json={"rows": sent}, headers=auth)
    assert r.status_code == 201, r.json
    back = client.get("/v1/workloads/from-csv").json["rows"]
    assert [row["epoch_time_s"] for row in back] == [row["epoch_time_s"] for row in rows]


def test_the_client_reader_and_the_document_agree_on_the_text_columns(client):
    """read_rows_csv keeps as text exactly the columns the OpenAPI document types as strings."""
    from jetpredict.api.schemas import ROW_CELL_TYPES

    from jetpredict.client import ROW_TEXT_COLUMNS

    assert {name for name, kind in ROW_CELL_TYPES.items() if kind == "string"} == ROW_TEXT_COLUMNS
    props = client.get("/openapi.json").json["components"]["schemas"]["ProfileRow.agx-xavier"]["properties"]
    assert {name for name, p in props.items() if p["type"] == "string"} == ROW_TEXT_COLUMNS


def test_a_stored_row_uploads_again_as_it_is(client, auth):
    """GET /v1/workloads/{id} gives rows with the types uploads take: a text column whose text reads as a
    number stays text."""
    rows = [{**r, "accelerator": "3090", "power_samples": 12} for r in published_rows(as_id="round-trip")]
    assert client.post("/v1/profiles", json={"rows": rows}, headers=auth).status_code == 201
    back = client.get("/v1/workloads/round-trip").json["rows"]
    assert back[0]["accelerator"] == "3090" and back[0]["power_samples"] == 12
    again = client.post("/v1/profiles", json={"rows": [{**r, "workload": "copy"} for r in back]}, headers=auth)
    assert again.status_code == 201 and again.json["rows_stored"] == 4, again.json


@pytest.mark.parametrize("value, spelled", [(float("nan"), "NaN"), (float("inf"), "Infinity"),
                                            (float("-inf"), "-Infinity")])
@pytest.mark.parametrize("field", ["epoch_time_s", "flops_train"])
def test_a_non_finite_number_in_a_json_row_is_refused_naming_the_field(client, auth, value, spelled, field):
    # Python's JSON reader takes the literals NaN and Infinity (JSON has none; json.dumps writes them). The
    # client sent a value, so the answer says it is not finite, not that the cell is "required and empty".
    rows = published_rows(as_id="non-finite")
    rows[2][field] = value
    r = client.post("/v1/profiles", data=json.dumps({"rows": rows}), content_type="application/json", headers=auth)
    assert r.status_code == 422, r.json
    assert r.json["errors"] == {f"rows.2.{field}": [f"must be a finite number, got {spelled}"]}
    assert r.json["message"].startswith(f"rows.2.{field}: must be a finite number, got {spelled}")
    assert client.get("/v1/workloads/non-finite").status_code == 404  # nothing stored
    inline = json.dumps({"workload": {"rows": rows}, "modes": "presets"})
    r = client.post("/v1/predictions", data=inline, content_type="application/json")
    assert r.status_code == 422 and list(r.json["errors"]) == [f"workload.rows.2.{field}"], r.json
