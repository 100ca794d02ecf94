"""The mode-chooser page at ``/``, ``/docs``, and the built-in workloads the page predicts
(``/v1/reference-workloads``), through the Flask test client (no browser; see test_page_browser*.py)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from jetpredict.api.routes.page import STATIC_DIR


class _Refs(HTMLParser):
    """Every src/href of an HTML page, inline scripts and style attributes/elements."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.inline_scripts = 0
        self.inline_styles = 0
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("src", "href"):
            if attrs.get(key):
                self.refs.append(attrs[key])
        if "style" in attrs or tag == "style":
            self.inline_styles += 1
        self._in_script = tag == "script" and not attrs.get("src")

    def handle_data(self, data):
        if self._in_script and data.strip():
            self.inline_scripts += 1

    def handle_endtag(self, tag):
        self._in_script = False


def _refs(html: str) -> _Refs:
    parser = _Refs()
    parser.feed(html)
    return parser


#: A static import of a page module: a sibling by relative path, no query (a query would also load a second
#: instance of a module, as the browser keys modules by URL, with state of its own).
_IMPORT = re.compile(r'^(?:import|export)\b[^;]*?\bfrom\s+"([^"]+)";', re.MULTILINE)


def _page_modules() -> list[str]:
    """The page's script modules, by file name: index.html's module script and every module it imports,
    followed import by import (each file once)."""
    html = (STATIC_DIR / "index.html").read_text()
    entries = re.findall(r'<script type="module" src="/assets/([\w-]+\.js)"></script>', html)
    assert entries == ["page.js"], entries
    seen, todo = [], list(entries)
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.append(name)
        for spec in _IMPORT.findall((STATIC_DIR / name).read_text()):
            assert re.fullmatch(r"\./[\w-]+\.js", spec), f"{name} imports {spec!r}: not a sibling module"
            todo.append(spec[2:])
    return seen


def _page_script(client) -> str:
    """The text of every page module as the service serves it, as one."""
    return "\n".join(client.get(f"/assets/{name}").get_data(as_text=True) for name in _page_modules())


@pytest.mark.parametrize("path, title", [("/", "power mode"), ("/docs", "API docs")])
def test_pages_load_only_files_of_this_service(client, path, title):
    """No CDN, no other host, no inline script or style: works offline and under a strict CSP."""
    response = client.get(path)
    assert response.status_code == 200 and response.mimetype == "text/html"
    html = response.get_data(as_text=True)
    assert title in html
    refs = _refs(html)
    assert refs.inline_scripts == 0 and refs.inline_styles == 0
    assert refs.refs, "the page loads its scripts and styles"
    for ref in refs.refs:
        assert not re.match(r"^([a-z]+:)?//", ref), f"{path} references another host: {ref}"
        asset = client.get(ref)
        assert asset.status_code == 200, ref
        assert asset.content_length or asset.get_data(), ref


def test_static_files_hold_no_external_urls_to_load():
    """The page's own JS/CSS fetch only relative API paths."""
    for name in (*_page_modules(), "page.css", "docs.js", "index.html", "docs.html"):
        text = (STATIC_DIR / name).read_text()
        assert not re.search(r"(src|href|url|fetch)\s*[(=:]\s*[\"']?(https?:)?//", text), name


def test_every_page_module_is_served_as_javascript_and_revalidated(client):
    """The page is native ES modules (index.html loads page.js with type="module"; page.js imports the
    others by relative path, no version query). A browser runs a module only with a JavaScript MIME type
    (nosniff holds too), and each module is served "no-cache" with an ETag: every page load revalidates
    each one, so a new page.js never runs against a stale sibling from the cache. Every .js file of the
    page is one of them (docs.js is /docs's)."""
    modules = _page_modules()
    on_disk = {p.name for p in STATIC_DIR.glob("*.js")} - {"docs.js"}
    assert set(modules) == on_disk, "a module nothing imports, or an import of a missing file"
    assert len(modules) > 1 and "page.js" in modules
    for name in modules:
        response = client.get(f"/assets/{name}")
        assert response.status_code == 200, name
        assert response.mimetype in ("text/javascript", "application/javascript"), (name, response.mimetype)
        assert response.headers.get("X-Content-Type-Options") == "nosniff"
        assert "no-cache" in response.headers.get("Cache-Control", ""), (name, response.headers)
        etag = response.headers.get("ETag")
        assert etag, name
        again = client.get(f"/assets/{name}", headers={"If-None-Match": etag})
        assert again.status_code == 304, name  # revalidation is cheap: no body when unchanged


