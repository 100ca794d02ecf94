"""No 500 for any input, 503 when the database is down, idempotent uploads, security headers, CORS, rate
limits, and schemas that say what the server enforces. Each case of issue 13 point 4 is one test here."""

from __future__ import annotations

import json
import logging

import pytest
from api_fixtures import API_KEY, NO_RATE_LIMITS, published_rows

from tools.testing import busy_port, free_port

MODES = [{"cpu_cores": 8, "cpu_mhz": 1190.4, "gpu_mhz": 675.75, "emc_mhz": 1600.0}]


# -- bad input never becomes a 500 ------------------------------------------------------------------
@pytest.mark.parametrize("bad_id", ["a\x00b", "x\ud800y", "\udfff"], ids=["nul", "surrogate", "lone-low"])
def test_unstorable_workload_ids_are_4xx_on_every_database(client, auth, stored, bad_id):
    r = client.post("/v1/predictions", json={"workload": {"id": bad_id}, "modes": MODES})
    assert r.status_code in (404, 422), r.json
    r = client.get("/v1/workloads/" + bad_id.encode("utf-8", "surrogatepass").decode("latin-1"))
    assert r.status_code == 404
    r = client.delete("/v1/workloads/a%00b", headers=auth)
    assert r.status_code == 404
    rows = [{**row, "workload": bad_id} for row in published_rows()]
    r = client.post("/v1/profiles", json={"rows": rows}, headers=auth)
    assert r.status_code == 422 and "rows.0.workload" in r.json["errors"], r.json
    rows = [{**row, "mode": f"m{bad_id}{i}"} for i, row in enumerate(published_rows())]
    r = client.post("/v1/profiles", json={"rows": rows}, headers=auth)
    assert r.status_code == 422 and "rows.0.mode" in r.json["errors"], r.json
    assert client.get("/v1/workloads").json["total"] == 1  # nothing half-stored


@pytest.mark.parametrize("opener, closer", [("[", "]"), ('{"a":', "}")], ids=["arrays", "objects"])
def test_json_nested_a_thousand_deep_is_400_without_a_key(client, opener, closer):
    body = '{"workload": ' + opener * 100_000 + "1" + closer * 100_000 + "}"
    for path in ("/v1/predictions", "/v1/profiles"):
        r = client.post(path, data=body, content_type="application/json")
        assert r.status_code in (400, 401), (path, r.json)
        assert r.json["code"] == r.status_code
    r = client.post("/v1/predictions", data=body, content_type="application/json")
    assert r.status_code == 400 and "nested too deeply" in r.json["message"]


def test_fleet_plan_deadline_near_the_float_limit_is_422(client, stored):
    body = {"workload": {"id": "my-resnet"}, "deadline_s": 1e307,
            "clients": [{"id": "a", "device": "agx-xavier"}, {"id": "b", "device": "nano"}]}
    r = client.post("/v1/fleet-plans", json=body)
    assert r.status_code == 422 and "deadline_s" in r.json["errors"]


@pytest.mark.parametrize("body, field", [
    ({"workload": {}}, "workload._schema"),
    ({"workload": {"id": ""}}, "workload.id"),
    ({"workload": {"id": "my-resnet"}, "modes": [{**MODES[0], "cpu_mhz": 5e-324}]}, "modes.0.cpu_mhz"),
    ({"workload": {"id": "my-resnet"}, "modes": [{**MODES[0], "cpu_cores": 0}]}, "modes.0.cpu_cores"),
])
def test_what_the_server_refuses_the_openapi_document_refuses_too(client, body, field):
    r = client.post("/v1/predictions", json=body)
    assert r.status_code == 422 and field in r.json["errors"], r.json
    doc = client.get("/openapi.json").json
    ref = doc["components"]["schemas"]["WorkloadRef"]
    assert ref["minProperties"] == 1 and ref["maxProperties"] == 1
    assert ref["properties"]["id"]["minLength"] == 1 and "pattern" in ref["properties"]["id"]
    mode = doc["components"]["schemas"]["PredictionRequest"]["properties"]["modes"]["oneOf"][1]["items"]
    assert mode["properties"]["cpu_mhz"]["minimum"] > 100 and mode["properties"]["cpu_cores"]["minimum"] == 1
    row = doc["components"]["schemas"]["ProfileRow.agx-xavier"]
    assert row["properties"]["workload"]["minLength"] == 1 and "enum" in row["properties"]["device"]
    assert row["properties"]["epoch_time_s"]["maximum"] <= 1e8
    fleet = doc["components"]["schemas"]["FleetPlanRequest"]["properties"]["deadline_s"]
    assert fleet["maximum"] < 1e10


