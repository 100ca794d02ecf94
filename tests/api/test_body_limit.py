"""The default body limit lets every valid query through: the largest fleet plan and prediction the schemas
accept are answered 200 (not 413), a body one byte over the limit is still 413, and ``serve`` warns when
``--max-body-bytes`` is set below the largest valid request."""

from __future__ import annotations

import json
import math

import pytest
from api_fixtures import API_KEY, published_rows
from jetpredict.api.config import (
    DEFAULT_MAX_BODY_BYTES,
    LISTED_MODE_FIELDS,
    MAX_CLIENT_ID_CHARS,
    MAX_MODE_LABEL_CHARS,
    MAX_WORKLOAD_ID_CHARS,
    MIN_BODY_BYTES,
    largest_query_bodies,
)
from jetpredict.api.query_schemas import MAX_POWER_CAP_W, ModeInSchema
from jetpredict.api.schemas import MAX_DEADLINE_S
from jetpredict.models.catalogue import MODE_FIELDS, device_ids, load_device
from jetpredict.predictor.limits import MAX_CLIENTS, MAX_CONFIDENCE, MAX_EPOCHS, MAX_MODES

from tools.testing import busy_port

#: The body limit before it was derived (bytes): the largest fleet plan did not fit it.
OLD_LIMIT_BYTES = 2 * 1024 * 1024
#: A stored workload whose id is as long as an id may be.
LONGEST_WORKLOAD_ID = "w" * MAX_WORKLOAD_ID_CHARS
#: The longest device id (the largest fleet bodies name it in every client).
LONGEST_DEVICE = max(device_ids(), key=len)


def _longest_below(limit: float) -> float:
    """The float just below ``limit``: valid where ``limit`` is, and written with the most digits."""
    return math.nextafter(limit, 0.0)


def largest_fleet_request() -> dict:
    """MAX_CLIENTS clients with distinct ids of MAX_CLIENT_ID_CHARS characters, the workload's id at its
    longest, every optional field given with as many digits as its range allows."""
    clients = [{"id": f"{i:05d}".ljust(MAX_CLIENT_ID_CHARS, "c"), "device": LONGEST_DEVICE}
               for i in range(MAX_CLIENTS)]
    return {"workload": {"id": LONGEST_WORKLOAD_ID}, "deadline_s": _longest_below(MAX_DEADLINE_S),
            "epochs": float(MAX_EPOCHS), "clients": clients, "confidence": _longest_below(MAX_CONFIDENCE)}


def largest_prediction_request() -> dict:
    """MAX_MODES modes of the longest device id with labels of MAX_MODE_LABEL_CHARS characters, each with the
    power-modes listing's fields too (as a listed mode sent back), every number with its most digits."""
    ranges = load_device(LONGEST_DEVICE).knob_ranges()
    low = {k: ranges[k][0] for k in MODE_FIELDS}
    high = {k: _longest_below(ranges[k][1]) for k in MODE_FIELDS[1:]}
    listed = {"nvpmodel_id": 10 ** 23, "power_budget_w": _longest_below(MAX_POWER_CAP_W), "gpu_share": _longest_below(1.0)}
    modes = [{"mode": f"{i:05d}".ljust(MAX_MODE_LABEL_CHARS, "m"), "cpu_cores": float(ranges["cpu_cores"][1]),
              **{k: (high[k] if i % 2 else low[k] + i * 1e-9) for k in MODE_FIELDS[1:]}, **listed}
             for i in range(MAX_MODES)]
    return {"device": LONGEST_DEVICE, "workload": {"id": LONGEST_WORKLOAD_ID}, "modes": modes,
            "epochs": float(MAX_EPOCHS), "confidence": _longest_below(MAX_CONFIDENCE), "layout": "columns"}


@pytest.fixture(scope="module")
def fleet_body() -> bytes:
    return json.dumps(largest_fleet_request()).encode()


@pytest.fixture
def stored_longest(client):
    """The published AGX Xavier rows stored under the longest workload id."""
    rows = published_rows(as_id=LONGEST_WORKLOAD_ID)
    assert rows[0]["device"] == LONGEST_DEVICE  # the clients run on the workload's own device
    r = client.post("/v1/profiles", json={"rows": rows}, headers={"X-API-Key": API_KEY})
    assert r.status_code == 201, r.json


