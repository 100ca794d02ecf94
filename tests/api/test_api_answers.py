"""Issue 19: answers for every mode in compact forms (columns JSON, CSV, Arrow, gzip), heavy work kept apart
from light work (gate with 503 + Retry-After, answer cache), the keyless inline-row limit, and the minor
hardening items (huge integers, store that cannot write, access log, formula cells in CSV)."""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
import threading

import pytest
from api_fixtures import API_KEY, HOLD_S, published_rows
from api_fixtures import gate_held as _gate_held
from jetpredict.api.answers import GZIP_MIN_BYTES

ALL = {"workload": {"id": "my-resnet"}, "modes": "all"}
ARROW = "application/vnd.apache.arrow.stream"


def _rows_by_mode(answer: dict) -> dict[str, dict]:
    return {p["mode"]: p for p in answer["predictions"]}


# -- compact forms ------------------------------------------------------------------------------------
def test_columns_layout_holds_the_rows_values_to_six_digits(client, stored):
    rows = client.post("/v1/predictions", json=ALL).json
    cols = client.post("/v1/predictions", json={**ALL, "layout": "columns"}).json
    assert cols["layout"] == "columns" and cols["count"] == rows["count"] == 29232
    assert "predictions" not in cols and cols["confidence"] == pytest.approx(0.9)
    assert cols["cross_device"] is False and cols["power_source"] in ("workload", "reference")
    columns = cols["columns"]
    assert all(len(v) == cols["count"] for v in columns.values())
    assert {"cross_device", "power_source", "confidence"}.isdisjoint(columns)
    for i in (0, 1234, 29231):
        row = rows["predictions"][i]
        assert columns["mode"][i] == row["mode"] and columns["cpu_cores"][i] == row["cpu_cores"]
        for name in ("epoch_time_s", "epoch_time_s_high", "avg_power_w", "epoch_energy_j_low"):
            assert columns[name][i] == pytest.approx(row[name], rel=1e-5)


@pytest.mark.slow
def test_csv_and_arrow_of_every_mode_agree_with_json(client, stored):
    pa = pytest.importorskip("pyarrow")
    rows = _rows_by_mode(client.post("/v1/predictions", json={**ALL, "epochs": 3}).json)
    text = client.post("/v1/predictions", json={**ALL, "epochs": 3}, headers={"Accept": "text/csv"})
    assert text.mimetype == "text/csv" and "Accept" in text.headers["Vary"]
    table = list(csv.DictReader(io.StringIO(text.get_data(as_text=True))))
    assert len(table) == len(rows)
    for line in (table[0], table[-1]):
        assert float(line["time_to_accuracy_s"]) == pytest.approx(rows[line["mode"]]["time_to_accuracy_s"],
                                                                  rel=1e-5)
        assert line["reference_source"] == "published"
        assert (line["device"], line["workload_id"]) == ("agx-xavier", "my-resnet")
    other = client.post("/v1/predictions", json={**ALL, "device": "orin-nano"}, headers={"Accept": "text/csv"})
    first_line = next(csv.DictReader(io.StringIO(other.get_data(as_text=True))))
    assert (first_line["device"], first_line["cross_device"]) == ("orin-nano", "True")
    stream = client.post("/v1/predictions", json={**ALL, "epochs": 3}, headers={"Accept": ARROW})
    assert stream.status_code == 200 and stream.mimetype == ARROW
    arrow = pa.ipc.open_stream(stream.data).read_all()
    assert arrow.num_rows == len(rows)
    import json

    meta = json.loads(arrow.schema.metadata[b"jetpredict"])
    assert meta["device"] == "agx-xavier" and meta["count"] == len(rows) and meta["epochs"] == 3
    first = arrow.slice(0, 1).to_pylist()[0]
    assert first["epoch_energy_j"] == pytest.approx(rows[first["mode"]]["epoch_energy_j"], rel=1e-6)


def test_float_texts_are_repr_at_every_magnitude():
    """The Arrow writer of float cells writes what repr writes (the Python writer's text), inside its range
    and out of it, whole numbers, signed zeros, rounded and full-precision values; NaN/inf are null."""
    pytest.importorskip("pyarrow")
    import numpy as np
    from jetpredict.api.answers import _float_texts, arrow_repr_texts, round_significant

    assert arrow_repr_texts()
    rng = np.random.default_rng(19)
    x = np.sign(rng.standard_normal(60_000)) * 10 ** rng.uniform(-9, 20, 60_000)
    x = np.concatenate([x, round_significant(x), np.round(x[:20_000]), [0.0, -0.0, np.nan, np.inf, -np.inf,
                                                                         1e-4, 9.99999e-5, 1e9, 999999999.5]])
    assert _float_texts(x).to_pylist() == [repr(v) if np.isfinite(v) else None for v in x.tolist()]