SURROGATE_RULE = "must be valid Unicode (it holds an unpaired surrogate)"
HALF = "x\ud800"  # an unpaired surrogate, as JSON's "\\ud800" escape decodes


@pytest.mark.parametrize("accept", ["application/json", "text/csv", "application/vnd.apache.arrow.stream"])
@pytest.mark.parametrize("path, body, field", [
    ("/v1/predictions", {"workload": {"id": "my-resnet"}, "modes": [{**MODES[0], "mode": HALF}]}, "modes.0.mode"),
    ("/v1/predictions", {"workload": {"id": "my-resnet"},
                         "modes": [MODES[0], {**MODES[0], "cpu_cores": 4.0, "mode": HALF}]}, "modes.1.mode"),
    ("/v1/predictions", {"workload": {"id": HALF}}, "workload.id"),
    ("/v1/recommendations", {"workload": {"id": HALF}, "objective": "min-energy"}, "workload.id"),
    ("/v1/fleet-plans", {"workload": {"id": "my-resnet"}, "deadline_s": 3600,
                         "clients": [{"id": HALF, "device": "agx-xavier"}]}, "clients.0.id"),
])
def test_text_with_an_unpaired_surrogate_is_422_naming_the_field(client, stored, accept, path, body, field):
    """No answer format can encode such text (CSV and Arrow are UTF-8): refused as inline rows refuse it."""
    r = client.post(path, data=json.dumps(body), content_type="application/json", headers={"Accept": accept})
    assert r.status_code == 422, (r.status_code, r.data[:300])
    assert r.json["errors"] == {field: [SURROGATE_RULE]}
    assert f"{field}: {SURROGATE_RULE}" in r.json["message"]


def test_unexpected_errors_answer_one_json_500_and_log_one_traceback(make_app, caplog):
    app = make_app()

    def boom():
        raise ZeroDivisionError("boom")

    app.add_url_rule("/boom", "boom", boom)
    with caplog.at_level(logging.ERROR, logger="jetpredict.api"):
        r = app.test_client().get("/boom")
    assert r.status_code == 500
    assert r.json == {"code": 500, "status": "Internal Server Error",
                      "message": "internal error; see the server log", "errors": {}}
    tracebacks = [rec for rec in caplog.records if rec.exc_info]
    assert len(tracebacks) == 1 and tracebacks[0].exc_info[0] is ZeroDivisionError


# -- the database down: 503, not 500 ----------------------------------------------------------------
def test_database_down_is_503_with_retry_after(tmp_path):
    from jetpredict.api.app import create_app

    # Nothing listens on this loopback port: every connection is refused, as when PostgreSQL is down.
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/nowhere"
    app = create_app({"DATA_DIR": tmp_path, "API_KEYS": API_KEY, "DATABASE_URL": url, **NO_RATE_LIMITS})
    client = app.test_client()
    for method, path, body in [("post", "/v1/predictions", {"workload": {"id": "w"}, "modes": MODES}),
                               ("post", "/v1/profiles", {"rows": published_rows()}),
                               ("get", "/v1/workloads", None), ("get", "/v1/workloads/w", None)]:
        r = getattr(client, method)(path, json=body, headers={"X-API-Key": API_KEY})
        assert r.status_code == 503, (path, r.status_code, r.json)
        assert r.json["errors"] == {"database": ["unreachable"]} and r.headers["Retry-After"]
    assert client.get("/healthz").status_code == 503
    assert client.get("/v1/devices").status_code == 200  # the catalogue needs no database


# -- idempotent uploads ------------------------------------------------------------------------------
def test_a_retried_upload_is_stored_once_and_answered_with_the_original_result(client, auth):
    headers = {**auth, "Idempotency-Key": "upload-0001"}
    first = client.post("/v1/profiles", json={"rows": published_rows()}, headers=headers)
    assert first.status_code == 201 and first.headers["Idempotent-Replayed"] == "false"
    more = client.post("/v1/profiles", json={"rows": published_rows(n=8)[4:]}, headers=auth)
    assert more.status_code == 201 and more.json["revision"] == 2
    retry = client.post("/v1/profiles", json={"rows": published_rows()}, headers=headers)
    assert retry.status_code == 201 and retry.headers["Idempotent-Replayed"] == "true"
    assert retry.json == first.json  # the original answer, revision 1
    assert client.get("/v1/workloads/my-resnet").json["rows_stored"] == 8


