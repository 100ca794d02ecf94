"""Routes that need no fitted workload: health, devices, power modes, errors, limits, auth, CORS, metrics."""

from __future__ import annotations

import pytest
from jetpredict.models.catalogue import device_ids, load_device
from jetpredict.predictor.limits import MAX_CLIENTS
from prometheus_client import CONTENT_TYPE_LATEST


def assert_error(response, status: int, field: str | None = None) -> dict:
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/json"
    body = response.json
    assert set(body) >= {"code", "message", "errors"} and body["code"] == status
    assert isinstance(body["message"], str) and body["message"]
    assert "Traceback" not in response.get_data(as_text=True)
    if field is not None:
        assert field in body["errors"], body
    return body


def test_healthz(client):
    r = client.get("/healthz")
    assert r.status_code == 200
    assert r.json["status"] == "ok" and r.json["database"] == "ok" and r.json["devices"] == len(device_ids())


def test_devices_lists_the_catalogue(client):
    r = client.get("/v1/devices")
    assert r.status_code == 200
    devices = {d["id"]: d for d in r.json["devices"]}
    assert set(devices) == set(device_ids())
    agx = devices["agx-xavier"]
    assert agx["power_modes"] == len(load_device("agx-xavier").modes()) == 29232
    assert agx["knob_ranges"]["gpu_mhz"] == {"min": 114.75, "max": 1377.0}


def test_power_modes_presets_and_paged_space(client):
    r = client.get("/v1/devices/agx-xavier/power-modes")
    assert r.status_code == 200 and r.json["space"] == "presets"
    names = [m["mode"] for m in r.json["modes"]]
    assert "MAXN" in names and r.json["total"] == len(names)
    assert all("nvpmodel_id" in m for m in r.json["modes"])
    # MODE_10W keeps 2 of the GPU's 4 TPCs powered (nvpmodel_t194.conf TPC_PG_MASK 5).
    assert {m["mode"]: m["gpu_share"] for m in r.json["modes"]}["MODE_10W"] == 0.5

    space = load_device("agx-xavier").modes()
    r = client.get("/v1/devices/agx-xavier/power-modes?space=all&limit=3&offset=100")
    assert r.status_code == 200
    assert r.json["total"] == len(space) and r.json["limit"] == 3 and r.json["offset"] == 100
    assert [m["mode"] for m in r.json["modes"]] == [space[i].mode for i in (100, 101, 102)]
    r = client.get(f"/v1/devices/agx-xavier/power-modes?space=all&offset={len(space) - 1}")
    assert len(r.json["modes"]) == 1 and r.json["modes"][0]["mode"] == space[len(space) - 1].mode


@pytest.mark.parametrize("query, field", [("space=some", "query.space"), ("limit=0", "query.limit"),
                                          ("offset=-1", "query.offset"), ("limit=x", "query.limit")])
def test_power_modes_bad_query_is_422(client, query, field):
    assert_error(client.get(f"/v1/devices/nano/power-modes?{query}"), 422, field)


@pytest.mark.parametrize("limit, status", [(0, 422), (1, 200), (1000, 200), (1001, 422)])
def test_the_workload_listing_takes_a_limit_of_1_to_1000(client, stored, limit, status):
    r = client.get(f"/v1/workloads?limit={limit}")
    if status == 422:
        body = assert_error(r, 422, "query.limit")
        assert list(body["errors"]) == ["query.limit"]
    else:
        assert r.status_code == 200 and r.json["limit"] == limit and len(r.json["workloads"]) == 1, r.json


@pytest.mark.parametrize("path, field, rule", [
    ("/v1/workloads?limt=5", "query.limt", "unknown parameter; this route takes limit, offset, search"),
    ("/v1/devices/agx-xavier/power-modes?bogus=1", "query.bogus",
     "unknown parameter; this route takes limit, modes, offset, page, page_size, space"),
    ("/v1/reference-workloads?bogus=1", "query.bogus", "unknown parameter; this route takes device, source"),
    ("/v1/reference-workloads/agx-xavier/resnet18-cifar10?device=nano", "query.device",
     "unknown parameter; this route takes source"),
    ("/v1/workloads?limit=1&limit=2", "query.limit", "given more than once; give it once"),
    ("/v1/devices/nano/power-modes?space=all&space=presets", "query.space", "given more than once; give it once"),
])
def test_unknown_or_repeated_query_parameters_are_422_naming_them(client, path, field, rule):
    """A typo (``limt``) would otherwise be answered with the defaults, and a repeat with its first value."""
    r = client.get(path)
    assert r.status_code == 422, r.json
    assert r.json["errors"] == {field: [rule]} and r.json["message"] == f"{field}: {rule}"


