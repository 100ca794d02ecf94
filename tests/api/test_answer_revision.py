"""Prediction and recommendation answers state the stored workload's ``revision`` they were fitted from (null
for inline rows), so that a client holding answers of two fits (the page, after an upload refitted the
workload) can tell them apart."""

from __future__ import annotations

import csv as csv_module
import io
import json

import sqlalchemy as sa
from api_fixtures import published_rows
from test_api_mixed_fleet import WORKLOAD, device_rows, predict, upload


def _answers(client, workload: dict) -> dict[str, dict]:
    base = {"device": "agx-xavier", "workload": workload}
    out = {}
    for name, path, body in (
            ("all", "/v1/predictions", {**base, "modes": "all", "layout": "columns"}),
            ("presets", "/v1/predictions", {**base, "modes": "presets"}),
            ("rec", "/v1/recommendations", {**base, "objective": "min-energy"})):
        r = client.post(path, json=body)
        assert r.status_code == 200, r.get_json()
        out[name] = r.get_json()
    return out


def test_answers_carry_the_stored_workloads_revision_and_null_for_inline_rows(client, stored, auth):
    workload = {"id": stored["workload_id"]}
    first = _answers(client, workload)
    assert {name: a["revision"] for name, a in first.items()} == dict.fromkeys(first, stored["revision"])
    more = client.post("/v1/profiles", json={"rows": published_rows(n=8)[4:]}, headers=auth)
    assert more.status_code == 201, more.get_json()
    assert more.get_json()["revision"] > stored["revision"]
    after = _answers(client, workload)  # refitted: no answer of the first fit is served as this one's
    assert {name: a["revision"] for name, a in after.items()} == dict.fromkeys(after, more.get_json()["revision"])
    inline = _answers(client, {"rows": published_rows()})
    assert {name: a["revision"] for name, a in inline.items()} == dict.fromkeys(inline)
    # the CSV form states it as every other top-level field
    csv = client.post("/v1/predictions", json={"device": "agx-xavier", "workload": workload, "modes": "presets"},
                      headers={"Accept": "text/csv"}).get_data(as_text=True)
    header, row = io.StringIO(csv).read().splitlines()[:2]
    assert row.split(",")[header.split(",").index("revision")] == str(more.get_json()["revision"])
    # an inline workload's id and revision are unknown: empty cells, as every unknown cell (they read "None")
    inline_csv = client.post("/v1/predictions", json={"device": "agx-xavier", "workload": {"rows": published_rows()},
                                                      "modes": "presets"}, headers={"Accept": "text/csv"})
    first = next(csv_module.DictReader(io.StringIO(inline_csv.get_data(as_text=True))))
    assert first["revision"] == "" and first["workload_id"] == "", first


def test_the_revision_field_is_documented_on_both_answers(client):
    schemas = client.get("/openapi.json").get_json()["components"]["schemas"]
    for name in ("PredictionResponse", "Recommendation"):
        field = schemas[name]["properties"]["revision"]
        assert "null" in json.dumps(field) and "inline" in field["description"], field


def test_a_device_added_here_after_another_process_refitted_serves_the_newer_fit(make_app, client):
    """An upload of a new device caches the workload's other devices' models only when they are those of the
    revision it was made against: here another process added rows of the first device in between, and its
    older model (cached at revision 1) must not be served as revision 3's."""
    assert upload(client, device_rows("orin-nano")).status_code == 201
    assert predict(client, "orin-nano")["revision"] == 1  # cached here: revision 1's orin-nano model
    assert upload(make_app().test_client(), device_rows("orin-nano", start=3)).status_code == 201
    assert upload(client, device_rows("nano")).status_code == 201
    here, fresh = predict(client, "orin-nano"), predict(make_app().test_client(), "orin-nano")
    assert here["revision"] == fresh["revision"] == 3
    assert here == fresh  # the model of all 8 orin-nano rows, as a process that fits them afresh serves


def test_an_answer_cached_before_another_device_was_added_is_not_served_as_the_new_revisions(client):
    """Rows of a new device leave the first device's model as it was (the same object serves both
    revisions), so its cached answers are keyed by revision too: the answer after the upload states the new one."""
    def answer(modes: str) -> dict:
        r = client.post("/v1/predictions", json={"workload": {"id": WORKLOAD}, "device": "orin-nano",
                                                 "modes": modes, "layout": "columns"})
        assert r.status_code == 200, r.json
        return r.json

    assert upload(client, device_rows("orin-nano")).status_code == 201
    assert answer("presets")["revision"] == answer("all")["revision"] == 1
    assert upload(client, device_rows("nano")).status_code == 201
    assert answer("presets")["revision"] == answer("all")["revision"] == 2


def test_rows_committed_while_a_fit_reads_them_are_not_fitted_under_the_older_revision(make_app, client):
    """A fit on lookup reads the workload's revision and its rows in one snapshot: an upload committed between
    the two reads (PostgreSQL's READ COMMITTED would show its rows) is not fitted under the older revision."""
    assert upload(client, device_rows("orin-nano")).status_code == 201
    reader, writer = make_app(), make_app().test_client()  # two more processes: the reader fits on lookup
    committed: list[int] = []

    @sa.event.listens_for(reader.extensions["jetpredict"].storage.engine, "before_cursor_execute")
    def upload_between_the_reads(conn, cursor, statement, *args) -> None:
        if "FROM profile_rows" in statement and not committed:
            committed.append(upload(writer, device_rows("orin-nano", start=3)).status_code)

    answer = predict(reader.test_client(), "orin-nano")
    assert committed == [201]
    assert (answer["revision"], answer["profiled_modes"]) == (1, 4)  # revision 1's four rows, not revision 2's eight
