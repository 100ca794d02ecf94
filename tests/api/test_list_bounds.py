"""Request lists with a count bound are refused by their length before any item is checked, and a 422 names
at most MAX_LISTED_ITEM_ERRORS items' problems, saying how many more (audit 2026-12-06: 6.6M `{}` clients
took a worker to 8.4 GB; 200k answered a 23 MB 422). Checked on what the error lists, not on time."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jetpredict.api.query_schemas  # noqa: F401 (its RequestSchema subclasses, found through the base)
import pytest
from api_fixtures import published_rows
from jetpredict.api.list_fields import MAX_LISTED_ITEM_ERRORS, BoundedList
from jetpredict.api.schemas import MAX_REQUEST_ROWS, RequestSchema
from jetpredict.predictor.limits import MAX_CLIENTS, MAX_MODES
from marshmallow import Schema, ValidationError, fields, validate

FLEET = {"workload": {"id": "my-resnet"}, "deadline_s": 3600}


class BoundedRequestList(NamedTuple):
    """One bounded request list, as a client sends it."""

    path: str
    body: Callable[[list], dict]  # the request body holding ``items`` as that list
    field: str
    noun: str
    bound: int
    bad_item: object  # an item that fails its own checks


#: Each bounded request list. The rows' bad item has a cell of the wrong type.
BOUNDED_LISTS = {
    "clients": BoundedRequestList("/v1/fleet-plans", lambda items: {**FLEET, "clients": items}, "clients", "clients",
                                  MAX_CLIENTS, {}),
    "modes": BoundedRequestList("/v1/predictions", lambda items: {"workload": {"id": "x"}, "modes": items}, "modes",
                                "modes", MAX_MODES, 0),
    "prediction rows": BoundedRequestList("/v1/predictions", lambda items: {"workload": {"rows": items}},
                                          "workload.rows", "rows", MAX_REQUEST_ROWS, {"cpu_mhz": "fast"}),
    "upload rows": BoundedRequestList("/v1/profiles", lambda items: {"rows": items}, "rows", "rows", MAX_REQUEST_ROWS,
                                      {"cpu_mhz": "fast"}),
}


@pytest.mark.parametrize("kind", BOUNDED_LISTS)
def test_a_list_one_over_its_bound_is_refused_by_its_count_alone(client, auth, kind):
    listed = BOUNDED_LISTS[kind]
    r = client.post(listed.path, json=listed.body([listed.bad_item] * (listed.bound + 1)), headers=auth)
    assert r.status_code == 422
    rule = f"must hold 1..{listed.bound} {listed.noun}, got {listed.bound + 1}"
    assert r.json["errors"] == {listed.field: [rule]}  # no FIELD.I...: the items were not looked at
    assert r.json["message"] == f"{listed.field}: {rule}"


@pytest.mark.parametrize("kind", BOUNDED_LISTS)
def test_an_empty_list_is_refused_by_its_count(client, auth, kind):
    listed = BOUNDED_LISTS[kind]
    r = client.post(listed.path, json=listed.body([]), headers=auth)
    assert r.status_code == 422
    assert r.json["errors"] == {listed.field: [f"must hold 1..{listed.bound} {listed.noun}, got 0"]}


@pytest.mark.parametrize("kind, count", [("clients", MAX_CLIENTS), ("modes", MAX_LISTED_ITEM_ERRORS + 7)])
def test_a_long_list_of_bad_items_names_the_first_ones_and_counts_the_rest(client, kind, count):
    listed = BOUNDED_LISTS[kind]
    r = client.post(listed.path, json=listed.body([listed.bad_item] * count))
    assert r.status_code == 422
    errors = r.json["errors"]
    assert {key.split(".")[1] for key in errors if key.startswith(f"{listed.field}.")} == {
        str(i) for i in range(MAX_LISTED_ITEM_ERRORS)}
    assert errors[listed.field] == [f"{count - MAX_LISTED_ITEM_ERRORS} more {listed.noun} have problems, not listed "
                                    f"(the first {MAX_LISTED_ITEM_ERRORS} with problems are)"]


def test_a_few_bad_clients_are_all_named(client):
    clients = [{"id": "a", "device": "agx-xavier"}, {}, {"id": "c", "device": "nope"}]
    r = client.post("/v1/fleet-plans", json={**FLEET, "clients": clients})
    assert r.status_code == 422
    assert set(r.json["errors"]) == {"clients.1.id", "clients.1.device", "clients.2.device"}
    assert r.json["errors"]["clients.1.id"] == ["Missing data for required field."]


def test_rows_within_the_limit_still_have_their_cells_checked(client, auth):
    rows = [{**row, "cpu_mhz": "fast"} for row in published_rows()[:3]]
    r = client.post("/v1/profiles", json={"rows": rows}, headers=auth)
    assert r.status_code == 422 and "rows.0.cpu_mhz" in r.json["errors"], r.json


def test_the_document_still_states_the_counts(client):
    doc = client.get("/openapi.json").json["components"]["schemas"]
    clients = doc["FleetPlanRequest"]["properties"]["clients"]
    assert (clients["minItems"], clients["maxItems"]) == (1, MAX_CLIENTS)
    for rows in (doc["ProfileUpload"]["properties"]["rows"], doc["WorkloadRef"]["properties"]["rows"]):
        assert {(one["minItems"], one["maxItems"]) for one in rows["oneOf"]} == {(1, MAX_REQUEST_ROWS)}


def _lists_with_a_length(field: fields.Field, where: str):
    if isinstance(field, fields.List):
        if any(isinstance(v, validate.Length) for v in field.validators):
            yield where, field
        yield from _lists_with_a_length(field.inner, f"{where}[]")
    elif isinstance(field, fields.Nested) and isinstance(field.nested, type):
        for name, inner in field.nested._declared_fields.items():
            yield from _lists_with_a_length(inner, f"{where}.{name}")


def _request_schemas(schema: type[Schema]):
    for sub in schema.__subclasses__():
        yield sub
        yield from _request_schemas(sub)


def test_every_request_list_with_a_length_is_a_bounded_list():
    # Every request body derives from RequestSchema (answers are dumped, never loaded: not checked).
    found = [(f"{s.__name__}.{where}", f) for s in set(_request_schemas(RequestSchema))
             for name, field in s._declared_fields.items() for where, f in _lists_with_a_length(field, name)]
    assert {w for w, _ in found} >= {"FleetPlanRequestSchema.clients", "ProfileUploadSchema.rows",
                                     "PredictionRequestSchema.workload.rows"}
    assert [w for w, f in found if not isinstance(f, BoundedList)] == []


def test_a_bounded_list_takes_no_length_check_of_its_items_for_its_own():
    # The bounds come from the field's own Length validators, which the document reads as minItems/maxItems.
    field = BoundedList(fields.Integer(), noun="numbers", validate=validate.Length(2, 3))
    with pytest.raises(ValidationError, match=r"must hold 2\.\.3 numbers, got 4"):
        field.deserialize(["a", "b", "c", "d"])
    assert field.deserialize([1, 2]) == [1, 2]