def test_every_route_with_query_parameters_refuses_an_unknown_one(client):
    """Every route the OpenAPI document lists with query parameters, present and future: the project's
    Blueprint parser keeps the schema's RAISE (webargs' own default there is EXCLUDE)."""
    doc = client.get("/openapi.json").json
    routes = [path for path, ops in doc["paths"].items()
              if any(p.get("in") == "query" for p in ops.get("get", {}).get("parameters", []))]
    assert len(routes) >= 4, routes
    for path in routes:
        concrete = path.replace("{device}", "agx-xavier").replace("{workload}", "resnet18-cifar10")
        r = client.get(f"{concrete}?bogus=1")
        assert r.status_code == 422 and "query.bogus" in r.json["errors"], (path, r.status_code, r.json)


def test_every_route_without_query_parameters_refuses_one(client, stored, auth):
    """Routes without a query schema read none of their query, so ``DELETE /v1/workloads/x?dry_run=1`` deleted and
    ``POST /v1/predictions?confidence=0.99`` answered at 0.9. Every /v1/ operation of the document, present and
    future; the probe and scrape routes take what a prober adds."""
    doc = client.get("/openapi.json").json
    operations = [(method, path) for path, ops in doc["paths"].items() if path.startswith("/v1/")
                  for method, op in ops.items() if method in ("get", "post", "put", "patch", "delete")
                  and not any(p.get("in") == "query" for p in op.get("parameters", []))]
    assert len(operations) >= 6, operations
    for method, path in operations:
        concrete = path.replace("{device}", "agx-xavier").replace("{workload_id}", "my-resnet")
        r = client.open(f"{concrete}?bogus=1", method=method.upper(), headers=auth, json={})
        assert r.status_code == 422 and r.json["errors"] == {"query.bogus": ["unknown parameter; this route takes none"]}, (
            method, path, r.status_code, r.json)
    assert client.get("/v1/workloads/my-resnet", headers=auth).status_code == 200  # the DELETE did not run
    assert client.get("/healthz?probe=1").status_code == 200
    # HEAD answers as GET: a route's own parameters pass, others do not
    assert client.head("/v1/workloads?limit=2").status_code == 200 and client.head("/v1/devices?x=1").status_code == 422


def test_the_query_parameters_each_route_takes_still_work(client):
    for path in ("/v1/workloads?limit=5&offset=0&search=x", "/v1/devices/nano/power-modes?space=all&limit=2&offset=1",
                 "/v1/reference-workloads?device=nano&source=published",
                 "/v1/reference-workloads/agx-xavier/resnet18-cifar10?source=published"):
        assert client.get(path).status_code == 200, path

def test_unknown_device_is_404(client):
    body = assert_error(client.get("/v1/devices/jetson-tx9/power-modes"), 404, "device")
    assert "agx-xavier" in body["message"]  # names the valid ids


def test_unknown_route_and_method(client):
    assert_error(client.get("/v2/nothing"), 404)
    r = client.put("/v1/devices")
    assert_error(r, 405)
    assert "GET" in r.headers["Allow"]


def test_writes_need_a_valid_api_key(client):
    body = {"rows": []}
    r = client.post("/v1/profiles", json=body)
    assert_error(r, 401, "X-API-Key")
    assert r.headers["WWW-Authenticate"].startswith("ApiKey")
    assert_error(client.post("/v1/profiles", json=body, headers={"X-API-Key": "test-key-10"}), 403, "X-API-Key")
    assert_error(client.delete("/v1/workloads/x"), 401)
    assert_error(client.delete("/v1/workloads/x", headers={"X-API-Key": "nope"}), 403)
    # The second configured key works too (keys are comma-separated, spaces trimmed).
    assert_error(client.delete("/v1/workloads/x", headers={"X-API-Key": "test-key-2"}), 404)