def test_the_same_key_with_another_body_is_409(client, auth):
    headers = {**auth, "Idempotency-Key": "k-1"}
    assert client.post("/v1/profiles", json={"rows": published_rows()}, headers=headers).status_code == 201
    r = client.post("/v1/profiles", json={"rows": published_rows(n=8)[4:]}, headers=headers)
    assert r.status_code == 409 and "headers.Idempotency-Key" in r.json["errors"]  # valid, clashes with state
    assert client.get("/v1/workloads/my-resnet").json["rows_stored"] == 4


def test_without_a_key_the_same_rows_are_one_upload(client, auth):
    first = client.post("/v1/profiles", json={"rows": published_rows()}, headers=auth)
    again = client.post("/v1/profiles", json={"rows": published_rows()}, headers=auth)
    assert again.status_code == 201 and again.json == first.json
    assert again.headers["Idempotent-Replayed"] == "true"
    assert client.get("/v1/workloads/my-resnet").json["rows_stored"] == 4


def test_a_bad_idempotency_key_is_422(client, auth):
    r = client.post("/v1/profiles", json={"rows": published_rows()}, headers={**auth, "Idempotency-Key": "a b"})
    assert r.status_code == 422 and "headers.Idempotency-Key" in r.json["errors"]
    # The answer states the rule, not marshmallow's "String does not match expected pattern."
    assert r.json["errors"]["headers.Idempotency-Key"] == ["must be printable ASCII without spaces (e.g. a UUID)"]
    assert "headers.Idempotency-Key: must be printable ASCII" in r.json["message"]


# -- headers, CORS, rate limits ----------------------------------------------------------------------
def test_security_headers_on_reads_writes_and_errors(client, auth):
    for r in (client.get("/v1/devices"), client.get("/nope"),
              client.post("/v1/profiles", json={"rows": published_rows()}, headers=auth)):
        assert "default-src 'self'" in r.headers["Content-Security-Policy"]
        assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]
        assert r.headers["X-Content-Type-Options"] == "nosniff"
        assert r.headers["Referrer-Policy"] == "no-referrer"
    write = client.post("/v1/profiles", json={"rows": published_rows()}, headers=auth)
    assert write.headers["Cache-Control"] == "no-store"
    assert "no-store" not in client.get("/v1/devices").headers.get("Cache-Control", "")


