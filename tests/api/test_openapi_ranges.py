"""The OpenAPI document states each device's own knob ranges (one device per ``rows`` array; ``oneOf`` +
``discriminator`` on ``device`` for predictions) and the rules JSON Schema cannot state
(``x-jetpredict-rules``), so that a request the document accepts is not refused, and a request the server
refuses is refused by the document too."""

from __future__ import annotations

import copy

import pytest
from api_fixtures import published_rows
from documented_rules import follow_rules, request_body_schema
from jetpredict.api.openapi_doc import RULE_KINDS, RULES
from jetpredict.api.schemas import EXAMPLE_ROWS
from jetpredict.api.upload_groups import MAX_UPLOAD_WORKLOADS
from jetpredict.models.catalogue import MIN_MODULE_POWER_W, MODE_FIELDS, list_devices
from jetpredict.models.profile_rows import FIELD_BY_NAME
from jetpredict.predictor.terms import MIN_EPOCH_TIME_S
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
    for name in ("ProfileUpload", "WorkloadRef"):  # a oneOf of arrays: all rows of one device
        variants = [v["items"]["$ref"] for v in schemas[name]["properties"]["rows"]["oneOf"]]
        assert variants == [f"#/components/schemas/ProfileRow.{d.id}" for d in list_devices()]
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


def test_a_cap_below_any_module_is_refused_by_the_document_and_the_server(doc, client, stored):
    # No mode can meet a cap under the 0.1 W any powered module draws: a unit slip, not an infeasible query.
    request = {"workload": {"id": "my-resnet"}, "objective": "min-time", "constraints": {"max_power_w": 0.05}}
    assert not _valid(doc, "RecommendationRequest", request)
    r = client.post("/v1/recommendations", json=request)
    assert r.status_code == 422 and list(r.json["errors"]) == ["constraints.max_power_w"], r.json
    request["constraints"]["max_power_w"] = MIN_MODULE_POWER_W
    assert _valid(doc, "RecommendationRequest", request)
    assert client.post("/v1/recommendations", json=request).status_code == 200


def _typed() -> list[dict]:
    """The published rows as a JSON client sends them: numbers as numbers."""
    return [{k: v if v is None or FIELD_BY_NAME[k].kind is str else FIELD_BY_NAME[k].kind(float(v))
             for k, v in row.items()} for row in published_rows()]


def test_a_rows_array_holds_one_device_in_the_document_and_the_server(doc, client, auth):
    rows = [_row("agx-xavier", mode="a", workload="w"), _row("xavier-nx", mode="b", workload="w")]
    assert _valid(doc, "ProfileRow.agx-xavier", rows[0]) and _valid(doc, "ProfileRow.xavier-nx", rows[1])
    assert not _valid(doc, "ProfileUpload", {"rows": rows})
    r = client.post("/v1/profiles", json={"rows": rows}, headers=auth)
    assert r.status_code == 422 and any(k.endswith("device") for k in r.json["errors"]), r.json


@pytest.mark.parametrize("schema, field, value", [
    ("ProfileRow.agx-xavier", "mode", " \t"), ("ProfileRow.agx-xavier", "workload", " "),
    ("ProfileRow.agx-xavier", "source", "my lab"), ("FleetClient", "id", "  "),
])
def test_blank_or_unknown_text_is_refused_by_the_document_and_the_server(doc, client, auth, stored, schema,
                                                                         field, value):
    if schema == "FleetClient":
        assert not _valid(doc, schema, {"id": value, "device": "nano"})
        body = {"workload": {"id": "my-resnet"}, "deadline_s": 3600, "clients": [{"id": value, "device": "nano"}]}
        r = client.post("/v1/fleet-plans", json=body)
        assert r.status_code == 422 and "clients.0.id" in r.json["errors"], r.json
        return
    row = {**_typed()[0], field: value}
    assert _valid(doc, schema, _typed()[0]) and not _valid(doc, schema, row)
    r = client.post("/v1/profiles", json={"rows": [row]}, headers=auth)
    assert r.status_code == 422 and f"rows.0.{field}" in r.json["errors"], r.json


def _rows(*changes: dict) -> list[dict]:
    return [{**row, **change} for row, change in zip(_typed(), changes, strict=False)]