def test_docs_point_swagger_at_our_openapi_document(client):
    init = client.get("/assets/docs.js").get_data(as_text=True)
    assert '"/openapi.json"' in init and "validatorUrl: null" in init
    spec = client.get("/openapi.json").get_json()
    assert "/v1/reference-workloads" in spec["paths"]
    assert "/" not in spec["paths"] and "/docs" not in spec["paths"]  # page routes are not API routes


def test_vendored_libraries_keep_their_licences():
    vendor = STATIC_DIR / "vendor"
    for folder in ("uplot", "swagger-ui"):
        assert (vendor / folder / "LICENSE").is_file()
    assert "uPlot" in (vendor / "uplot" / "uPlot.iife.min.js").read_text()
    assert "SwaggerUIBundle" in (vendor / "swagger-ui" / "swagger-ui-bundle.js").read_text()
    readme = (vendor / "README.md").read_text()
    from jetpredict.api.routes.page import VENDORED

    for package, version in VENDORED.items():
        assert f"`{package}` | {version}" in readme


def test_reference_workloads_list_and_rows(client):
    listing = client.get("/v1/reference-workloads?device=agx-xavier").get_json()["workloads"]
    kinds = {(w["workload"], w["source"]) for w in listing}
    assert ("resnet18-cifar10", "published") in kinds and ("lenet5-mnist", "simulated") in kinds
    assert [w["source"] for w in listing] == sorted((w["source"] for w in listing),
                                                    key=("published", "measured", "simulated").index)
    published = next(w for w in listing if w["source"] == "published")
    assert "POMACS" in published["citation"] and published["modes"] == 10

    detail = client.get("/v1/reference-workloads/agx-xavier/resnet18-cifar10").get_json()
    assert detail["source"] == "published" and detail["modes"] == len(detail["rows"]) == 10
    row = detail["rows"][0]
    assert row["device"] == "agx-xavier" and row["workload"] == "resnet18-cifar10" and row["epoch_time_s"] > 0
    simulated = client.get("/v1/reference-workloads/agx-xavier/resnet18-cifar10?source=simulated").get_json()
    assert simulated["source"] == "simulated" and simulated["modes"] > 100

    everywhere = client.get("/v1/reference-workloads").get_json()["workloads"]
    assert {w["device"] for w in everywhere} == {"agx-xavier", "xavier-nx", "nano", "orin-agx", "orin-nx",
                                                 "orin-nano"}


def test_reference_workload_errors_name_the_field(client):
    r = client.get("/v1/reference-workloads/agx-xavier/no-such-net")
    assert r.status_code == 404
    body = r.get_json()
    assert "workload" in body["errors"] and "resnet18-cifar10" in body["message"]
    r = client.get("/v1/reference-workloads/tpu-v9/resnet18-cifar10")
    assert r.status_code == 404 and "device" in r.get_json()["errors"]
    r = client.get("/v1/reference-workloads?source=guessed")
    assert r.status_code == 422 and "query.source" in r.get_json()["errors"]


def test_built_in_rows_predict_as_an_inline_workload(client):
    """The page's path for a built-in workload: fetch its rows, send them inline, get all modes."""
    rows = client.get("/v1/reference-workloads/agx-xavier/resnet18-cifar10").get_json()["rows"]
    body = {"device": "agx-xavier", "workload": {"rows": rows}, "objective": "min-time",
            "constraints": {"max_power_w": 15}}
    rec = client.post("/v1/recommendations", json=body)
    assert rec.status_code == 200, rec.get_json()
    answer = rec.get_json()
    assert answer["best"]["avg_power_w"] <= 15 and answer["reference_source"] == "published"
    assert answer["profiled_modes"] == 10
    csv = client.post("/v1/predictions", json={"device": "agx-xavier", "workload": {"rows": rows}, "modes": "all"},
                      headers={"Accept": "text/csv"})
    assert csv.status_code == 200 and csv.mimetype == "text/csv"
    lines = csv.get_data(as_text=True).splitlines()
    assert len(lines) == 1 + 29232 and lines[0].startswith("mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz")


def test_security_headers_fit_the_pages(client):
    page = client.get("/").headers.get("Content-Security-Policy", "")
    docs = client.get("/docs").headers.get("Content-Security-Policy", "")
    assert "default-src 'self'" in page and "unsafe-inline" not in page and "data:" not in page
    assert "default-src 'self'" in docs and "img-src 'self' data:" in docs and "unsafe-inline" not in docs