def _post(client, path: str, body: bytes):
    return client.post(path, data=body, content_type="application/json")


def test_the_largest_valid_fleet_plan_is_planned_under_the_default_limit(client, stored_longest, fleet_body):
    """10,000 clients with 200-character ids were over the old 2 MiB limit (413 for a valid plan)."""
    assert len(fleet_body) > OLD_LIMIT_BYTES  # what the fix is about
    r = _post(client, "/v1/fleet-plans", fleet_body)
    assert r.status_code == 200, (r.status_code, r.get_data()[:500])
    planned = r.json["clients"]  # parsed once: a test response parses its body again at each .json
    assert len(planned) == MAX_CLIENTS
    assert {c["id"] for c in planned} == {c["id"] for c in json.loads(fleet_body)["clients"]}
    # The derived floor bounds the real largest plan (a schema limit raised alone breaks this).
    assert len(fleet_body) <= largest_query_bodies()["/v1/fleet-plans"] <= DEFAULT_MAX_BODY_BYTES


def test_a_body_at_the_limit_is_read_and_one_byte_over_is_413(make_app, stored_longest, fleet_body):
    """The largest fleet plan padded with JSON white space to the limit is planned; one byte more is 413."""
    client = make_app().test_client()
    room = DEFAULT_MAX_BODY_BYTES - len(fleet_body)
    assert room >= 0, f"the largest valid fleet plan is {-room} bytes over the default limit"
    r = _post(client, "/v1/fleet-plans", fleet_body + b" " * room)
    assert r.status_code == 200, (r.status_code, r.get_data()[:500])
    r = _post(client, "/v1/fleet-plans", fleet_body + b" " * (room + 1))
    assert r.status_code == 413, r.status_code
    assert r.json["errors"] == {"body": [f"must be at most {DEFAULT_MAX_BODY_BYTES} bytes"]}


def test_the_largest_valid_prediction_fits_the_default_limit(client, stored_longest):
    """50,000 labelled modes (the schema's MAX_MODES) were 13 MB: over the old limit, under the new one."""
    body = json.dumps(largest_prediction_request()).encode()
    assert len(body) > OLD_LIMIT_BYTES
    r = _post(client, "/v1/predictions", body)
    assert r.status_code == 200, (r.status_code, r.get_data()[:500])
    assert r.json["count"] == MAX_MODES
    assert len(body) <= largest_query_bodies()["/v1/predictions"] <= DEFAULT_MAX_BODY_BYTES


def test_serve_warns_of_a_body_limit_below_the_largest_valid_request():
    from jetpredict.api.serve_cli import body_limit_warning

    said = body_limit_warning(MIN_BODY_BYTES - 1, from_flag=True)
    assert said.startswith(f"warning: --max-body-bytes={MIN_BODY_BYTES - 1} is below {MIN_BODY_BYTES} bytes")
    assert "get 413" in said and "/v1/predictions" in said
    assert "JETPREDICT_MAX_BODY_BYTES=5 " in body_limit_warning(5, from_flag=False)
    assert body_limit_warning(MIN_BODY_BYTES, from_flag=True) is None
    assert body_limit_warning(DEFAULT_MAX_BODY_BYTES, from_flag=False) is None


def test_serve_says_the_warning_before_it_listens(tmp_path):
    """``serve --max-body-bytes`` below the floor is warned of at start (here a busy port stops it next).
    A process of its own: ``serve`` exports its settings into its environment."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("JETPREDICT_")} | {"JETPREDICT_API_KEYS": "k"}
    with busy_port() as port:
        done = subprocess.run([sys.executable, "-m", "jetpredict", "serve", "--port", str(port), "--data-dir",
                               str(tmp_path), "--max-body-bytes", "1000000"], env=env, capture_output=True,
                              text=True, timeout=120)
    assert done.returncode != 0 and "the port is in use" in done.stderr
    assert f"warning: --max-body-bytes=1000000 is below {MIN_BODY_BYTES} bytes" in done.stderr


def test_the_body_limit_counts_every_field_a_mode_object_may_carry():
    assert set(ModeInSchema().fields) == {"mode", *MODE_FIELDS, *LISTED_MODE_FIELDS}
