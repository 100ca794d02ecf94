"""One workload id on several device types (a mixed federated fleet), and canonical rows.

Each device's own rows serve it; other devices get the prediction of the workload's best device moved
across; answers say which (``rows_device``, fleet plans ``own_rows``). Uploads identical up to number
formatting are one upload, and rows already stored are not stored again. Runs on SQLite and, with
``JETPREDICT_TEST_DATABASE_URL``, on PostgreSQL (the ``client`` fixture).
"""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pytest
from api_fixtures import API_KEY, json_row

from jetpredict import models

SIMULATED = Path(models.__file__).parent / "reference"
WORKLOAD = "fleet-resnet"


def device_rows(device: str, n: int = 4, start: int = 0, as_id: str = WORKLOAD) -> list[dict]:
    """``n`` digital-twin rows of ResNet-18 on ``device`` (every 7th mode from ``start``), as ``as_id``."""
    with (SIMULATED / f"{device}-simulated.csv").open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["workload"] == "resnet18-cifar10"]
    return [{**json_row(r), "workload": as_id} for r in rows[start:start + 7 * n:7]]


def upload(client, rows: list[dict], **headers):
    return client.post("/v1/profiles", json={"rows": rows}, headers={"X-API-Key": API_KEY, **headers})


def predict(client, device: str, workload: dict | None = None) -> dict:
    r = client.post("/v1/predictions", json={"workload": workload or {"id": WORKLOAD}, "device": device,
                                             "modes": "presets"})
    assert r.status_code == 200, r.json
    return r.json


def times(answer: dict) -> list[float]:
    return [p["epoch_time_s"] for p in answer["predictions"]]


@pytest.fixture
def fleet(client):
    """The workload with rows of the Orin Nano (first) and then of the Nano."""
    first = upload(client, device_rows("orin-nano"))
    assert first.status_code == 201, first.json
    second = upload(client, device_rows("nano"))
    assert second.status_code == 201, second.json
    return first.json, second.json


def test_one_workload_id_holds_rows_of_several_devices(client, fleet):
    first, second = fleet
    assert (first["device"], first["devices"]) == ("orin-nano", ["orin-nano"])
    assert (second["device"], second["devices"], second["rows_stored"], second["rows_total"],
            second["revision"]) == ("nano", ["nano", "orin-nano"], 4, 8, 2)
    detail = client.get(f"/v1/workloads/{WORKLOAD}").json
    assert detail["device"] == "orin-nano" and detail["devices"] == ["nano", "orin-nano"]
    assert {f["device"]: (f["rows"], f["profiled_modes"]) for f in detail["fits"]} == {
        "nano": (4, 4), "orin-nano": (4, 4)}
    assert sorted({row["device"] for row in detail["rows"]}) == ["nano", "orin-nano"] and len(detail["rows"]) == 8
    listed = client.get("/v1/workloads").json["workloads"]
    assert [(w["id"], w["devices"]) for w in listed] == [(WORKLOAD, ["nano", "orin-nano"])]


def test_each_device_is_served_by_its_own_rows_and_others_by_transfer(client):
    assert upload(client, device_rows("orin-nano")).status_code == 201
    orin_before = predict(client, "orin-nano")
    assert upload(client, device_rows("nano")).status_code == 201
    for device in ("nano", "orin-nano"):
        answer = predict(client, device)
        assert answer["rows_device"] == device and answer["workload_devices"] == ["nano", "orin-nano"]
        assert not any(p["cross_device"] for p in answer["predictions"])
        # The same as a workload holding only this device's rows: the other device's rows change nothing.
        alone = predict(client, device, {"rows": device_rows(device)})
        assert times(answer) == pytest.approx(times(alone), rel=1e-9)
    assert times(predict(client, "orin-nano")) == pytest.approx(times(orin_before), rel=1e-9)
    moved = predict(client, "orin-agx")
    assert moved["rows_device"] in ("nano", "orin-nano") and all(p["cross_device"] for p in moved["predictions"])
    default = client.post("/v1/predictions", json={"workload": {"id": WORKLOAD}, "modes": "presets"}).json
    assert default["device"] == default["rows_device"] == "orin-nano"  # the device of the first rows
    r = client.post("/v1/predictions", json={"workload": {"id": WORKLOAD}, "device": "orin-agx", "modes": "presets"},
                    headers={"Accept": "text/csv"})
    table = list(csv.DictReader(r.get_data(as_text=True).splitlines()))
    assert r.status_code == 200 and len(table) == len(moved["predictions"])
    assert {(row["rows_device"], row["workload_devices"]) for row in table} == {
        (moved["rows_device"], "nano;orin-nano")}