@pytest.mark.parametrize("near", ["TEST-KEY-2", "Test-Key-2", "test-key-", "test-key-2 x", "test-key-22"])
def test_a_key_matches_only_exactly(client, near):
    """A key differing in case, or a prefix or an extension of a configured one, is refused (403)."""
    assert_error(client.delete("/v1/workloads/x", headers={"X-API-Key": near}), 403, "X-API-Key")


def test_no_configured_keys_means_no_writes(tmp_path):
    from jetpredict.api.app import create_app

    client = create_app({"DATA_DIR": tmp_path, "API_KEYS": ""}).test_client()
    body = assert_error(client.delete("/v1/workloads/x", headers={"X-API-Key": "anything"}), 403)
    assert "JETPREDICT_API_KEYS" in body["message"]


def test_content_type_must_be_json(client, auth):
    assert_error(client.post("/v1/predictions", data="device=nano"), 415, "Content-Type")
    assert_error(client.post("/v1/profiles", data="x,y\n1,2\n", headers={**auth, "Content-Type": "text/csv"}),
                 415)


def test_a_structured_json_media_type_is_read_as_json(client, stored):
    """RFC 6839: ``application/<name>+json`` is JSON (what some HTTP libraries send)."""
    r = client.post("/v1/predictions", data='{"workload": {"id": "my-resnet"}, "modes": "presets"}',
                    content_type="application/vnd.api+json")
    assert r.status_code == 200, r.json


def test_malformed_json_is_400(client):
    body = assert_error(client.post("/v1/predictions", data="{not json", content_type="application/json"), 400)
    assert "body" in body["errors"]


def test_long_url_is_414(client):
    assert_error(client.get("/v1/workloads?" + "x=1&" * 3000), 414, "url")


def test_a_url_one_byte_over_max_url_bytes_is_414_and_one_at_it_is_read(client):
    from jetpredict.api.app import MAX_URL_BYTES

    path = "/v1/workloads"
    at = f"{path}?search=" + "a" * (MAX_URL_BYTES - len(path) - len("search="))
    assert len(at.encode()) - len("?") == MAX_URL_BYTES  # the path and the query string count, not the '?'
    assert_error(client.get(at), 422, "query.search")  # read: refused by the parameter's own length rule
    assert_error(client.get(at + "a"), 414, "url")


def test_body_limit_is_413(tmp_path):
    from jetpredict.api.app import create_app

    client = create_app({"DATA_DIR": tmp_path, "MAX_BODY_BYTES": 1000}).test_client()
    big = {"workload": {"id": "x" * 2000}}
    assert_error(client.post("/v1/predictions", json=big), 413)


@pytest.mark.parametrize("body, field", [
    ({}, "workload"),
    ({"workload": {"id": "a", "rows": [{}]}}, "workload._schema"),
    ({"workload": {}}, "workload._schema"),
    ({"workload": {"id": "a"}, "modes": "some"}, "modes"),
    ({"workload": {"id": "a"}, "modes": [{"cpu_cores": 2}]}, "modes.0.cpu_mhz"),
    ({"workload": {"id": "a"}, "modes": []}, "modes"),
    ({"workload": {"id": "a"}, "device": "no-such-board"}, "device"),
    ({"workload": {"id": "a"}, "epochs": 0}, "epochs"),
    ({"workload": {"id": "a"}, "epochs": 1.5}, "epochs"),
    ({"workload": {"id": "a"}, "confidence": 1.0}, "confidence"),  # past MAX_CONFIDENCE (0.999)
    ({"workload": {"id": "a"}, "confidence": 0.49}, "confidence"),
    ({"workload": {"id": "a"}, "typo": 1}, "typo"),
    ([1, 2], "_schema"),
])
def test_prediction_request_validation(client, body, field):
    assert_error(client.post("/v1/predictions", json=body), 422, field)


def test_a_fleet_of_one_client_more_than_the_limit_is_422_naming_clients_and_the_limit(client):
    clients = [{"id": f"c{i}", "device": "nano"} for i in range(MAX_CLIENTS + 1)]
    body = {"workload": {"id": "a"}, "deadline_s": 60, "clients": clients}
    said = assert_error(client.post("/v1/fleet-plans", json=body), 422, "clients")["errors"]["clients"]
    assert f"{MAX_CLIENTS}" in said[0], said