@pytest.mark.slow
@pytest.mark.parametrize("label", ["GET /v1/reference-workloads", "GET /v1/reference-workloads/{device}/{workload}"])
def test_reference_routes_fuzzed_answer_as_documented(app, label):
    """Any request, valid or not: no 500, and every answer matches the OpenAPI document."""
    import schemathesis
    from hypothesis import HealthCheck, given, settings
    from schemathesis import GenerationMode
    from schemathesis.specs.openapi import checks as oas_checks

    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    operation = next(op for op in (r.ok() for r in schema.get_all_operations())
                     if f"{op.method.upper()} {op.path}" == label)
    checks = [schemathesis.checks.not_a_server_error, oas_checks.status_code_conformance,
              oas_checks.content_type_conformance, oas_checks.response_schema_conformance]
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=15, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def fuzz(case):
            case.call_and_validate(checks=checks)

        fuzz()


def test_workloads_are_searchable_beyond_the_first_page_limit(app, client):
    """The page's workload search: ``GET /v1/workloads?search=`` finds ids past the first 1,000."""
    from api_fixtures import published_rows
    from jetpredict.api.storage import WorkloadWrite
    from jetpredict.api.workloads import fit_summary

    svc = app.extensions["jetpredict"]
    row = published_rows(n=1)[0]
    # The 1,003 stored with the fit summary an upload of their one row stores (a listing refits stale fits
    # only: 1,000 refits were this test's whole cost); the one past the page with a stale fit ({}), refitted
    # by the search that lists it.
    fit = fit_summary(svc.workloads.inline([row]).model)
    past = "zeta_50%-Model"
    svc.storage.add_uploads([WorkloadWrite(workload_id=i, device="agx-xavier", rows=[{**row, "workload": i}],
                                           expected_revision=0, fit={} if i == past else fit)
                             for i in [*(f"net-{n:04d}" for n in range(1003)), past]])

    first = client.get("/v1/workloads?limit=1000").get_json()
    assert first["total"] == 1004 and len(first["workloads"]) == 1000
    assert "zeta_50%-Model" not in {w["id"] for w in first["workloads"]}  # sorted by id: past the page
    found = client.get("/v1/workloads", query_string={"search": "MODEL"}).get_json()
    assert found["total"] == 1 and [w["id"] for w in found["workloads"]] == ["zeta_50%-Model"]
    assert {k: found["workloads"][0][k] for k in fit} == fit  # its stale fit refitted on listing
    # '%' and '_' are the characters themselves, not LIKE wildcards
    assert client.get("/v1/workloads", query_string={"search": "50%"}).get_json()["total"] == 1
    assert client.get("/v1/workloads", query_string={"search": "t-1_0"}).get_json()["total"] == 0
    paged = client.get("/v1/workloads", query_string={"search": "net-100", "limit": 2, "offset": 2}).get_json()
    assert paged["total"] == 3 and [w["id"] for w in paged["workloads"]] == ["net-1002"]
    assert client.get("/v1/workloads", query_string={"search": ""}).get_json()["total"] == 1004


def test_workload_search_ignores_case_beyond_ascii_on_every_database(app, client):
    """"Case-insensitive" holds for every letter, as PostgreSQL's lower() folds them (SQLite's folds ASCII)."""
    from api_fixtures import published_rows
    from jetpredict.api.storage import WorkloadWrite

    row = published_rows(n=1)[0]
    app.extensions["jetpredict"].storage.add_uploads([
        WorkloadWrite(workload_id=i, device="agx-xavier", rows=[{**row, "workload": i}], expected_revision=0,
                      fit={}) for i in ("ÜberNet", "ΣΊΣΥΦΟΣ-net", "plain")])
    for search, found in [("übernet", ["ÜberNet"]), ("ÜBERNET", ["ÜberNet"]), ("berNET", ["ÜberNet"]),
                          ("σίσυφος", ["ΣΊΣΥΦΟΣ-net"]), ("NET", ["ÜberNet", "ΣΊΣΥΦΟΣ-net"]), ("ü", ["ÜberNet"]),
                          ("ubernet", [])]:
        answer = client.get("/v1/workloads", query_string={"search": search}).get_json()
        assert sorted(w["id"] for w in answer["workloads"]) == sorted(found), search

@pytest.mark.parametrize("search", ["a\x00b", "a/b", "x" * 201])
def test_workload_search_refuses_text_no_id_can_hold(client, search):
    r = client.get("/v1/workloads", query_string={"search": search})
    assert r.status_code == 422
    assert "query.search" in r.get_json()["errors"], r.get_json()