#: (route, body breaking one documented rule, the error key the server answers with)
BROKEN = {
    "at-most": ("/v1/profiles", {"rows": _rows({"stall_time_s": 2000.0})}, "rows.0.stall_time_s"),
    # an energy 1.5x its power x time (models.profile_rows.ROW_PRODUCT)
    "product": ("/v1/profiles", {"rows": _rows({"epoch_energy_j": 1.5 * _typed()[0]["avg_power_w"]
                                                * _typed()[0]["epoch_time_s"]})}, "rows.0.epoch_energy_j"),
    "same-values": ("/v1/profiles", {"rows": _rows({}, {"mode": _typed()[0]["mode"]})}, "rows.1.mode"),
    "max-ratio": ("/v1/profiles", {"rows": _rows({}, {**{k: _typed()[0][k] for k in MODE_FIELDS},
                                                       "mode": "custom", "epoch_time_s": 2000.0,
                                                       "epoch_energy_j": None})},
                  "rows.1.epoch_time_s"),
    "max-distinct": ("/v1/profiles", {"rows": [{**_typed()[i % 4], "workload": f"w{i}"}
                                               for i in range(MAX_UPLOAD_WORKLOADS + 1)]},
                     f"rows.{MAX_UPLOAD_WORKLOADS}.workload"),
    # an epoch time in milliseconds: 213 s per minibatch (models.profile_rows.plausibility_rules)
    "ratio-range": ("/v1/profiles", {"rows": _rows({"epoch_time_s": 1000 * _typed()[0]["epoch_time_s"]})},
                    "rows.0.epoch_time_s"),
    # a cap in milliwatts: above all an AGX Xavier can draw (models.catalogue.Device.check_power_cap)
    "device-max": ("/v1/recommendations", {"workload": {"rows": _typed()}, "objective": "min-time",
                                           "constraints": {"max_power_w": 7000.0}}, "constraints.max_power_w"),
    "unique": ("/v1/fleet-plans", {"workload": {"rows": _typed()}, "deadline_s": 3600,
                                    "clients": [{"id": "c", "device": "nano"}, {"id": "c", "device": "orin-nx"}]},
               "clients.1.id"),
}


def _rule_kinds(doc: dict) -> set[str]:
    found: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            found.update(r["rule"] for r in node.get(RULES, ()))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("kind", RULE_KINDS)
def test_each_documented_rule_is_enforced_and_following_it_is_accepted(doc, client, auth, kind):
    """The server refuses a body that breaks the rule although JSON Schema allows it; the same body made to
    follow the document's rules (as the fuzz hook does) is accepted."""
    assert _rule_kinds(doc) == set(RULE_KINDS)
    route, body, error_key = BROKEN[kind]
    schema = request_body_schema(doc, route, "post")
    assert _valid(doc, schema["$ref"].rsplit("/", 1)[1], body)  # JSON Schema cannot see the rule
    r = client.post(route, json=body, headers=auth)
    assert r.status_code == 422 and error_key in r.json["errors"], r.json
    fixed = follow_rules(doc, schema, copy.deepcopy(body))
    assert fixed != body
    r = client.post(route, json=fixed, headers=auth)
    assert r.status_code in (200, 201), r.json


def test_inline_rows_are_one_workload_whatever_their_labels(doc, client):
    rows = [{**row, "workload": f"run-{i}"} for i, row in enumerate(_typed())]
    r = client.post("/v1/predictions", json={"workload": {"rows": rows}, "modes": "presets"})
    assert r.status_code == 200 and r.json["profiled_modes"] == len(rows), r.json
    # Being one workload, their labels are checked across all of them: one label, one set of knobs.
    clash = [rows[0], {**rows[1], "mode": rows[0]["mode"]}]
    body = {"workload": {"rows": clash}, "modes": "presets"}
    r = client.post("/v1/predictions", json=body)
    assert r.status_code == 422 and "workload.rows.1.mode" in r.json["errors"], r.json
    fixed = follow_rules(doc, request_body_schema(doc, "/v1/predictions", "post"), copy.deepcopy(body))
    assert len(fixed["workload"]["rows"]) == 1
    assert client.post("/v1/predictions", json=fixed).status_code == 200


def test_every_rows_scatter_field_states_the_level_the_service_warns_above(doc):
    """Tools (the page) read the warning level as a number, the one ``jetpredict fit`` warns above."""
    from jetpredict.predictor.constants import LACK_OF_FIT_REL

    levels = {name: schema["properties"]["rows_scatter_rel"].get("x-jetpredict-warn-above")
              for name, schema in doc["components"]["schemas"].items()
              if "rows_scatter_rel" in schema.get("properties", {})}
    assert len(levels) >= 5 and set(levels.values()) == {LACK_OF_FIT_REL}
