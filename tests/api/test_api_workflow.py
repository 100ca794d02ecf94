"""Upload, store, fit and predict through the HTTP API (Flask test client, real predictor)."""

from __future__ import annotations

import csv
import io

import pytest
from api_fixtures import API_KEY, published_rows, without_power
from jetpredict.models.catalogue import load_device

FLEET_DEVICES = ("agx-xavier", "xavier-nx", "nano", "orin-agx", "orin-nx", "orin-nano")


def test_upload_stores_and_fits(client, stored):
    assert stored["workload_id"] == "my-resnet" and stored["rows_stored"] == 4 and stored["revision"] == 1
    assert stored["device"] == "agx-xavier" and stored["profiled_modes"] == 4 and stored["has_power"] is True
    listing = client.get("/v1/workloads").json
    assert listing["total"] == 1 and listing["workloads"][0]["id"] == "my-resnet"
    detail = client.get("/v1/workloads/my-resnet").json
    assert len(detail["rows"]) == 4 and detail["rows"][0]["workload"] == "my-resnet"
    assert detail["model_version"] == stored["model_version"]


def test_second_upload_adds_rows_and_refits(client, auth, stored):
    more = published_rows(n=6)[4:]
    r = client.post("/v1/profiles", json={"rows": more}, headers=auth)
    assert r.status_code == 201, r.json
    assert r.json["rows_stored"] == 2 and r.json["rows_total"] == 6 and r.json["revision"] == 2
    assert r.json["profiled_modes"] == 6
    p = client.post("/v1/predictions", json={"workload": {"id": "my-resnet"}})
    assert p.json["profiled_modes"] == 6


@pytest.mark.slow
def test_predict_presets_and_all(client, stored):
    r = client.post("/v1/predictions", json={"workload": {"id": "my-resnet"}, "modes": "presets"})
    assert r.status_code == 200, r.json
    body = r.json
    assert body["device"] == "agx-xavier" and body["workload_id"] == "my-resnet"
    assert body["reference_source"] == "published" and body["profiled_modes"] == 4
    device = load_device("agx-xavier")
    assert [p["mode"] for p in body["predictions"]] == [p.mode for p in device.presets]
    for p in body["predictions"]:
        assert p["epoch_time_s_low"] <= p["epoch_time_s"] <= p["epoch_time_s_high"]
        assert p["avg_power_w"] > 0 and p["epoch_energy_j"] > 0 and p["cross_device"] is False
    r = client.post("/v1/predictions", json={"workload": {"id": "my-resnet"}, "modes": "all", "epochs": 20})
    assert r.status_code == 200
    every = r.json  # parsed once: a test response parses its 29,232 rows again at each .json
    assert every["count"] == len(device.modes()) == len(every["predictions"])
    first = every["predictions"][0]
    assert first["time_to_accuracy_s"] == pytest.approx(20 * first["epoch_time_s"], rel=1e-6)


def test_predict_listed_modes_and_csv(client, stored):
    modes = [{"mode": "mine", "cpu_cores": 4, "cpu_mhz": 1200, "gpu_mhz": 670, "emc_mhz": 1333},
             {"cpu_cores": 8, "cpu_mhz": 2265.6, "gpu_mhz": 1377, "emc_mhz": 2133}]
    body = {"workload": {"id": "my-resnet"}, "modes": modes}
    r = client.post("/v1/predictions", json=body)
    assert [p["mode"] for p in r.json["predictions"]] == ["mine", "8c-2265.6-1377-2133"]
    # The profiled mode "a" (4 cores, 1200/670/1333) was measured at 668.3 s: the fit stays close.
    assert r.json["predictions"][0]["epoch_time_s"] == pytest.approx(668.3, rel=0.15)
    r = client.post("/v1/predictions", json=body, headers={"Accept": "text/csv"})
    assert r.status_code == 200 and r.mimetype == "text/csv"
    table = list(csv.DictReader(io.StringIO(r.get_data(as_text=True))))
    assert len(table) == 2 and {"epoch_time_s", "epoch_energy_j", "reference_source"} <= set(table[0])
    bad = client.post("/v1/predictions", json={**body, "modes": [{**modes[0], "gpu_mhz": 5000}]})
    assert bad.status_code == 422 and "modes.0.gpu_mhz" in bad.json["errors"]