@pytest.mark.slow
@pytest.mark.parametrize("accept, layout", [("text/csv", "rows"), ("application/json", "columns")])
def test_the_arrow_writer_writes_the_python_writers_bytes(make_app, stored, monkeypatch, accept, layout):
    """Every-mode CSV and columns answers are written by Arrow when pyarrow is installed; without it, in
    Python: the same bytes either way."""
    pytest.importorskip("pyarrow")
    from jetpredict.api import answers

    body = {**ALL, "epochs": 2, "device": "orin-nx", "layout": layout}
    fast = make_app(ANSWER_CACHE_DISK_MB=0).test_client().post("/v1/predictions", json=body,
                                                                headers={"Accept": accept})
    monkeypatch.setattr(answers, "arrow_repr_texts", lambda: False)
    slow = make_app(ANSWER_CACHE_DISK_MB=0).test_client().post("/v1/predictions", json=body,
                                                                headers={"Accept": accept})
    assert fast.status_code == slow.status_code == 200 and fast.data == slow.data
    assert fast.data.count(b"\n") == 5824 + 1 if accept == "text/csv" else fast.json["count"] == 5824


def test_compact_answers_of_every_mode_fit_in_two_megabytes_gzipped(client, stored):
    pytest.importorskip("pyarrow")
    gz = {"Accept-Encoding": "gzip"}
    for headers, body in (({}, {**ALL, "layout": "columns"}), ({"Accept": "text/csv"}, ALL),
                          ({"Accept": ARROW}, ALL)):
        r = client.post("/v1/predictions", json=body, headers={**headers, **gz})
        assert r.status_code == 200 and len(r.data) <= 2 * 1024 * 1024, (headers, len(r.data))
        if r.headers.get("Content-Encoding") == "gzip":
            plain = client.post("/v1/predictions", json=body, headers=headers).data
            assert gzip.decompress(r.data) == plain
    small = client.post("/v1/predictions", json={"workload": {"id": "my-resnet"}, "modes": "presets"}, headers=gz)
    assert small.status_code == 200 and small.headers.get("Content-Encoding") == "gzip"
    import json

    assert json.loads(gzip.decompress(small.data))["count"] > 0


def test_arrow_without_pyarrow_is_406_naming_the_header(client, stored, monkeypatch):
    from jetpredict.api import answers

    monkeypatch.setattr(answers, "arrow_available", lambda: False)
    r = client.post("/v1/predictions", json=ALL, headers={"Accept": ARROW})
    assert r.status_code == 406 and "Accept" in r.json["errors"] and "pyarrow" in r.json["message"]
    assert client.post("/v1/predictions", json=ALL, headers={"Accept": f"{ARROW}, text/csv;q=0.5"}
                       ).status_code == 406


def test_csv_answers_neutralise_formula_cells(client, stored):
    modes = [{"mode": "=HYPERLINK(\"x\")", "cpu_cores": 4, "cpu_mhz": 1200, "gpu_mhz": 670, "emc_mhz": 1333},
             {"mode": "+1", "cpu_cores": 8, "cpu_mhz": 2265.6, "gpu_mhz": 1377, "emc_mhz": 2133}]
    r = client.post("/v1/predictions", json={"workload": {"id": "my-resnet"}, "modes": modes},
                    headers={"Accept": "text/csv"})
    table = list(csv.DictReader(io.StringIO(r.get_data(as_text=True))))
    assert [t["mode"] for t in table] == ["'=HYPERLINK(\"x\")", "'+1"]
    assert client.post("/v1/predictions", json={"workload": {"id": "my-resnet"}, "modes": modes}
                       ).json["predictions"][0]["mode"] == "=HYPERLINK(\"x\")"  # JSON: as sent


