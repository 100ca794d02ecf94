"""Short schemathesis run (Python API) against the WSGI app: no 5xx, every response matches /openapi.json.

Every operation gets schema-valid and schema-invalid requests. The long form (>= 500 requests against a
live gunicorn server, all schemathesis phases) is ``bench/api_fuzz.py``.
"""

from __future__ import annotations

import pytest
import schemathesis
from api_fixtures import API_KEY, published_rows
from hypothesis import HealthCheck, given, settings
from jetpredict.api.app import create_app
from schemathesis import GenerationMode
from schemathesis.specs.openapi import checks as oas_checks

CHECKS = [schemathesis.checks.not_a_server_error, oas_checks.status_code_conformance,
          oas_checks.content_type_conformance, oas_checks.response_schema_conformance,
          oas_checks.response_headers_conformance]
EXAMPLES = {GenerationMode.POSITIVE: 30, GenerationMode.NEGATIVE: 12}
OPERATIONS = ("GET /healthz", "GET /metrics", "GET /v1/devices", "GET /v1/devices/{device}/power-modes",
              "POST /v1/predictions", "POST /v1/recommendations", "POST /v1/fleet-plans", "POST /v1/profiles",
              "GET /v1/workloads", "GET /v1/workloads/{workload_id}", "DELETE /v1/workloads/{workload_id}")
requests_made: dict[str, int] = {}


@pytest.fixture(scope="module")
def fuzz_schema(tmp_path_factory):
    app = create_app({"DATA_DIR": tmp_path_factory.mktemp("fuzz"), "API_KEYS": API_KEY})
    r = app.test_client().post("/v1/profiles", json={"rows": published_rows()}, headers={"X-API-Key": API_KEY})
    assert r.status_code == 201  # "my-resnet": the id the OpenAPI examples use
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    labels = {f"{op.method.upper()} {op.path}": op for op in (r.ok() for r in schema.get_all_operations())}
    assert set(labels) == set(OPERATIONS), "a route is missing from /openapi.json or from this test"
    return labels


NO_INPUT = {"GET /healthz", "GET /metrics", "GET /v1/devices",  # nothing that can be made schema-invalid
            "GET /v1/workloads/{workload_id}", "DELETE /v1/workloads/{workload_id}"}
CASES = [(label, mode) for label in OPERATIONS for mode in EXAMPLES
         if not (mode is GenerationMode.NEGATIVE and label in NO_INPUT)]


@pytest.mark.parametrize("label, mode", CASES, ids=[f"{lbl} {m.value}" for lbl, m in CASES])
def test_fuzz_operation(fuzz_schema, label, mode):
    operation = fuzz_schema[label]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES[mode], deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def fuzz(case):
        requests_made[label] = requests_made.get(label, 0) + 1
        case.call_and_validate(headers={"X-API-Key": API_KEY}, checks=CHECKS)

    fuzz()
    assert requests_made[label] >= 1