def test_page_has_the_controls_and_restates_no_api_limit(client):
    """Coverage, epochs, workload search and progress are on the page; the allowed coverage and epochs come
    from /openapi.json at run time, so no page module holds any of the API's limits."""
    from jetpredict.predictor.limits import DEFAULT_CONFIDENCE, MAX_CONFIDENCE, MAX_EPOCHS, MIN_CONFIDENCE

    html = client.get("/").get_data(as_text=True)
    for element in ('id="confidence"', 'id="epochs"', 'id="workload-search"', 'id="progress"', 'id="presets"'):
        assert element in html
    script = _page_script(client)
    assert "/openapi.json" in script
    for value in (MAX_EPOCHS, MAX_CONFIDENCE, f"{MAX_EPOCHS:,}"):
        assert str(value) not in script, value
    spec = client.get("/openapi.json").get_json()["components"]["schemas"]["RecommendationRequest"]["properties"]
    assert spec["confidence"]["minimum"] == MIN_CONFIDENCE and spec["confidence"]["default"] == DEFAULT_CONFIDENCE
    assert spec["epochs"]["maximum"] == MAX_EPOCHS
    search = client.get("/openapi.json").get_json()["paths"]["/v1/workloads"]["get"]["parameters"]
    assert any(p["name"] == "search" for p in search)


def test_page_lists_no_objective_of_its_own(client):
    """The objectives offered are the OpenAPI document's enum (limits.js, run in Chromium by
    test_page_browser.py): the page's objective list holds no option, so one the API adds is not missed."""
    html = client.get("/").get_data(as_text=True)
    select = re.search(r'<select id="objective">(.*?)</select>', html, re.DOTALL)
    assert select is not None and "<option" not in select.group(1), select
    assert "props.objective.enum" in (STATIC_DIR / "limits.js").read_text()


def test_all_mode_answer_states_the_provenance_the_page_shows_without_a_best_mode(client, stored):
    """The page's provenance list: with no mode under the cap (``best`` null) it still says whether the
    predictions are cross-device and where the power comes from, from the all-mode answer (columns layout:
    ``cross_device`` and ``power_source`` once) and the recommendation's ``rows_device`` vs ``device``."""
    workload = {"id": stored["workload_id"]}
    for device, cross in (("agx-xavier", False), ("xavier-nx", True)):
        all_modes = client.post("/v1/predictions", json={"device": device, "workload": workload, "modes": "all",
                                                         "layout": "columns"})
        assert all_modes.status_code == 200, all_modes.get_json()
        answer = all_modes.get_json()
        assert answer["cross_device"] is cross and answer["power_source"] in ("workload", "reference")
        assert answer["model_version"] and answer["reference_source"] and answer["profiled_modes"] == 4
        assert (answer["rows_device"] != answer["device"]) is cross and answer["device"] == device
        assert "cross_device" not in answer["columns"]  # stated once, not per mode
        tiny = min(answer["columns"]["avg_power_w"]) / 2
        rec = client.post("/v1/recommendations", json={"device": device, "workload": workload,
                                                       "objective": "min-energy", "constraints": {"max_power_w": tiny}})
        assert rec.status_code == 200, rec.get_json()
        body = rec.get_json()
        assert body["best"] is None and body["feasible"] is False
        assert (body["rows_device"] != body["device"]) is cross


def test_page_script_guards_uploads_searches_and_provenance():
    """One upload at a time (button disabled, sequence number: upload.js), searches aborted and sequenced
    (workloads.js), a bad epochs number frees the controls (recommend.js), the all-mode answer's provenance
    kept (load.js; see the browser test)."""
    upload = (STATIC_DIR / "upload.js").read_text()
    body = upload[upload.index("async function upload()"):]
    assert "uploadSeq" in body and 'button.disabled = true' in body and "button.disabled = false" in body
    workloads = (STATIC_DIR / "workloads.js").read_text()
    search = workloads[workloads.index("async function searchWorkloads()"):]
    assert "searchAbort" in search[:600] and "signal: controller.signal" in search[:900]
    recommend = (STATIC_DIR / "recommend.js").read_text()
    schedule = recommend[recommend.index("function scheduleRecommend()"):recommend.index("async function recommend(")]
    assert "setBusy(false)" in schedule
    assert "state.provenance = provenanceOf(all)" in (STATIC_DIR / "load.js").read_text()
    assert "findStored(" in workloads