def test_a_csv_cell_holding_a_comma_keeps_its_columns(client, auth):
    rows = [{**row, "workload": "resnet,v2"} for row in published_rows()]
    assert client.post("/v1/profiles", json={"rows": rows}, headers=auth).status_code == 201
    r = client.post("/v1/predictions", json={"workload": {"id": "resnet,v2"}, "modes": "presets"},
                    headers={"Accept": "text/csv"})
    assert r.status_code == 200 and r.mimetype == "text/csv"
    table = list(csv.reader(io.StringIO(r.get_data(as_text=True))))
    assert {len(line) for line in table} == {len(table[0])}
    assert [line[table[0].index("workload_id")] for line in table[1:]] == ["resnet,v2"] * (len(table) - 1)


def test_a_csv_cell_holding_a_semicolon_is_quoted_so_no_formula_follows_it(client, auth):
    # A spreadsheet whose locale separates lists with ";" splits an unquoted cell there, and "=cmd|..." after
    # it opened as a formula: the leading-character escape alone does not reach it.
    workload = "x;=cmd|' -C calc'!A0"
    rows = [{**row, "workload": workload} for row in published_rows()]
    assert client.post("/v1/profiles", json={"rows": rows}, headers=auth).status_code == 201
    modes = [{"mode": "m; @SUM(A1)", "cpu_cores": 8, "cpu_mhz": 2265.6, "gpu_mhz": 1377, "emc_mhz": 2133}]
    r = client.post("/v1/predictions", json={"workload": {"id": workload}, "modes": modes},
                    headers={"Accept": "text/csv"})
    assert r.status_code == 200, r.json
    header, line = r.get_data(as_text=True).splitlines()
    assert f'"{workload}"' in line and '"m; @SUM(A1)"' in line, line
    # Read back as CSV, each cell is what was sent.
    table = list(csv.DictReader(io.StringIO(r.get_data(as_text=True))))
    assert (table[0]["workload_id"], table[0]["mode"]) == (workload, "m; @SUM(A1)")


def test_a_large_fleet_plan_is_gzipped_when_the_client_accepts_it(client, stored):
    body = {"workload": {"id": "my-resnet"}, "deadline_s": 4000, "epochs": 2,
            "clients": [{"id": f"client-{i}", "device": "agx-xavier"} for i in range(40)]}
    plain = client.post("/v1/fleet-plans", json=body)
    assert plain.status_code == 200 and "Content-Encoding" not in plain.headers
    assert len(plain.get_data()) >= GZIP_MIN_BYTES  # large enough to be worth packing
    packed = client.post("/v1/fleet-plans", json=body, headers={"Accept-Encoding": "gzip"})
    assert packed.headers.get("Content-Encoding") == "gzip" and "Accept-Encoding" in packed.headers["Vary"]
    assert json.loads(gzip.decompress(packed.get_data())) == plain.json


# -- heavy work apart ---------------------------------------------------------------------------------
def test_every_mode_answer_is_cached_per_model_and_refreshed_by_a_refit(app, client, auth, stored, monkeypatch):
    from jetpredict.api.routes import predictions

    svc = app.extensions["jetpredict"]
    first = client.post("/v1/predictions", json=ALL, headers={"Accept": "text/csv"}).data
    cached = svc.answers.size_bytes
    assert cached >= len(first)
    computed = []
    real_answer = predictions.prediction_answer
    monkeypatch.setattr(predictions, "prediction_answer", lambda *a, **k: computed.append(1) or real_answer(*a, **k))
    assert client.post("/v1/predictions", json=ALL, headers={"Accept": "text/csv"}).data == first
    assert computed == [] and svc.answers.size_bytes == cached  # served from the cache, not computed again
    more = published_rows(n=6)[4:]
    assert client.post("/v1/profiles", json={"rows": more}, headers=auth).status_code == 201
    refit = client.post("/v1/predictions", json=ALL, headers={"Accept": "text/csv"}).data
    assert refit != first and "6" in refit.decode().splitlines()[1].split(",")


def test_a_full_heavy_gate_answers_503_with_retry_after_and_light_requests_pass(make_app, stored):
    app = make_app(HEAVY_SLOTS=1, HEAVY_QUEUE=0, HEAVY_WAIT_S=HOLD_S)
    client = app.test_client()
    with _gate_held(app):
        busy = client.post("/v1/predictions", json={**ALL, "confidence": 0.8})
        assert busy.status_code == 503 and int(busy.headers["Retry-After"]) >= 1
        assert "service" in busy.json["errors"]
        inline = client.post("/v1/predictions", json={"workload": {"rows": published_rows()}, "modes": "presets"})
        assert inline.status_code == 503
        assert client.get("/v1/devices").status_code == 200
        presets = client.post("/v1/predictions", json={"workload": {"id": "my-resnet"}, "modes": "presets"})
        assert presets.status_code == 200
        assert "jetpredict_heavy_rejected_total 2.0" in client.get("/metrics").get_data(as_text=True)
    assert client.post("/v1/predictions", json={**ALL, "confidence": 0.8}).status_code == 200