@pytest.mark.parametrize("route, body, field", [
    ("/v1/predictions", [1, 2], "_schema"),
    ("/v1/predictions", {"workload": "my-resnet", "modes": "presets"}, "workload._schema"),
    ("/v1/predictions", {"workload": {"id": "a"}, "modes": [3]}, "modes.0._schema"),
    ("/v1/fleet-plans", "a text", "_schema"),
])
def test_a_value_that_should_be_an_object_says_so(client, route, body, field):
    assert assert_error(client.post(route, json=body), 422, field)["errors"][field] == ["must be a JSON object"]


def test_upload_rows_problems_name_row_and_field(client, auth):
    rows = [{"device": "agx-xavier", "workload": "w", "mode": "a", "cpu_cores": 4, "cpu_mhz": 1200,
             "gpu_mhz": 99999, "emc_mhz": 1333, "batch_size": 16, "minibatches_per_epoch": 10,
             "epoch_time_s": -1}]
    body = assert_error(client.post("/v1/profiles", json={"rows": rows}, headers=auth), 422)
    # 0-based, as modes.I and clients.I are
    assert "rows.0.gpu_mhz" in body["errors"] and "rows.0.epoch_time_s" in body["errors"]
    assert client.get("/v1/workloads").json["total"] == 0


def test_cors_is_off_by_default_and_on_when_configured(client, tmp_path):
    r = client.get("/v1/devices", headers={"Origin": "https://example.org"})
    assert "Access-Control-Allow-Origin" not in r.headers
    from jetpredict.api.app import create_app

    cors = create_app({"DATA_DIR": tmp_path / "c", "CORS_ORIGINS": "https://example.org"}).test_client()
    r = cors.get("/v1/devices", headers={"Origin": "https://example.org"})
    assert r.headers["Access-Control-Allow-Origin"] == "https://example.org"
    r = cors.get("/v1/devices", headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in r.headers
    r = cors.options("/v1/profiles", headers={"Origin": "https://example.org"})
    assert r.status_code == 204 and "X-API-Key" in r.headers["Access-Control-Allow-Headers"]


def test_openapi_documents_every_route_and_the_key(client):
    spec = client.get("/openapi.json").json
    assert spec["openapi"].startswith("3.")
    assert set(spec["paths"]) >= {"/healthz", "/metrics", "/v1/devices", "/v1/devices/{device}/power-modes",
                                  "/v1/predictions", "/v1/recommendations", "/v1/fleet-plans",
                                  "/v1/profiles", "/v1/workloads", "/v1/workloads/{workload_id}"}
    assert spec["components"]["securitySchemes"]["ApiKeyAuth"]["name"] == "X-API-Key"
    assert spec["paths"]["/v1/profiles"]["post"]["security"] == [{"ApiKeyAuth": []}]
    content = spec["paths"]["/v1/predictions"]["post"]["responses"]["200"]["content"]
    assert set(content) == {"application/json", "text/csv", "application/vnd.apache.arrow.stream"}
    request = spec["components"]["schemas"]["PredictionRequest"]
    assert request["additionalProperties"] is False
    assert client.get("/docs").status_code == 200


def test_metrics_count_requests_per_route(client):
    client.get("/v1/devices")
    client.get("/v1/devices/nano/power-modes")
    client.get("/v1/devices/nope/power-modes")
    answer = client.get("/metrics")
    # Prometheus's own content type, once: Flask appends a second charset to a mimetype that holds one.
    assert answer.headers["Content-Type"] == CONTENT_TYPE_LATEST
    text = answer.get_data(as_text=True)
    assert 'jetpredict_http_requests_total{method="GET",route="/v1/devices",status="200"} 1.0' in text
    assert ('jetpredict_http_requests_total{method="GET",route="/v1/devices/<string:device>/power-modes",'
            'status="404"} 1.0') in text
    assert 'jetpredict_http_request_duration_seconds_count{method="GET",route="/v1/devices"} 1.0' in text



def test_metrics_label_made_up_methods_as_other(client):
    """A client inventing methods must not grow /metrics: one series for all of them."""
    for i in range(20):
        assert client.open("/v1/devices", method=f"BREW{i}").status_code == 405
        client.open(f"/nowhere-{i}", method=f"X-{i}")
    client.open("/v1/devices", method="PATCH")
    text = client.get("/metrics").get_data(as_text=True)
    assert "BREW" not in text and "X-" not in text
    assert 'jetpredict_http_requests_total{method="other",route="<unmatched>",status="405"} 20.0' in text
    assert 'method="PATCH"' in text  # a real method keeps its name
    series = [line for line in text.splitlines() if line.startswith("jetpredict_http_requests_total{")]
    assert len(series) <= 4, series

def test_settings_from_environment(monkeypatch, tmp_path):
    from jetpredict.api.config import load_settings
    from jetpredict.models.errors import InputError

    monkeypatch.setenv("JETPREDICT_API_KEYS", "a, b,,c")
    monkeypatch.setenv("JETPREDICT_PORT", "9000")
    monkeypatch.setenv("JETPREDICT_DATA_DIR", str(tmp_path))
    s = load_settings({"PORT": 9100})
    assert s.API_KEYS == ("a", "b", "c") and s.PORT == 9100 and s.HOST == "127.0.0.1"
    assert s.database_url == f"sqlite:///{tmp_path.resolve()}/jetpredict.sqlite"
    monkeypatch.setenv("JETPREDICT_DATABASE_URL", "postgresql://u@db/jp")
    assert load_settings().database_url == "postgresql://u@db/jp"
    monkeypatch.setenv("JETPREDICT_WORKERS", "zero")
    with pytest.raises(InputError) as err:
        load_settings()
    assert err.value.field == "WORKERS"


@pytest.mark.parametrize(("name", "value", "taken"), [
    ("PORT", "65535", 65535),
    ("HEAVY_QUEUE", "0", 0),
    ("MAX_BODY_BYTES", "1", 1),
    ("RATE_LIMIT", "10/minute", "10/minute"),
    ("ACCESS_LOG", "OFF", "off"),
])
def test_each_setting_takes_its_bound(name, value, taken):
    """A bound is inclusive (PORT 65535, HEAVY_QUEUE 0 are good), and a good value takes effect."""
    from jetpredict.api.config import load_settings

    assert getattr(load_settings(environ={f"JETPREDICT_{name}": value}), name) == taken


@pytest.mark.parametrize(("name", "value", "said"), [
    ("PORT", "65536", "JETPREDICT_PORT=65536 is out of range: must be between 0 and 65535"),
    ("HEAVY_QUEUE", "-1", "JETPREDICT_HEAVY_QUEUE=-1 is out of range: must be at least 0"),
    ("WORKERS", "2.5", "JETPREDICT_WORKERS must be a whole number, got '2.5'"),
    ("RATE_LIMIT", "0/second", "JETPREDICT_RATE_LIMIT='0/second' allows 0 requests"),
    ("RATE_LIMIT_ALL_MODES", "10/minute;0/second", "JETPREDICT_RATE_LIMIT_ALL_MODES='10/minute;0/second' allows 0"),
    ("ACCESS_LOG", "yes", "JETPREDICT_ACCESS_LOG must be on or off, got 'yes'"),
])
def test_a_setting_past_its_bound_is_refused_naming_the_variable(name, value, said):
    """A bad value is refused naming the variable and the rule, never let through to fail later (0/second would
    answer every request 429)."""
    from jetpredict.api.config import load_settings
    from jetpredict.models.errors import InputError

    with pytest.raises(InputError) as err:
        load_settings(environ={f"JETPREDICT_{name}": value})
    assert err.value.field == name and said in err.value.message, err.value.message


def test_each_sizing_setting_reaches_the_part_it_sizes(make_app, tmp_path):
    """Distinct values, so that a part sized from the wrong setting shows (the memory answer cache from the
    disk one's MB, the gate's queue from its slots)."""
    app = make_app(ANSWER_CACHE_MB=3, ANSWER_CACHE_DISK_MB=5, HEAVY_SLOTS=2, HEAVY_QUEUE=7, HEAVY_WAIT_S=11,
                   MODEL_CACHE_SIZE=13, HEAVY_FIT_ROWS=17, MAX_BODY_BYTES=19_000_000)
    services = app.extensions["jetpredict"]
    mib = 1024 * 1024
    assert (services.answers.max_bytes, services.answers.disk_bytes) == (3 * mib, 5 * mib)
    assert services.answers.directory == tmp_path / "answers"
    assert (services.heavy.slots, services.heavy.queue, services.heavy.wait_s) == (2, 7, 11)
    assert (services.workloads.cache_size, services.workloads.heavy_fit_rows) == (13, 17)
    assert services.settings.MAX_BODY_BYTES == app.config["MAX_CONTENT_LENGTH"] == 19_000_000