def test_recommendations_and_fleet_plans_say_whose_rows_serve(client, fleet):
    r = client.post("/v1/recommendations", json={"workload": {"id": WORKLOAD}, "device": "nano",
                                                 "objective": "min-time", "constraints": {"max_power_w": 8}})
    assert r.status_code == 200, r.json
    assert r.json["rows_device"] == "nano" and r.json["workload_devices"] == ["nano", "orin-nano"]
    assert r.json["best"]["cross_device"] is False
    clients = [{"id": "a", "device": "nano"}, {"id": "b", "device": "orin-agx"}, {"id": "c", "device": "orin-nano"}]
    r = client.post("/v1/fleet-plans", json={"workload": {"id": WORKLOAD}, "deadline_s": 20000, "clients": clients})
    assert r.status_code == 200, r.json
    plans = {c["id"]: c for c in r.json["clients"]}
    assert (plans["a"]["rows_device"], plans["a"]["own_rows"], plans["a"]["cross_device"]) == ("nano", True, False)
    assert (plans["c"]["rows_device"], plans["c"]["own_rows"]) == ("orin-nano", True)
    assert plans["b"]["own_rows"] is False and plans["b"]["cross_device"] is True
    assert plans["b"]["rows_device"] in ("nano", "orin-nano")
    assert r.json["workload_devices"] == ["nano", "orin-nano"]


def test_stored_rows_clash_only_with_rows_of_their_own_device(client, fleet):
    orin_label = device_rows("orin-nano", n=1)[0]["mode"]  # stored with the Orin Nano's knobs
    new_nano = {**device_rows("nano", n=1, start=1)[0], "mode": orin_label}
    r = upload(client, [new_nano])  # one label, each device's own knobs: no clash across devices
    assert r.status_code == 201 and r.json["rows_stored"] == 1, r.json
    stored_nano = device_rows("nano", n=1)[0]
    r = upload(client, [{**stored_nano, "cpu_cores": 2}])  # the nano's stored label with other knobs
    assert r.status_code == 409 and "rows.0.mode" in r.json["errors"], r.json
    assert "on 'nano'" in r.json["errors"]["rows.0.mode"][0]
    assert client.get(f"/v1/workloads/{WORKLOAD}").json["rows_stored"] == 9


def test_an_upload_across_workloads_stays_atomic_with_several_devices(client, fleet):
    bad = {**device_rows("nano", n=1, start=1, as_id="other")[0], "epoch_time_s": "-1"}
    r = upload(client, [device_rows("nano", n=1, start=2)[0], bad])
    assert r.status_code == 422 and "rows.1.epoch_time_s" in r.json["errors"], r.json
    assert client.get(f"/v1/workloads/{WORKLOAD}").json["rows_stored"] == 8
    assert client.get("/v1/workloads/other").status_code == 404


# -- canonical rows ---------------------------------------------------------------------------------------
def reformatted(rows: list[dict]) -> list[dict]:
    """The same rows written otherwise: whole numbers as floats (4.0 for 4), blanks around text."""
    out = []
    for row in rows:
        new = {}
        for key, value in row.items():
            if key in ("cpu_cores", "batch_size", "minibatches_per_epoch", "cpu_mhz"):
                new[key] = float(value)  # 4.0 for 4
            elif key == "source":
                new[key] = f"  {value}\t"
            else:
                new[key] = value
        out.append(new)
    return out


def test_an_upload_identical_up_to_number_formatting_is_the_same_upload(client):
    rows = device_rows("nano")
    first = upload(client, rows)
    before = times(predict(client, "nano"))
    again = upload(client, reformatted(rows))
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert again.json == first.json
    assert client.get(f"/v1/workloads/{WORKLOAD}").json["rows_stored"] == 4
    assert times(predict(client, "nano")) == pytest.approx(before, rel=1e-12)
    # Under an Idempotency-Key: the reformatted body is the same request, not another one (no 409).
    keyed = upload(client, device_rows("nano", start=1), **{"Idempotency-Key": "k-1"})
    assert keyed.status_code == 201
    retry = upload(client, reformatted(device_rows("nano", start=1)), **{"Idempotency-Key": "k-1"})
    assert retry.status_code == 201 and retry.headers["Idempotent-Replayed"] == "true", retry.json
    assert retry.json == keyed.json


