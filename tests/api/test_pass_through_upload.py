"""An upload's numeric pass-through cells (``power_samples``, ``flops_train`` ...) meet their documented
rule (a finite number >= 0, a whole number for counts, below a physical bound), or the answer is a 422
naming ``rows.I.COLUMN`` and nothing is stored; null stays unknown."""

from __future__ import annotations

import json

import pytest
from api_fixtures import published_rows


@pytest.mark.parametrize("column, raw, rule", [
    ("power_samples", "-1", "must be >= 0"),
    ("power_samples", "1.5", "must be a whole number"),
    ("power_samples", "1" + "0" * 400, "must be a finite number"),
    ("power_samples", "123456789012345678901234567890", "(a physical bound)"),
    ("flops_train", "1" + "0" * 400, "must be a finite number"),
    ("flops_train", "-5", "must be >= 0"),
    ("kernel_count", "7.25", "must be a whole number"),
], ids=["negative", "fraction", "10**400", "1.2e29", "flops-10**400", "flops-negative", "kernels-fraction"])
def test_a_bad_pass_through_number_is_a_422_naming_its_row_and_column(client, auth, column, raw, rule):
    rows = published_rows(as_id="pass-through")
    rows[1][column] = None
    # The raw JSON number (10**400 has no float), spliced in where the cell is null.
    body = json.dumps({"rows": rows}).replace(f'"{column}": null', f'"{column}": {raw}', 1)
    r = client.post("/v1/profiles", data=body, content_type="application/json", headers=auth)
    assert r.status_code == 422, r.json
    assert list(r.json["errors"]) == [f"rows.1.{column}"], r.json
    assert rule in r.json["errors"][f"rows.1.{column}"][0]
    assert client.get("/v1/workloads/pass-through").status_code == 404  # nothing stored
    inline = body.replace('{"rows"', '{"modes": "presets", "workload": {"rows"', 1)[:-1] + "}}"
    r = client.post("/v1/predictions", data=inline, content_type="application/json")
    assert r.status_code == 422 and list(r.json["errors"]) == [f"workload.rows.1.{column}"], r.json


def test_good_and_empty_pass_through_numbers_are_stored(client, auth):
    rows = published_rows(as_id="pass-through")
    rows[0].update(power_samples=0, kernel_count=185.0, flops_train=3.332e9)
    rows[1].update(power_samples=None, kernel_count=None)
    r = client.post("/v1/profiles", json={"rows": rows}, headers=auth)
    assert r.status_code == 201, r.json
    back = client.get("/v1/workloads/pass-through").json["rows"]
    assert (back[0]["power_samples"], back[0]["kernel_count"], back[0]["flops_train"]) == (0, 185, 3.332e9)
    assert back[1].get("power_samples") is None and back[1].get("kernel_count") is None