def test_fits_over_more_rows_than_the_bound_are_heavy_on_upload_and_on_lookup(make_app, auth):
    app = make_app(HEAVY_SLOTS=1, HEAVY_QUEUE=0, HEAVY_WAIT_S=HOLD_S, HEAVY_FIT_ROWS=5)
    client = app.test_client()
    assert client.post("/v1/profiles", json={"rows": published_rows()}, headers=auth).status_code == 201
    more = {"rows": published_rows(n=6)[4:]}
    retry = {**auth, "Idempotency-Key": "more-rows"}
    with _gate_held(app):
        busy = client.post("/v1/profiles", json=more, headers=retry)  # refits 4 stored + 2 new rows
        assert busy.status_code == 503 and int(busy.headers["Retry-After"]) >= 1
        assert "6 rows" in busy.json["message"] and "service" in busy.json["errors"]
        stored = client.get("/v1/workloads/my-resnet").json
        assert stored["revision"] == 1 and stored["rows_stored"] == 4  # nothing stored
        small = client.post("/v1/profiles", json={"rows": published_rows(as_id="other", n=2)}, headers=auth)
        assert small.status_code == 201  # a fit of 2 rows is light
        assert client.post("/v1/predictions", json={"workload": {"id": "my-resnet"}, "modes": "presets"}
                           ).status_code == 200  # the 4-row model is cached
    done = client.post("/v1/profiles", json=more, headers=retry)
    assert done.status_code == 201 and done.json["revision"] == 2 and done.json["rows_stored"] == 2
    assert client.get("/v1/workloads/my-resnet").json["rows_stored"] == 6

    fresh = make_app(HEAVY_SLOTS=1, HEAVY_QUEUE=0, HEAVY_WAIT_S=HOLD_S, HEAVY_FIT_ROWS=5)  # another worker: nothing cached
    fresh_client = fresh.test_client()
    request = {"workload": {"id": "my-resnet"}, "modes": "presets"}
    with _gate_held(fresh):
        busy = fresh_client.post("/v1/predictions", json=request)  # fitting 6 stored rows is heavy
        assert busy.status_code == 503 and "stored workload 'my-resnet'" in busy.json["message"]
        assert fresh_client.get("/v1/devices").status_code == 200
    assert fresh_client.post("/v1/predictions", json=request).status_code == 200


def test_an_upload_queued_on_the_write_lock_is_admitted_before_it_locks(make_app, auth, monkeypatch):
    from jetpredict.api import workloads

    monkeypatch.setattr(workloads, "_OPTIMISTIC_TRIES", 0)  # every upload takes the locked path
    app = make_app(HEAVY_SLOTS=1, HEAVY_QUEUE=0, HEAVY_WAIT_S=HOLD_S, HEAVY_FIT_ROWS=5)
    client = app.test_client()
    six = {"rows": published_rows(n=6)}
    with _gate_held(app):
        busy = client.post("/v1/profiles", json=six, headers=auth)
        assert busy.status_code == 503 and "6 rows" in busy.json["message"]
        assert client.get("/v1/workloads/my-resnet").status_code == 404  # no placeholder left behind
        assert client.post("/v1/profiles", json={"rows": published_rows(as_id="other", n=2)},
                           headers=auth).status_code == 201  # the write lock is free
    done = client.post("/v1/profiles", json=six, headers=auth)
    assert done.status_code == 201 and done.json["rows_stored"] == 6


