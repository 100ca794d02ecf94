"""The per-request work of a cheap prediction (presets of a stored workload) is trimmed, never its behaviour:
repeated bodies are loaded once, the doc-only decorators add no layer, metric children and the access log's
time text are made once, and every answer still carries its headers, metrics and log line."""

from __future__ import annotations

import logging
import time

import pytest
from api_fixtures import API_KEY, published_rows

PRESETS = {"workload": {"id": "my-resnet"}, "modes": "presets"}


def test_a_repeated_body_is_loaded_once_and_each_view_gets_its_own_copy(app):
    from jetpredict.api.query_schemas import PredictionRequestSchema
    from jetpredict.api.routes.common import RepeatedBodyParser
    from marshmallow import ValidationError
    from werkzeug.exceptions import UnprocessableEntity

    parser, schema = RepeatedBodyParser(size=2), PredictionRequestSchema()
    body = b'{"workload": {"id": "w"}, "modes": [{"cpu_cores": 4, "cpu_mhz": 1200, "gpu_mhz": 670, "emc_mhz": 1333}]}'

    def parse(data: bytes) -> dict:
        with app.test_request_context("/", method="POST", data=data, content_type="application/json"):
            return parser.parse(schema, location="json")

    first = parse(body)
    first["workload"]["id"] = "changed by a view"
    first["modes"][0]["cpu_cores"] = 99
    second = parse(body)
    assert second == schema.load({"workload": {"id": "w"}, "modes": [
        {"cpu_cores": 4, "cpu_mhz": 1200, "gpu_mhz": 670, "emc_mhz": 1333}]})
    assert len(parser._loaded) == 1
    for _ in range(2):  # a bad body is refused every time and never kept
        with pytest.raises((UnprocessableEntity, ValidationError)):
            parse(b'{"workload": {"id": "w"}, "confidence": "0.9"}')
    assert len(parser._loaded) == 1
    for i in range(3):  # at most `size` bodies are kept
        parse(b'{"workload": {"id": "w%d"}}' % i)
    assert len(parser._loaded) == 2


def test_presets_answers_keep_headers_metrics_and_the_log_line(make_app, caplog):
    app = make_app(ACCESS_LOG="on")
    client = app.test_client()
    assert client.post("/v1/profiles", json={"rows": published_rows()}, headers={"X-API-Key": API_KEY}
                       ).status_code == 201
    logger = logging.getLogger("jetpredict.access")
    logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.INFO, logger="jetpredict.access"):
            answers = [client.post("/v1/predictions", json=PRESETS) for _ in range(3)]
            bad = client.post("/v1/predictions", json={**PRESETS, "confidence": "0.9"})
    finally:
        logger.removeHandler(caplog.handler)
    assert [r.status_code for r in answers] == [200] * 3 and answers[0].data == answers[2].data
    assert bad.status_code == 422 and bad.headers["Cache-Control"] == "no-store"
    for r in (*answers, bad):
        assert r.headers["X-Content-Type-Options"] == "nosniff" and r.headers["X-Frame-Options"] == "DENY"
        assert "default-src 'self'" in r.headers["Content-Security-Policy"]
    lines = [r.getMessage() for r in caplog.records if r.name == "jetpredict.access"]
    assert sum('"POST /v1/predictions" 200' in line for line in lines) == 3
    assert sum('"POST /v1/predictions" 422' in line for line in lines) == 1
    text = client.get("/metrics").get_data(as_text=True)
    assert 'jetpredict_http_requests_total{method="POST",route="/v1/predictions",status="200"} 3.0' in text
    assert 'jetpredict_http_requests_total{method="POST",route="/v1/predictions",status="422"} 1.0' in text
    assert 'jetpredict_http_request_duration_seconds_count{method="POST",route="/v1/predictions"} 4.0' in text
    count = answers[0].json["count"]
    assert f'jetpredict_predictions_total{{endpoint="predictions"}} {3.0 * count}' in text


def test_the_doc_only_responses_are_still_documented(client):
    paths = client.get("/openapi.json").json["paths"]
    predictions = paths["/v1/predictions"]["post"]["responses"]
    assert {"200", "404", "406", "413", "422", "503"} <= set(predictions)
    assert {"application/json", "text/csv", "application/vnd.apache.arrow.stream"} <= set(predictions["200"]["content"])
    for path in ("/v1/recommendations", "/v1/fleet-plans"):
        assert {"200", "404", "413", "422", "503"} <= set(paths[path]["post"]["responses"])


def test_the_access_log_time_text_is_the_standard_one():
    from jetpredict.api.app import AccessLogFormatter

    ours, standard = AccessLogFormatter(), logging.Formatter("%(asctime)s %(message)s")
    now = time.time()
    for created in (now, now + 0.25, now + 1.5, now + 86_400):
        record = logging.LogRecord("jetpredict.access", logging.INFO, "", 0, "line %d", (7,), None)
        record.created, record.msecs = created, (created - int(created)) * 1000
        assert ours.format(record) == standard.format(record)