def test_rows_without_power_still_get_power_and_honour_caps(client):
    rows = without_power(published_rows(as_id="no-power"))
    r = client.post("/v1/predictions", json={"workload": {"rows": rows}, "modes": "presets"})
    assert r.status_code == 200, r.json
    assert r.json["workload_id"] is None
    for p in r.json["predictions"]:
        assert p["power_source"] == "reference" and p["avg_power_w"] > 0 and p["epoch_energy_j"] > 0
    cap_w = 12.0
    r = client.post("/v1/recommendations", json={"workload": {"rows": rows}, "objective": "min-time",
                                                 "constraints": {"max_power_w": cap_w}})
    assert r.status_code == 200, r.json
    assert r.json["feasible"] is True and r.json["best"]["avg_power_w"] <= cap_w
    assert all(p["avg_power_w"] <= cap_w for p in r.json["pareto"])


def test_recommendation_min_energy_and_infeasible(client, stored):
    ref = {"workload": {"id": "my-resnet"}}
    r = client.post("/v1/recommendations", json={**ref, "objective": "min-energy"})
    assert r.status_code == 200 and r.json["best"] is not None
    best_j = r.json["best"]["epoch_energy_j"]
    # A front mode of less energy is one outside the profiled knob ranges that is not better beyond its
    # interval (the service prefers in-range modes then).
    assert all(best_j <= p["epoch_energy_j"] + 1e-9 or (p["extrapolated"] and p["epoch_energy_j_high"] >= best_j)
               for p in r.json["pareto"])
    r = client.post("/v1/recommendations", json={**ref, "objective": "min-time",
                                                 "constraints": {"max_power_w": 0.5}})
    assert r.status_code == 200 and r.json["feasible"] is False and r.json["best"] is None
    assert r.json["reason"]
    r = client.post("/v1/recommendations", json={**ref, "objective": "fastest"})
    assert r.status_code == 422 and "objective" in r.json["errors"]


def test_fleet_plan_holds_presets_to_recommends_rule(client, stored):
    """A device type's mode follows recommend's rule over HTTP too, presets and space under one out-of-range
    rule: AGX Xavier's MODE_10W (clocks off the catalogue steps, core count, GPU and EMC clocks outside the
    profiled ranges) is below the best in-range mode on its point but not beyond its interval, so the plan
    names the in-range mode (it used to name MODE_10W), the same plan as in process on the same rows. (The
    deadline is 4,000 s since MODE_10W runs half the GPU, as its TPC mask says: its upper time bound is 3,800 s.)"""
    from jetpredict.models.profile_rows import validate_records
    from jetpredict.predictor import service
    from jetpredict.predictor.bundled import fit_workload
    from jetpredict.predictor.fleet import round_figures
    from jetpredict.predictor.limits import DEFAULT_CONFIDENCE

    r = client.post("/v1/fleet-plans", json={"workload": {"id": "my-resnet"}, "deadline_s": 4000, "epochs": 2,
                                             "clients": [{"id": "a", "device": "agx-xavier"}]})
    assert r.status_code == 200, r.json
    (c,) = r.json["clients"]
    assert c["mode"] != "MODE_10W" and c["extrapolated_knobs"] == "" and c["meets_deadline"]
    model = fit_workload(validate_records(published_rows()))
    same = service.plan_fleet(model, [{"id": "a", "device": "agx-xavier"}], 4000, epochs=2).clients[0]
    assert same.mode == c["mode"] and same.energy_j == pytest.approx(c["energy_j"])
    presets = service.predict_presets(model, load_device("agx-xavier"), DEFAULT_CONFIDENCE)
    fig = round_figures(presets, 4000, 2, "agx-xavier")
    k = list(presets["mode"]).index("MODE_10W")
    assert presets["extrapolated"][k] and fig["round_time_s_high"][k] <= 4000
    assert fig["energy_j"][k] < c["energy_j"] <= fig["train_energy_j_high"][k] + fig["idle_energy_j"][k]


def test_fleet_plan_of_fifty_mixed_clients(client, stored):
    clients = [{"id": f"client-{i:02d}", "device": FLEET_DEVICES[i % len(FLEET_DEVICES)]} for i in range(50)]
    r = client.post("/v1/fleet-plans", json={"workload": {"id": "my-resnet"}, "deadline_s": 4000,
                                             "clients": clients})
    assert r.status_code == 200, r.json
    plan = r.json
    assert [c["id"] for c in plan["clients"]] == [c["id"] for c in clients]
    met = [c for c in plan["clients"] if c["meets_deadline"]]
    assert plan["total_energy_j"] == pytest.approx(sum(c["energy_j"] for c in met))
    assert plan["feasible"] == (not plan["infeasible_clients"])
    for c in met:
        assert c["round_time_s_high"] <= 4000
    for c in plan["clients"]:  # every interval of the plan, so callers never predict a mode again
        assert c["round_time_s_low"] <= c["round_time_s"] <= c["round_time_s_high"]
        assert c["train_energy_j_low"] <= c["train_energy_j"] <= c["train_energy_j_high"]
        assert c["avg_power_w_low"] <= c["avg_power_w"] <= c["avg_power_w_high"]
    assert {c["cross_device"] for c in plan["clients"] if c["device"] != "agx-xavier"} == {True}
    r = client.post("/v1/fleet-plans", json={"workload": {"id": "my-resnet"}, "deadline_s": 0,
                                             "clients": clients})
    assert r.status_code == 422 and "deadline_s" in r.json["errors"]


