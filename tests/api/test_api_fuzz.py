"""Short schemathesis run (Python API) against the WSGI app: no 5xx, every response matches /openapi.json,
and no schema-valid request is refused (schemathesis's own ``positive_data_acceptance``: a 400 or 422 to a
request the document allows fails). The document's rules beyond JSON Schema (``x-jetpredict-rules``) are
applied to the generated bodies by the hook in ``documented_rules``.

Every operation gets schema-valid and schema-invalid requests, with and without the API key, and a short
stateful run follows the OpenAPI links (upload -> read / delete / predict the stored workload). The long
form (a live gunicorn server, all schemathesis phases) is ``bench/api_fuzz.py``.
"""

from __future__ import annotations

import documented_rules  # noqa: F401  (registers the map_case hook)
import pytest
import schemathesis
from api_fixtures import API_KEY, NO_RATE_LIMITS, published_rows
from hypothesis import HealthCheck, given, settings
from jetpredict.api.app import create_app
from schemathesis import GenerationMode
from schemathesis.specs.openapi import checks as oas_checks

pytestmark = pytest.mark.slow  # starts processes or servers (see README: the fast pass)

CHECKS = [schemathesis.checks.not_a_server_error, oas_checks.status_code_conformance,
          oas_checks.content_type_conformance, oas_checks.response_schema_conformance,
          oas_checks.response_headers_conformance, oas_checks.positive_data_acceptance]
EXAMPLES = {GenerationMode.POSITIVE: 25, GenerationMode.NEGATIVE: 10}
#: At least these must be in /openapi.json (other routes are fuzzed too when they appear).
OPERATIONS = ("GET /healthz", "GET /metrics", "GET /v1/devices", "GET /v1/devices/{device}/power-modes",
              "POST /v1/predictions", "POST /v1/recommendations", "POST /v1/fleet-plans", "POST /v1/profiles",
              "GET /v1/workloads", "GET /v1/workloads/{workload_id}", "DELETE /v1/workloads/{workload_id}")
#: schemathesis asks for gzip, and its WSGI transport hands the compressed bytes to the checks undecoded
#: (an HTTP client decodes them; bench/api_fuzz.py fuzzes a live server with gzip on): ask for identity.
WSGI_HEADERS = {"Accept-Encoding": "identity"}


def _app(tmp_path_factory):
    app = create_app({"DATA_DIR": tmp_path_factory.mktemp("fuzz"), "API_KEYS": API_KEY, **NO_RATE_LIMITS})
    r = app.test_client().post("/v1/profiles", json={"rows": published_rows()}, headers={"X-API-Key": API_KEY})
    assert r.status_code == 201  # "my-resnet": the id the OpenAPI examples use
    return app


def _reset_store(app) -> None:
    """The store as :func:`_app` left it: the workload "my-resnet" and no other."""
    workloads = app.extensions["jetpredict"].workloads
    _, stored = workloads.storage.list_workloads(10_000, 0)
    for record in stored:
        if record.id != "my-resnet":
            workloads.delete(record.id)
    if workloads.storage.revision("my-resnet") is None:
        r = app.test_client().post("/v1/profiles", json={"rows": published_rows()}, headers={"X-API-Key": API_KEY})
        assert r.status_code == 201, r.get_json()


@pytest.fixture(scope="module")
def fuzz_app(tmp_path_factory):
    return _app(tmp_path_factory)


@pytest.fixture(scope="module")
def fuzz_schema(fuzz_app):
    schema = schemathesis.openapi.from_wsgi("/openapi.json", fuzz_app)
    labels = {f"{op.method.upper()} {op.path}": op for op in (r.ok() for r in schema.get_all_operations())}
    assert set(OPERATIONS) <= set(labels), "a route is missing from /openapi.json"
    return labels


NO_INPUT = {"GET /healthz", "GET /metrics", "GET /v1/devices",  # nothing that can be made schema-invalid
            "GET /v1/workloads/{workload_id}", "DELETE /v1/workloads/{workload_id}"}
CASES = [(label, mode, key) for label in OPERATIONS for mode in EXAMPLES for key in (True, False)
         if not (mode is GenerationMode.NEGATIVE and label in NO_INPUT)
         and (key or label.startswith(("POST /v1/profiles", "DELETE")))]


@pytest.mark.parametrize("label, mode, with_key", CASES,
                         ids=[f"{lbl} {m.value}{'' if k else ' no-key'}" for lbl, m, k in CASES])
def test_fuzz_operation(fuzz_schema, label, mode, with_key):
    operation = fuzz_schema[label]
    headers = {**WSGI_HEADERS, "X-API-Key": API_KEY} if with_key else dict(WSGI_HEADERS)

    made = []  # this case's requests (a module-wide count would already hold the label's earlier cases)

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES[mode], deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def fuzz(case):
        made.append(case)
        if not with_key:
            case.headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "x-api-key"}
        case.call_and_validate(headers=headers, checks=CHECKS)

    fuzz()
    assert made


@pytest.mark.parametrize("with_key", [True, False], ids=["key", "no-key"])
def test_fuzz_stateful(tmp_path_factory, with_key):
    """Sequences that follow the OpenAPI links: upload, then read, predict or delete what was stored."""
    app = _app(tmp_path_factory)
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    base = schema.as_state_machine()
    steps: list[str] = []

    class Machine(base):
        def teardown(self):
            # Every sequence starts from the same store: hypothesis replays sequences and needs the same
            # links (which follow what was stored) each time, whatever earlier sequences stored or deleted.
            _reset_store(app)
            super().teardown()

        def get_call_kwargs(self, case):
            return {"headers": {**WSGI_HEADERS, "X-API-Key": API_KEY} if with_key else dict(WSGI_HEADERS)}

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            steps.append(f"{case.method} {case.path} {response.status_code}")
            case.validate_response(response, checks=CHECKS)

    settings_ = settings(max_examples=12, stateful_step_count=6, deadline=None, derandomize=True,
                         database=None, suppress_health_check=list(HealthCheck))
    schemathesis.generation.stateful.run_state_machine_as_test(Machine, settings=settings_)
    assert any(s.startswith("POST /v1/profiles") for s in steps)
    if with_key:  # some sequence went past an upload to a linked operation
        assert any(s.startswith(("GET /v1/workloads/", "DELETE /v1/workloads/")) for s in steps), steps[:20]
