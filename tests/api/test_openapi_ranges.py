"""The OpenAPI document states each device's own knob ranges (``oneOf`` + ``discriminator`` on ``device``),
so that a request the document accepts is not refused for a knob outside its device's range, and a
request the server refuses for that reason is refused by the document too."""

from __future__ import annotations

import pytest
from jetpredict.api.schemas import EXAMPLE_ROWS
from jetpredict.models.catalogue import MODE_FIELDS, list_devices
from jetpredict.predictor.model import MIN_EPOCH_TIME_S
from openapi_schema_validator import OAS30Validator
from openapi_spec_validator import validate as validate_spec


@pytest.fixture
def doc(client) -> dict:
    return client.get("/openapi.json").json


def _valid(doc: dict, name: str, instance: object) -> bool:
    # The components travel with the $ref so that "#/components/schemas/..." resolves inside the document.
    validator = OAS30Validator({"components": doc["components"], "$ref": f"#/components/schemas/{name}"})
    return validator.is_valid(instance)


def _row(device_id: str, **knobs: float) -> dict:
    """A typed profile row of ``device_id`` at its top knobs (cores; MHz), with ``knobs`` overriding."""
    top = {k: hi for k, (_, hi) in next(d for d in list_devices() if d.id == device_id).knob_ranges().items()}
    top["cpu_cores"] = int(top["cpu_cores"])
    return {**EXAMPLE_ROWS[0], "device": device_id, "workload": f"w-{device_id}", **top, **knobs}


def test_each_device_variant_carries_that_devices_catalogue_range(doc):
    validate_spec(doc)
    schemas = doc["components"]["schemas"]
    items = schemas["ProfileUpload"]["properties"]["rows"]["items"]
    assert items["discriminator"]["propertyName"] == "device"
    assert set(items["discriminator"]["mapping"]) == {d.id for d in list_devices()}
    for device in list_devices():
        row = schemas[f"ProfileRow.{device.id}"]
        mode = schemas[f"PredictionRequest.{device.id}"]["properties"]["modes"]["oneOf"][1]["items"]
        assert row["properties"]["device"]["enum"] == [device.id]
        assert row["properties"]["epoch_time_s"]["minimum"] == MIN_EPOCH_TIME_S  # what the fit accepts
        assert "device" in schemas[f"PredictionRequest.{device.id}"]["required"]
        for knob, (lo, hi) in device.knob_ranges().items():
            for schema in (row, mode):
                assert (schema["properties"][knob]["minimum"], schema["properties"][knob]["maximum"]) == (lo, hi)


def test_a_row_outside_its_devices_range_is_refused_by_the_document_and_the_server(doc, client, auth):
    device = min(list_devices(), key=lambda d: d.knob_ranges()["cpu_cores"][1])  # fewest cores
    cores = int(device.knob_ranges()["cpu_cores"][1])
    good, bad = _row(device.id), _row(device.id, cpu_cores=cores + 1)
    assert _valid(doc, "ProfileUpload", {"rows": [good]})
    assert _valid(doc, "ProfileRow.orin-agx", {**bad, "device": "orin-agx"})  # the bad cores fit a bigger device
    assert not _valid(doc, "ProfileUpload", {"rows": [bad]})
    r = client.post("/v1/profiles", json={"rows": [bad]}, headers=auth)
    assert r.status_code == 422 and "rows.0.cpu_cores" in r.json["errors"], r.json
    r = client.post("/v1/profiles", json={"rows": [good]}, headers=auth)
    assert not any(k.startswith("rows.0.") and k.endswith(MODE_FIELDS) for k in (r.json.get("errors") or {}))


def test_mode_objects_are_checked_against_the_requests_device_in_the_document(doc, client, stored):
    device = next(d for d in list_devices() if d.id == "agx-xavier")
    low = {k: lo for k, (lo, _) in device.knob_ranges().items()}
    low["cpu_cores"] = int(low["cpu_cores"])
    inside = {"device": device.id, "workload": {"id": "my-resnet"}, "modes": [low]}
    below = {**inside, "modes": [{**low, "cpu_mhz": low["cpu_mhz"] - 10}]}  # inside another device's range
    assert _valid(doc, "PredictionRequest", inside)
    assert client.post("/v1/predictions", json=inside).status_code == 200
    assert not _valid(doc, "PredictionRequest", below)
    r = client.post("/v1/predictions", json=below)
    assert r.status_code == 422, r.json
    # Without device the workload's device decides, which the document cannot name: there it allows
    # "presets" and "all" only (stricter than the server, which checks the modes against that device).
    assert _valid(doc, "PredictionRequest", {"workload": {"id": "my-resnet"}, "modes": "presets"})
    assert not _valid(doc, "PredictionRequest", {"workload": {"id": "my-resnet"}, "modes": [low]})
