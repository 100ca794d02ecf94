"""A mode object's number bounds are stated once (``query_schemas.MODE_BOUNDS``), and their readers agree
at every edge: the OpenAPI document takes them as stated; the schema and the fast path that skips it take
them with the device check's RANGE_TOLERANCE_MHZ past either end of a clock (``TAKEN_BOUNDS``)."""

from __future__ import annotations

import math

import pytest
from jetpredict.api.config import MAX_MODE_LABEL_CHARS
from jetpredict.api.query_schemas import _MODES_SCHEMA, MODE_BOUNDS, MODE_IN_DOC, TAKEN_BOUNDS, _plain_mode
from jetpredict.models.catalogue import MODE_FIELDS, RANGE_TOLERANCE_MHZ
from marshmallow import ValidationError
from openapi_schema_validator import OAS30Validator

_INTEGERS = ("cpu_cores", "nvpmodel_id")
_BASE = {"mode": "m", **{k: MODE_BOUNDS[k].low for k in MODE_FIELDS}, "cpu_cores": int(MODE_BOUNDS["cpu_cores"].low)}


def _schema_takes(mode: dict) -> bool:
    try:
        _MODES_SCHEMA.load([mode])
    except ValidationError:
        return False
    return True


def _edges(name: str, bounds: dict) -> list[tuple[float, bool]]:
    """Values at and just past ``name``'s ``bounds``, each with whether it lies inside them."""
    b = bounds[name]
    step = (lambda v, d: v + d) if name in _INTEGERS else (lambda v, d: math.nextafter(v, v + d))
    low = int(b.low) if name in _INTEGERS else float(b.low)
    edges = [(low, b.low_inclusive), (step(low, -1), False), (step(low, 1), True)]
    if b.high is not None:
        high = int(b.high) if name in _INTEGERS else float(b.high)
        edges += [(high, True), (step(high, 1), False)]
    return edges


@pytest.mark.parametrize("name", list(MODE_BOUNDS))
def test_the_document_takes_the_stated_bounds_the_schema_and_the_fast_path_the_taken(name):
    document = OAS30Validator(MODE_IN_DOC)
    assert set(MODE_BOUNDS) == set(TAKEN_BOUNDS) == set(MODE_IN_DOC["properties"]) - {"mode"}
    tolerance = RANGE_TOLERANCE_MHZ if name in MODE_FIELDS[1:] else 0
    stated, taken = MODE_BOUNDS[name], TAKEN_BOUNDS[name]
    assert (taken.low, taken.high) == (
        stated.low - tolerance, None if stated.high is None else stated.high + tolerance)
    for value, inside in _edges(name, MODE_BOUNDS):
        assert document.is_valid({**_BASE, name: value}) is inside, (name, value)
    for value, inside in _edges(name, TAKEN_BOUNDS):
        mode = {**_BASE, name: value}
        seen = {"schema": _schema_takes(mode), "fast path": _plain_mode(mode)}
        assert seen == dict.fromkeys(seen, inside), (name, value)


def test_a_mode_label_one_past_its_limit_is_refused_on_the_fast_path_too(client, stored):
    """A plain mode object skips the schema (the fast path): its label's length is checked there as well."""
    mode = {"cpu_cores": 8, "cpu_mhz": 1190.4, "gpu_mhz": 675.75, "emc_mhz": 1600}
    body = {"workload": {"id": "my-resnet"}}
    at_limit = "x" * MAX_MODE_LABEL_CHARS
    r = client.post("/v1/predictions", json={**body, "modes": [{"mode": at_limit, **mode}]})
    assert r.status_code == 200 and r.json["predictions"][0]["mode"] == at_limit, r.json
    r = client.post("/v1/predictions", json={**body, "modes": [{"mode": at_limit + "x", **mode}]})
    assert r.status_code == 422 and list(r.json["errors"]) == ["modes.0.mode"], r.json
    assert str(MAX_MODE_LABEL_CHARS) in r.json["errors"]["modes.0.mode"][0]


@pytest.mark.parametrize("name", ["power_budget_w", "gpu_share"])
def test_a_listed_budget_or_gpu_share_of_zero_is_refused_by_name_as_the_document_says(name):
    """The listing's power budget (W) and GPU share are positive: 0 is outside (low, high] on every path,
    where the edge test above only checks that the paths agree with whatever MODE_BOUNDS states."""
    stated = MODE_IN_DOC["properties"][name]
    assert (stated["minimum"], stated.get("exclusiveMinimum")) == (0, True)
    mode = {**_BASE, name: 0}
    assert not _plain_mode(mode)
    with pytest.raises(ValidationError) as refused:
        _MODES_SCHEMA.load([mode])
    assert list(refused.value.messages[0]) == [name], refused.value.messages
    assert _schema_takes({**_BASE, name: math.nextafter(0.0, 1.0)})