def test_fleet_plan_where_no_client_meets_the_deadline_has_no_total(client, stored):
    # A sum over no client is not a free round: total_energy_j is null, as the document says.
    r = client.post("/v1/fleet-plans", json={"workload": {"id": "my-resnet"}, "deadline_s": 1e-300,
                                             "clients": [{"id": "a", "device": "nano"},
                                                         {"id": "b", "device": "agx-xavier"}]})
    assert r.status_code == 200, r.json
    assert r.json["feasible"] is False and r.json["infeasible_clients"] == ["a", "b"]
    assert r.json["total_energy_j"] is None
    doc = client.get("/openapi.json").json["components"]["schemas"]["FleetPlan"]["properties"]
    assert doc["total_energy_j"]["nullable"] is True
    assert doc["total_energy_j"]["description"] == "J, the clients that meet the deadline; null when none does"


@pytest.mark.parametrize("path, body", [
    ("/v1/predictions", {}),
    ("/v1/fleet-plans", {"deadline_s": 10, "clients": [{"id": "a", "device": "nano"}]})])
@pytest.mark.parametrize("workload_id", ["a/b", "a\\b", "tab\there", "  "])
def test_a_malformed_workload_id_is_422_stating_the_rule(client, path, body, workload_id):
    r = client.post(path, json={"workload": {"id": workload_id}, **body})
    assert r.status_code == 422, r.json
    rule = "must not be blank or contain '/', '\\' or control characters"
    assert r.json["errors"]["workload.id"] == [rule]
    assert f"workload.id: {rule}" in r.json["message"]


@pytest.mark.parametrize("client_id", ["", "   ", "a\x00b"])
def test_a_blank_fleet_client_id_is_422_stating_the_rule(client, stored, client_id):
    r = client.post("/v1/fleet-plans", json={"workload": {"id": "my-resnet"}, "deadline_s": 10,
                                             "clients": [{"id": client_id, "device": "nano"}]})
    assert r.status_code == 422, r.json
    # The answer names the rule the pattern holds (an empty id breaks the length too).
    assert "must not be blank or contain a NUL character" in r.json["errors"]["clients.0.id"]
    assert "clients.0.id: " in r.json["message"]


def test_unknown_workload_is_404(client):
    for path, extra in (("/v1/predictions", {}), ("/v1/recommendations", {"objective": "min-time"}),
                        ("/v1/fleet-plans", {"deadline_s": 10, "clients": [{"id": "a", "device": "nano"}]})):
        r = client.post(path, json={"workload": {"id": "never-uploaded"}, **extra})
        assert r.status_code == 404 and "workload.id" in r.json["errors"], (path, r.json)


def test_uploads_that_cannot_be_stored_store_nothing(client, auth, stored):
    two = published_rows(as_id="mixed", n=2)
    two[1].update(device="nano", cpu_cores=2, cpu_mhz=918, gpu_mhz=640, emc_mhz=1600)
    r = client.post("/v1/profiles", json={"rows": two}, headers=auth)
    assert r.status_code == 422 and "rows.1.device" in r.json["errors"]  # one device per upload: the row that differs
    host = [{**published_rows(as_id="on-host", n=1)[0], "device": "host", "gpu_mhz": None, "emc_mhz": None}]
    r = client.post("/v1/profiles", json={"rows": host}, headers=auth)
    assert r.status_code == 422 and "rows.device" in r.json["errors"]
    r = client.post("/v1/profiles", json={"rows": [{**published_rows(n=1)[0], "workload": "a/b"}]}, headers=auth)
    assert r.status_code == 422
    listing = client.get("/v1/workloads").json
    assert [w["id"] for w in listing["workloads"]] == ["my-resnet"] and listing["workloads"][0]["rows_stored"] == 4


def test_delete_workload(client, auth, stored):
    assert client.delete("/v1/workloads/my-resnet", headers=auth).status_code == 204
    assert client.get("/v1/workloads/my-resnet").status_code == 404
    r = client.post("/v1/predictions", json={"workload": {"id": "my-resnet"}})
    assert r.status_code == 404