def test_the_gate_queues_up_to_its_bound_then_refuses():
    from jetpredict.api.errors import ApiError
    from jetpredict.api.heavy import HeavyGate

    gate = HeavyGate(slots=1, queue=1, wait_s=HOLD_S)
    inside, waiting_done, release = threading.Event(), threading.Event(), threading.Event()

    def run(started: threading.Event) -> None:
        with gate.admit("test"):
            started.set()
            release.wait(30)

    threads = [threading.Thread(target=run, args=(inside,)), threading.Thread(target=run, args=(waiting_done,))]
    threads[0].start()
    assert inside.wait(30)
    threads[1].start()  # queued behind the first
    for _ in range(200):
        if gate._admitted == 2:
            break
        threading.Event().wait(0.01)
    refused: list[ApiError] = []

    def third() -> None:
        try:
            with gate.admit("third"):
                pass
        except ApiError as exc:
            refused.append(exc)

    asker = threading.Thread(target=third)
    asker.start()
    asker.join(10)  # a hang guard: the full queue refuses at once, an unbounded one would wait HOLD_S
    assert not asker.is_alive(), "the third request was queued beyond the bound"
    assert refused and refused[0].code == 503 and "Retry-After" in refused[0].extra_headers
    release.set()
    for t in threads:
        t.join(30)
    assert waiting_done.is_set()  # the queued one ran once the slot was free


def test_inline_rows_beyond_the_keyless_limit_need_a_key(make_app):
    client = make_app(INLINE_ROWS_WITHOUT_KEY=4).test_client()
    rows = published_rows(n=5)  # one over the limit
    body = {"workload": {"rows": rows}, "modes": "presets"}
    r = client.post("/v1/predictions", json=body)
    assert r.status_code == 413 and "workload.rows" in r.json["errors"] and "X-API-Key" in r.json["message"]
    assert client.post("/v1/predictions", json=body, headers={"X-API-Key": API_KEY}).status_code == 200
    assert client.post("/v1/predictions", json=body, headers={"X-API-Key": "wrong"}).status_code == 403
    assert client.post("/v1/predictions", json={**body, "workload": {"rows": rows[:4]}}).status_code == 200
    rec = client.post("/v1/recommendations", json={"workload": {"rows": rows}, "objective": "min-time"})
    assert rec.status_code == 413


def test_default_keyless_limit_is_documented(client):
    from jetpredict.api.config import DEFAULT_INLINE_ROWS_WITHOUT_KEY

    doc = client.get("/openapi.json").json["components"]["schemas"]["WorkloadRef"]["properties"]["rows"]
    assert f"at most {DEFAULT_INLINE_ROWS_WITHOUT_KEY} rows" in doc["description"]


# -- minor items --------------------------------------------------------------------------------------
@pytest.mark.parametrize("path, template", [
    ("/v1/predictions", '{"workload": {"id": "x"}, "epochs": %s}'),
    ("/v1/profiles", '{"rows": [{"cpu_cores": %s}]}'),
    ("/v1/fleet-plans", '{"workload": {"id": "x"}, "deadline_s": %s, "clients": []}'),
])
def test_an_integer_of_five_thousand_digits_is_400(client, path, template):
    r = client.post(path, data=template % ("9" * 5000), content_type="application/json",
                    headers={"X-API-Key": API_KEY})
    assert r.status_code == 400 and "digits" in r.json["message"] and "body" in r.json["errors"]


def test_healthz_and_uploads_say_when_the_store_cannot_write(make_app, tmp_path, auth, monkeypatch):
    app = make_app()
    client = app.test_client()
    health = client.get("/healthz")
    assert health.status_code == 200 and health.json["store"] == "ok"
    # Read-only: a SQLite file opened read-only (root ignores file modes, so chmod would not do); made by a
    # SQLite app under the same DATA_DIR whatever this test's own backend.
    sqlite_client = make_app(DATABASE_URL="").test_client()
    db = tmp_path / "jetpredict.sqlite"
    assert db.exists()
    # The storage makes the folder of the URL's path ("file:..." taken literally): keep that in tmp_path.
    monkeypatch.chdir(tmp_path)
    readonly = make_app(DATABASE_URL=f"sqlite:///file:{db}?mode=ro&uri=true").test_client()
    health = readonly.get("/healthz")
    assert health.status_code == 503 and health.json["store"].startswith("cannot write: read-only")
    r = readonly.post("/v1/profiles", json={"rows": published_rows()}, headers=auth)
    assert r.status_code == 503 and "cannot write" in r.json["message"] and r.headers["Retry-After"]
    assert readonly.get("/v1/workloads").status_code == 200  # reads still work
    # Full: the file system under the SQLite file has no room left (a PostgreSQL server's disk is its own).
    from jetpredict.api.routes import health as health_route

    class Usage:
        free = 1024

    monkeypatch.setattr(health_route.shutil, "disk_usage", lambda path: Usage())
    full = sqlite_client.get("/healthz")
    assert full.status_code == 503 and full.json["store"].startswith("cannot write: disk full")