def test_cors_preflight_only_on_routes_and_vary_origin(make_app):
    client = make_app(CORS_ORIGINS="https://ok.example").test_client()
    pre = {"Origin": "https://ok.example", "Access-Control-Request-Method": "POST"}
    r = client.options("/v1/predictions", headers=pre)
    assert r.status_code == 204 and r.headers["Access-Control-Allow-Origin"] == "https://ok.example"
    assert "POST" in r.headers["Access-Control-Allow-Methods"] and "Origin" in r.headers["Vary"]
    r = client.options("/no/such/route", headers=pre)
    assert r.status_code == 404 and "Access-Control-Allow-Origin" not in r.headers
    r = client.get("/v1/devices", headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in r.headers and "Origin" in r.headers["Vary"]


def test_rate_limits_per_client_and_for_all_modes(make_app, auth):
    app = make_app(RATE_LIMIT="5/minute", RATE_LIMIT_ALL_MODES="1/minute")
    client = app.test_client()
    assert client.post("/v1/profiles", json={"rows": published_rows()}, headers=auth).status_code == 201
    body = {"workload": {"id": "my-resnet"}, "modes": "all"}
    ok = client.post("/v1/predictions", json=body)
    assert ok.status_code == 200 and "Retry-After" not in ok.headers  # "wait" belongs to a refusal only
    r = client.post("/v1/predictions", json=body)
    assert r.status_code == 429 and r.json["code"] == 429 and int(r.headers["Retry-After"]) > 0
    assert r.json["message"].startswith("rate limit of 1 per 1 minute per client address reached")
    few = {"workload": {"id": "my-resnet"}, "modes": MODES}
    statuses = [client.post("/v1/predictions", json=few).status_code for _ in range(4)]
    assert statuses[:2] == [200, 200] and statuses[-1] == 429  # 5/minute over all costly POSTs
    other = client.post("/v1/predictions", json=few, environ_base={"REMOTE_ADDR": "10.0.0.2"})
    assert other.status_code == 200  # another client has its own budget
    assert client.get("/v1/devices").status_code == 200  # reads are not limited


def test_a_per_second_limit_never_says_retry_after_0(make_app, auth):
    """Flask-Limiter floors the seconds left of a 1-second window to 0; a client that obeys that retries at
    once and is refused again. Every 429 says at least 1 s, and waiting that long gets an answer."""
    import time

    client = make_app(RATE_LIMIT="2/second").test_client()
    assert client.post("/v1/profiles", json={"rows": published_rows()}, headers=auth).status_code == 201
    body = {"workload": {"id": "my-resnet"}, "modes": MODES}
    said = []  # over more than a whole window, so some refusals come in its last fraction of a second
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        r = client.post("/v1/predictions", json=body)
        if r.status_code == 429:
            said.append(int(r.headers["Retry-After"]))
        time.sleep(0.02)
    assert said and min(said) >= 1, said
    time.sleep(said[-1])
    assert client.post("/v1/predictions", json=body).status_code == 200


def test_a_chunked_body_over_the_limit_is_413_like_a_sized_one(make_app):
    """Without Content-Length (chunked), a body past MAX_BODY_BYTES is refused as too large, not cut short
    and answered as broken JSON; one within the limit is read whole."""
    import io
    import json

    client = make_app(MAX_BODY_BYTES=2000).test_client()
    chunked = {"headers": {"Transfer-Encoding": "chunked"}, "content_type": "application/json",
               "environ_overrides": {"wsgi.input_terminated": True}}
    big = json.dumps({"workload": {"id": "x" * 3000}, "modes": "presets"}).encode()
    r = client.post("/v1/predictions", input_stream=io.BytesIO(big), **chunked)
    assert r.status_code == 413 and r.json["errors"] == {"body": ["must be at most 2000 bytes"]}, r.json
    small = json.dumps({"workload": {"id": "not-stored"}, "modes": "presets"}).encode()
    r = client.post("/v1/predictions", input_stream=io.BytesIO(small), **chunked)
    assert r.status_code == 404 and "not-stored" in r.json["message"]  # parsed whole: the id was read


def test_bad_rate_limit_setting_names_the_variable(tmp_path):
    from jetpredict.api.config import load_settings
    from jetpredict.models.errors import InputError

    with pytest.raises(InputError, match="JETPREDICT_RATE_LIMIT="):
        load_settings({"RATE_LIMIT": "lots"})


@pytest.mark.parametrize(("keys", "said"), [
    ("clé", "key 1 has U+00E9 at character 3"),
    ("good-key, ключ", "key 2 has U+043A at character 1"),
    ("two words", "key 1 has U+0020 at character 4"),
    ("tab\tkey", "key 1 has U+0009 at character 4"),
], ids=["latin-1", "cyrillic", "space", "control"])
def test_an_api_key_that_is_not_printable_ascii_is_refused_naming_the_variable(make_app, keys, said):
    """WSGI reads the X-API-Key header as latin-1 and curl sends UTF-8, so such a key could never match
    (403 for every write); the service refuses it when it reads its settings instead."""
    from jetpredict.api.config import load_settings
    from jetpredict.models.errors import InputError

    with pytest.raises(InputError) as err:
        load_settings({"API_KEYS": keys})
    assert err.value.field == "API_KEYS" and err.value.message.startswith("JETPREDICT_API_KEYS: ")
    assert said in err.value.message and "visible characters '!' to '~'" in err.value.message
    with pytest.raises(InputError, match="JETPREDICT_API_KEYS: "):
        make_app(API_KEYS=keys)


def test_serve_refuses_a_non_ascii_api_key_in_one_line(monkeypatch, capsys, tmp_path):
    from jetpredict.cli import main

    monkeypatch.setenv("JETPREDICT_API_KEYS", "ключ")
    with busy_port() as port:  # were the key let through, serve would stop at the busy port (exit 1)
        assert main(["serve", "--port", str(port), "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jetpredict serve: error: JETPREDICT_API_KEYS: ") and err.count("\n") == 1
    assert "ключ" not in err  # a key is a secret: the message names where it breaks the rule, not the key


def test_a_key_of_visible_ascii_punctuation_is_accepted(make_app):
    key = "!#$%&'*+-.^_`|~\"/:;<=>?@[]{}()0aZ"
    client = make_app(API_KEYS=key).test_client()
    assert client.delete("/v1/workloads/x", headers={"X-API-Key": key}).status_code == 404


def test_openapi_says_reads_are_public(client):
    assert "reads are public" in client.get("/openapi.json").json["info"]["description"]


def test_database_password_is_masked():
    from jetpredict.api.database_url import masked_url

    shown = masked_url("postgresql://u:s3cret@db:5432/jp?password=qp-secret&sslmode=require")
    assert "s3cret" not in shown and "qp-secret" not in shown and "sslmode=require" in shown


@pytest.mark.parametrize(("url", "said"), [
    ("notaurl", "is not one jetpredict can use: give sqlite:///PATH or postgresql://"),
    ("foo://x", "is not one jetpredict can use"),
    ("mysql://u@h/db", "needs a driver that is not installed: No module named 'MySQLdb'"),
    ("postgresql://u:s3cret@db/jp", "'postgresql+psycopg://u:***@db/jp' (--database-url, JETPREDICT_DATABASE_URL) "
                                    "needs a driver that is not installed"),
])
def test_a_database_url_without_a_driver_or_a_form_is_refused_in_words(monkeypatch, capsys, url, said):
    """``serve`` exits 2 naming the setting (a traceback from SQLAlchemy before); a PostgreSQL URL whose
    driver is missing names the extra, psycopg 3, not the psycopg2 the project never declared."""
    import sys

    from jetpredict.cli import main

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as on a base install: neither driver imports
    monkeypatch.setitem(sys.modules, "psycopg2", None)
    assert main(["serve", "--port", "1", "--database-url", url]) == 2
    err = capsys.readouterr().err
    assert said in err and "(--database-url, JETPREDICT_DATABASE_URL)" in err and "s3cret" not in err
    assert ("pip install 'jetpredict[postgres]'" in err) == url.startswith("postgresql")


@pytest.mark.parametrize("path", ["/v1/predictions", "/v1/profiles"])
def test_a_row_of_thousands_of_unknown_keys_is_422_naming_a_bounded_number(client, auth, monkeypatch, path):
    """16,000 unknown keys in one row took 12 s (each looked up against all reported before, and matched
    against the known columns) and answered 2.2 MB: a fixed number are named, the rest counted."""
    from jetpredict.models import profile_rows

    looked_up = []
    real = profile_rows.difflib.get_close_matches
    monkeypatch.setattr(profile_rows.difflib, "get_close_matches",
                        lambda word, *a, **k: looked_up.append(word) or real(word, *a, **k))
    row = {**published_rows()[0], **{f"x{i}": 1 for i in range(5000)}}
    body = {"rows": [row]} if path == "/v1/profiles" else {"workload": {"rows": [row]}, "modes": "presets"}
    r = client.post(path, json=body, headers=auth if path == "/v1/profiles" else {})
    assert r.status_code == 422, r.json
    prefix = "rows" if path == "/v1/profiles" else "workload.rows"
    errors = r.json["errors"]
    assert len(errors) == profile_rows.MAX_UNKNOWN_NAMED + 1 and f"{prefix}.0.x0" in errors
    assert errors[prefix] == [f"and {5000 - profile_rows.MAX_UNKNOWN_NAMED} more unknown column(s), not named here"]
    assert r.json["message"].startswith(f"unknown column(s) {prefix}.0.x0, ") and \
        f"{5000 - profile_rows.MAX_UNKNOWN_NAMED} more" in r.json["message"]
    assert len(looked_up) == profile_rows.MAX_UNKNOWN_NAMED


def test_sqlite_is_opened_with_the_pragmas_api_sqlite_setup_states(tmp_path):
    """WAL (readers beside the writer), synchronous FULL (a 201 is on disk), foreign keys on, and a busy
    timeout so that workers wait for each other's locks rather than fail."""
    from jetpredict.api.app import create_app

    app = create_app({"DATA_DIR": tmp_path, "API_KEYS": API_KEY, "DATABASE_URL": "", **NO_RATE_LIMITS})
    storage = app.extensions["jetpredict"].storage
    try:
        with storage.engine.connect() as conn:
            said = {pragma: conn.exec_driver_sql(f"PRAGMA {pragma}").scalar()
                    for pragma in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")}
    finally:
        storage.dispose()
    assert said == {"journal_mode": "wal", "synchronous": 2, "foreign_keys": 1, "busy_timeout": 30000}