def test_models_are_rebuilt_from_stored_rows(make_app, stored, client):
    """A new app on the same database predicts what the first one did, by refitting the stored rows."""
    body = {"workload": {"id": "my-resnet"}, "modes": "presets"}
    before = client.post("/v1/predictions", json=body).json["predictions"]
    again = make_app().test_client()
    after = again.post("/v1/predictions", json=body).json["predictions"]
    assert after == before


def test_cache_follows_uploads_made_by_another_process(make_app, client, stored):
    other = make_app().test_client()
    body = {"workload": {"id": "my-resnet"}}
    assert client.post("/v1/predictions", json=body).json["profiled_modes"] == 4
    r = other.post("/v1/profiles", json={"rows": published_rows(n=8)[4:]}, headers={"X-API-Key": API_KEY})
    assert r.status_code == 201
    assert client.post("/v1/predictions", json=body).json["profiled_modes"] == 8


def test_metrics_count_predictions(client, stored):
    client.post("/v1/predictions", json={"workload": {"id": "my-resnet"}, "modes": "presets"})
    text = client.get("/metrics").get_data(as_text=True)
    n = len(load_device("agx-xavier").presets)
    assert f'jetpredict_predictions_total{{endpoint="predictions"}} {float(n)}' in text
    assert 'jetpredict_workload_fits_total{kind="upload"} 1.0' in text


@pytest.mark.parametrize("device", ["agx-xavier", "orin-nx"])
@pytest.mark.parametrize("epochs", [None, 7])
def test_http_rows_equal_predictor_service(app, client, stored, device, epochs):
    """One pipeline: the JSON rows of POST /v1/predictions are the rows of predictor.service.predict."""
    from jetpredict.predictor.service import ROW_COLUMNS, predict, records

    model = app.extensions["jetpredict"].workloads.stored("my-resnet").model
    listed = [{"mode": "x", "cpu_cores": 3, "cpu_mhz": 1000.0, "gpu_mhz": 600.0, "emc_mhz": 1300.0},
              {"mode": "y", "cpu_cores": 1, "cpu_mhz": 500.0, "gpu_mhz": 400.0, "emc_mhz": 800.0}]
    for modes in ("presets", listed):
        body = {"workload": {"id": "my-resnet"}, "device": device, "modes": modes, "epochs": epochs}
        http = client.post("/v1/predictions", json={k: v for k, v in body.items() if v is not None}).json
        expected = [{k: r[k] for k in ROW_COLUMNS if k in r}
                    for r in records(predict(model, modes, device=device, epochs=epochs))]
        assert [{k: p[k] for k in r} for p, r in zip(http["predictions"], expected, strict=True)] == expected
        assert http["predictions"][0]["cross_device"] is (device != "agx-xavier")


def test_answers_carry_the_fields_their_document_names(client, auth):
    """Each field an answer sends is in its schema, and the upload answer sends every provenance field its
    schema names (``workload_source`` was documented and never sent; a fleet client's ``power_source``
    was sent and never documented)."""
    schemas = client.get("/openapi.json").json["components"]["schemas"]
    upload = client.post("/v1/profiles", json={"rows": published_rows(as_id="doc")}, headers=auth).json
    documented = set(schemas["UploadResult"]["properties"])
    assert set(upload) == documented and upload["workload_source"] == "published"
    assert set(upload["workloads"][0]) == set(schemas["UploadedWorkload"]["properties"])
    stored = client.get("/v1/workloads/doc").json
    assert stored["workload_source"] == stored["fits"][0]["workload_source"] == "published"
    assert set(stored["fits"][0]) <= set(schemas["DeviceFit"]["properties"])
    plan = client.post("/v1/fleet-plans", json={"workload": {"id": "doc"}, "deadline_s": 3000,
                                                "clients": [{"id": "a", "device": "orin-nx"}]}).json
    assert set(plan["clients"][0]) <= set(schemas["FleetClientPlan"]["properties"])
    assert set(plan) <= set(schemas["FleetPlan"]["properties"])


def test_a_workload_id_with_outer_spaces_finds_what_its_upload_stored(client, auth):
    # Uploads strip every text cell, so " x " stores "x"; lookups take the id the same way.
    assert client.post("/v1/profiles", json={"rows": published_rows(as_id=" x ")}, headers=auth).json[
        "workload_id"] == "x"
    assert client.post("/v1/predictions", json={"workload": {"id": " x "}, "modes": "presets"}).status_code == 200
    assert client.get("/v1/workloads/%20x%20").json["id"] == "x"
    assert client.delete("/v1/workloads/%20x%20", headers=auth).status_code == 204