def test_rows_already_stored_are_not_stored_again(client):
    rows = device_rows("nano", n=3)
    assert upload(client, rows).status_code == 201
    before = times(predict(client, "nano"))
    # Two stored rows (reformatted) and one new: only the new one is stored.
    r = upload(client, reformatted(rows[:2]) + device_rows("nano", n=1, start=3))
    assert r.status_code == 201 and (r.json["rows_stored"], r.json["rows_total"], r.json["revision"]) == (1, 4, 2)
    # Nothing new at all: 201, nothing stored, the revision and the prediction as they were.
    r = upload(client, list(reversed(reformatted(rows))))
    assert r.status_code == 201 and (r.json["rows_stored"], r.json["rows_total"], r.json["revision"]) == (0, 4, 2)
    assert r.json["profiled_modes"] == 4
    assert times(predict(client, "nano")) != pytest.approx(before, rel=1e-12)  # the fourth row moved it
    stored = client.get(f"/v1/workloads/{WORKLOAD}").json["rows"]
    assert len(stored) == 4 and all(row["source"] == "simulated" for row in stored)


def test_canonical_cells():
    from jetpredict.api.client_rows import canonical_row, canonical_value, row_key

    assert canonical_value("4.60") == canonical_value(" 4.6 ") == canonical_value(4.6) == 4.6
    assert canonical_value("4") == canonical_value(4) == 4.0 and canonical_value("1e3") == 1000.0
    assert canonical_value(" sim:nano ") == "sim:nano" and canonical_value("  ") is None
    assert canonical_value("nan") == "nan"  # text that is not a number stays text
    assert canonical_value(True) is True and canonical_value(float("nan")) is None
    assert canonical_row({"a": "4.60", "b": None, " c ": " x "}) == {"a": 4.6, "c": "x"}
    assert row_key({"a": 1, "b": "2.50"}) == row_key({"b": 2.5, "a": "1.0", "c": ""})
    assert row_key({"a": 1}) != row_key({"a": 1.0001})


# -- existing databases -----------------------------------------------------------------------------------
def test_a_workload_stored_by_an_earlier_version_keeps_working(app, client):
    """Rows, fit summary and idempotency key as versions before mixed fleets wrote them: predictions work, a
    byte-identical retry is answered afresh (the kept answer lacks today's fields), then replayed, and another
    device's rows are added to it."""
    from jetpredict.api.storage import IdempotencyKey, WorkloadWrite, workloads
    from jetpredict.models.profile_files import rows_to_records
    from jetpredict.models.profile_rows import validate_records

    storage = app.extensions["jetpredict"].storage
    rows = device_rows("orin-nano")
    raw = hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()
    legacy_fit = {"device": "orin-nano", "model_version": "old", "reference_source": "simulated",
                  "profiled_modes": 4, "has_power": True}
    stored = rows_to_records(validate_records(rows))
    storage.add_uploads([WorkloadWrite(WORKLOAD, "orin-nano", stored, 0, legacy_fit)],
                        IdempotencyKey(f"sha256:{raw}", raw))
    with storage.engine.begin() as conn:
        conn.execute(workloads.update().where(workloads.c.id == WORKLOAD).values(fit=legacy_fit))
    assert predict(client, "orin-nano")["rows_device"] == "orin-nano"
    retry = upload(client, rows)
    assert retry.status_code == 201 and retry.headers["Idempotent-Replayed"] == "false", retry.json
    assert retry.json["rows_stored"] == 0 and retry.json["split_source"] is not None, retry.json
    assert upload(client, rows).headers["Idempotent-Replayed"] == "true"
    r = upload(client, device_rows("nano"))
    assert r.status_code == 201 and r.json["devices"] == ["nano", "orin-nano"], r.json
    detail = client.get(f"/v1/workloads/{WORKLOAD}").json
    # The first device's summary, refitted by the running model (the stored one was another version's).
    assert detail["device"] == "orin-nano" and detail["model_version"] == predict(client, "orin-nano")["model_version"]
    assert {f["device"]: f["rows"] for f in detail["fits"]} == {"nano": 4, "orin-nano": 4}


def test_another_process_sees_the_new_device(make_app, client):
    assert upload(client, device_rows("orin-nano")).status_code == 201
    assert predict(client, "nano")["rows_device"] == "orin-nano"  # transferred: no nano rows yet
    other = make_app().test_client()
    assert upload(other, device_rows("nano")).status_code == 201
    assert predict(client, "nano")["rows_device"] == "nano"