def test_access_log_has_one_line_per_request(make_app, caplog):
    client = make_app(ACCESS_LOG="on").test_client()
    logger = logging.getLogger("jetpredict.access")
    logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.INFO, logger="jetpredict.access"):
            client.get("/v1/devices/nano%0Afake/power-modes")
            client.get("/v1/devices")
    finally:
        logger.removeHandler(caplog.handler)
    lines = [r.getMessage() for r in caplog.records if r.name == "jetpredict.access"]
    assert len(lines) == 2 and '"GET /v1/devices" 200' in lines[1] and lines[1].endswith("ms")
    assert "\n" not in lines[0] and "%0A" in lines[0] and " 404 " in lines[0]


# -- one mode validator ---------------------------------------------------------------------------------
def test_the_fast_mode_check_loads_exactly_what_the_schema_loads():
    """``ModesField`` skips marshmallow for plain mode objects: whatever it passes must be what
    ``ModeInSchema`` returns, and whatever it does not pass goes to the schema (property test)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from jetpredict.api.query_schemas import _MODES_SCHEMA, ModesField, _plain_mode
    from jetpredict.api.schemas import CATALOGUE_RANGES
    from marshmallow import ValidationError

    def knob(name: str):
        lo, hi = CATALOGUE_RANGES[name]
        numbers = st.floats(lo - 10, hi + 10, allow_nan=False) | st.integers(int(lo) - 10, int(hi) + 10)
        return numbers | st.booleans() | st.text(max_size=3) | st.none()

    mode = st.fixed_dictionaries(
        {"cpu_cores": knob("cpu_cores"), "cpu_mhz": knob("cpu_mhz"), "gpu_mhz": knob("gpu_mhz"),
         "emc_mhz": knob("emc_mhz")},
        optional={"mode": st.text(max_size=102) | st.integers() | st.none(), "other": st.integers(),
                  # The power-modes listing's fields, which a listed mode sent back carries.
                  "nvpmodel_id": st.integers(-2, 10) | st.floats(-1, 10) | st.booleans() | st.none(),
                  "power_budget_w": st.floats(-1, 2000) | st.integers(-1, 2000) | st.booleans() | st.none(),
                  "gpu_share": st.floats(-0.5, 1.5) | st.integers(-1, 2) | st.booleans() | st.none()})

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(mode, min_size=1, max_size=3))
    def check(modes):
        try:
            expected = _MODES_SCHEMA.load(modes)
        except ValidationError:
            expected = None
        if all(_plain_mode(m) for m in modes):
            assert expected is not None, ascii(modes)  # the fast path accepted what the schema refuses
        try:
            loaded = ModesField().deserialize(modes)
        except ValidationError:
            loaded = None
        assert loaded == expected
        if loaded is not None:
            typed = ("cpu_cores", "cpu_mhz", "gpu_mhz", "emc_mhz", "nvpmodel_id", "power_budget_w", "gpu_share")
            assert [type(m.get(k)) for m in loaded for k in typed] == [type(m.get(k)) for m in expected for k in typed]

    check()
    # A listed mode sent back as it came takes the fast path (50,000 of them took ~0.9 s through marshmallow).
    assert _plain_mode({"mode": "MAXN", "cpu_cores": 8, "cpu_mhz": 2265.6, "gpu_mhz": 1377.0, "emc_mhz": 2133.0,
                        "nvpmodel_id": 0, "power_budget_w": None, "gpu_share": 1.0})
    # Whole numbers written as floats, as clients that build bodies from float columns send them, take it too
    # (50,000 such modes took 2.9 s through marshmallow, 0.5 s on the fast path).
    sent = {"mode": "MAXN", "cpu_cores": 8.0, "cpu_mhz": 2265.6, "gpu_mhz": 1377.0, "emc_mhz": 2133.0, "nvpmodel_id": 0.0}
    assert _plain_mode(sent)
    assert [type(v) for v in ModesField().deserialize([sent])[0].values()] == [str, int, float, float, float, int]
    # Found by the property above: a null label is refused by the schema, so the fast path must refuse it.
    null_label = [{"mode": None, "cpu_cores": 1, "cpu_mhz": 102.0, "gpu_mhz": 77, "emc_mhz": 204.0}]
    assert not _plain_mode(null_label[0])
    with pytest.raises(ValidationError):
        ModesField().deserialize(null_label)


def test_epoch_times_eleven_orders_apart_give_finite_bounds(client, auth):
    """1e-3 s and 1e8 s per epoch in one workload (each plausible per minibatch) used to answer null upper
    bounds on almost every mode: every bound is now a finite number, in every answer form."""
    rows = [{**r, "avg_power_w": None, "epoch_energy_j": None, "stall_time_s": None, "compute_time_s": None}
            for r in published_rows(as_id="span", n=4)]
    rows[0].update(epoch_time_s=1e-3, minibatches_per_epoch=1)
    rows[1].update(epoch_time_s=1e8, minibatches_per_epoch=1_000_000)
    body = {"workload": {"rows": rows}, "modes": "all", "layout": "columns", "epochs": 2}
    r = client.post("/v1/predictions", json=body, headers={"X-API-Key": API_KEY})
    assert r.status_code == 200, r.json
    for name, values in r.json["columns"].items():
        if name.endswith(("_low", "_high")) or name in ("epoch_time_s", "epoch_energy_j", "avg_power_w"):
            assert None not in values, name
            low_or_point = min(values)
            assert low_or_point >= 0 and max(values) < 1e300, name
    assert client.post("/v1/profiles", json={"rows": rows}, headers=auth).status_code == 201


@pytest.mark.parametrize("value, ok", [(True, False), (False, False), ("abc", False), ("1e400", False),
                                       ({"x": 1}, False), (12, True), (1.5, False), ("12", False), ("", False),
                                       (None, True)])
def test_numeric_pass_through_columns_take_numbers_only(client, auth, value, ok):
    """A numeric pass-through column (documented as a number) takes JSON numbers or null only: booleans and
    text, even the text of a number, are refused naming the row and column, as the core fields are."""
    rows = published_rows(as_id="pass-through")
    rows[2]["power_samples"] = value
    r = client.post("/v1/profiles", json={"rows": rows}, headers=auth)
    assert (r.status_code == 201) is ok, r.json
    inline = client.post("/v1/predictions", json={"workload": {"rows": rows}})
    assert (inline.status_code == 200) is ok, inline.json
    if not ok:
        assert "rows.2.power_samples" in r.json["errors"] and "workload.rows.2.power_samples" in inline.json["errors"]


def test_the_documented_prediction_row_is_the_service_row():
    """One row shape: the OpenAPI Prediction schema lists exactly predictor.service.ROW_COLUMNS, in order
    (rows answers, recommendations' best and Pareto rows), and the columns layout holds the per-mode ones."""
    from jetpredict.api.query_schemas import PredictionSchema
    from jetpredict.predictor.service import CONSTANT_COLUMNS, ROW_COLUMNS

    assert tuple(PredictionSchema().fields) == ROW_COLUMNS
    assert set(CONSTANT_COLUMNS) <= set(ROW_COLUMNS)


def test_every_mode_answers_are_shared_by_the_workers_of_a_host(make_app, stored, monkeypatch, tmp_path):
    """One worker computes an answer; another (same DATA_DIR) reads it from DATA_DIR/answers without
    computing; a refit changes the key; a damaged file is a miss, never an error."""
    from jetpredict.api.routes import predictions

    first = make_app().test_client().post("/v1/predictions", json={**ALL, "layout": "columns"})
    assert first.status_code == 200 and any((tmp_path / "answers").iterdir())
    other = make_app().test_client()

    def not_computed(*args, **kwargs):
        raise AssertionError("the answer should come from the shared cache")

    monkeypatch.setattr(predictions, "prediction_answer", not_computed)
    again = other.post("/v1/predictions", json={**ALL, "layout": "columns"})
    assert again.status_code == 200 and again.data == first.data
    monkeypatch.undo()
    for path in (tmp_path / "answers").iterdir():
        path.write_bytes(b"{not json\nxx")
    third = make_app().test_client().post("/v1/predictions", json={**ALL, "layout": "columns"})
    assert third.status_code == 200 and third.data == first.data  # computed again
    off = make_app(ANSWER_CACHE_DISK_MB=0).extensions["jetpredict"].answers
    assert off.directory is None
