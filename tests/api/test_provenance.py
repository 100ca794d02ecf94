"""Every HTTP answer says what it rests on: cross-device answers name the simulated sweeps they use, as
the CLI does, and predictions of twin-profiled rows say the workload's rows are simulated."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from jetpredict.cli import main

REFERENCE = Path(__file__).resolve().parents[2] / "models" / "reference"
HEADERS = {"X-API-Key": "test-key"}


def _rows(csv: str, workload: str, n: int | None = None) -> list[dict]:
    df = pd.read_csv(REFERENCE / csv)
    df = df[df["workload"] == workload]
    if n:
        df = df.iloc[:n]
    return [{k: v for k, v in r.items() if pd.notna(v)} for r in df.to_dict(orient="records")]


@pytest.fixture
def app(tmp_path):
    from jetpredict.api.app import create_app

    return create_app({"DATA_DIR": str(tmp_path), "API_KEYS": "test-key", "TESTING": True})


@pytest.fixture
def client(app):
    client = app.test_client()
    published = _rows("agx-xavier-published.csv", "resnet18-cifar10")
    assert client.post("/v1/profiles", json={"rows": published}, headers=HEADERS).status_code == 201
    twin = [{**r, "workload": "lenet-twin"} for r in _rows("agx-xavier-simulated.csv", "lenet5-mnist", 4)]
    assert client.post("/v1/profiles", json={"rows": twin}, headers=HEADERS).status_code == 201
    return client


def test_cross_device_answers_say_simulated(client):
    workload = {"id": "resnet18-cifar10"}
    own = client.post("/v1/predictions", json={"workload": workload, "modes": "presets"}).get_json()
    assert own["reference_source"] == "published" and own["workload_source"] == "published"
    other = client.post("/v1/predictions", json={"device": "orin-nano", "workload": workload,
                                                 "modes": "presets"}).get_json()
    assert other["reference_source"] == "simulated"
    # Per-mode rows carry no provenance (it is the answer's); the CSV repeats it on every line.
    csv_lines = client.post("/v1/predictions", json={"device": "orin-nano", "workload": workload, "modes": "presets"},
                            headers={"Accept": "text/csv"}).get_data(as_text=True).splitlines()
    column = csv_lines[0].split(",").index("reference_source")
    assert {line.split(",")[column] for line in csv_lines[1:]} == {"simulated"}
    rec = client.post("/v1/recommendations", json={"device": "nano", "workload": workload,
                                                   "objective": "min-energy", "constraints": {}}).get_json()
    assert rec["reference_source"] == "simulated" and rec["workload_source"] == "published"
    fleet = {"workload": workload, "deadline_s": 100000, "clients": [{"id": "a", "device": "agx-xavier"}]}
    assert client.post("/v1/fleet-plans", json=fleet).get_json()["reference_source"] == "published"
    assert client.post("/v1/fleet-plans", json=fleet).get_json()["confidence_note"] is None
    fleet["clients"].append({"id": "b", "device": "orin-nx"})
    assert client.post("/v1/fleet-plans", json=fleet).get_json()["reference_source"] == "simulated"
    # Above the default level the real calibration does not back a plan that crosses devices: it says so.
    note = client.post("/v1/fleet-plans", json={**fleet, "confidence": 0.99}).get_json()["confidence_note"]
    assert "cross devices" in note


def test_a_fleet_plan_states_the_rows_that_serve_its_clients(client):
    """A workload with published AGX Xavier rows and two twin Nano rows: a plan whose only client is a Nano
    rests on the two simulated rows, and says so, not the other device's published ten."""
    nano = [{**r, "workload": "resnet18-cifar10"} for r in _rows("nano-simulated.csv", "resnet18-cifar10", 2)]
    assert client.post("/v1/profiles", json={"rows": nano}, headers=HEADERS).status_code == 201
    fleet = {"workload": {"id": "resnet18-cifar10"}, "deadline_s": 20000, "clients": [{"id": "n", "device": "nano"}]}
    plan = client.post("/v1/fleet-plans", json=fleet).get_json()
    assert plan["clients"][0]["rows_device"] == "nano" and plan["clients"][0]["own_rows"]
    assert (plan["workload_source"], plan["profiled_modes"]) == ("simulated", 2)
    fleet["clients"].append({"id": "x", "device": "agx-xavier"})
    plan = client.post("/v1/fleet-plans", json=fleet).get_json()
    assert (plan["workload_source"], plan["profiled_modes"]) == ("simulated", 2)  # the least trusted, the fewest
    # Each client entry states its own: the Nano's two twin rows, AGX Xavier's ten published ones.
    own = {c["id"]: (c["workload_source"], c["profiled_modes"], c["reference_source"]) for c in plan["clients"]}
    assert own == {"n": ("simulated", 2, "simulated"), "x": ("published", 10, "published")}
    fleet["clients"] = [{"id": "x", "device": "agx-xavier"}]
    plan = client.post("/v1/fleet-plans", json=fleet).get_json()
    assert (plan["workload_source"], plan["profiled_modes"]) == ("published", 10)


def _fit_published_resnet(tmp_path, capsys) -> Path:
    """``jetpredict fit`` on the published ResNet-18 rows; the model file's path."""
    rows = tmp_path / "rows.csv"
    pd.DataFrame(_rows("agx-xavier-published.csv", "resnet18-cifar10")).to_csv(rows, index=False)
    model = tmp_path / "m.json"
    assert main(["fit", "--device", "agx-xavier", "--profiles", str(rows), "--out", str(model)]) == 0
    capsys.readouterr()
    return model


def test_cli_and_http_agree_across_devices(client, tmp_path, capsys):
    model = _fit_published_resnet(tmp_path, capsys)
    assert main(["predict", "--model", str(model), "--presets", "--device", "orin-nano", "--format", "csv"]) == 0
    cli = pd.read_csv(pd.io.common.StringIO(capsys.readouterr().out))
    http = client.post("/v1/predictions", json={"device": "orin-nano", "workload": {"id": "resnet18-cifar10"},
                                                "modes": "presets"}).get_json()
    assert set(cli["reference_source"]) == {http["reference_source"]} == {"simulated"}
    assert set(cli["workload_source"]) == {http["workload_source"]} == {"published"}


def test_twin_profiled_rows_are_said_to_be_simulated(client):
    answer = client.post("/v1/predictions", json={"workload": {"id": "lenet-twin"}, "modes": "presets"}).get_json()
    assert answer["workload_source"] == "simulated"
    csv = client.post("/v1/predictions", json={"workload": {"id": "lenet-twin"}, "modes": "presets"},
                      headers={"Accept": "text/csv"}).get_data(as_text=True)
    header, first = csv.splitlines()[:2]
    assert dict(zip(header.split(","), first.split(","), strict=True))["workload_source"] == "simulated"
    rec = client.post("/v1/recommendations", json={"workload": {"id": "lenet-twin"}, "objective": "min-time",
                                                   "constraints": {"max_power_w": 15}}).get_json()
    assert rec["workload_source"] == "simulated"


def test_error_keys_count_from_zero_everywhere(client):
    """rows, modes and clients: the index in an error key is the 0-based position in the list."""
    good = _rows("agx-xavier-published.csv", "resnet18-cifar10", 2)
    bad = [good[0], {**good[1], "epoch_time_s": -1}]
    r = client.post("/v1/profiles", json={"rows": bad}, headers=HEADERS)
    assert r.status_code == 422 and "rows.1.epoch_time_s" in r.get_json()["errors"], r.get_json()
    r = client.post("/v1/predictions", json={"workload": {"rows": bad}, "modes": "presets"})
    assert r.status_code == 422 and "workload.rows.1.epoch_time_s" in r.get_json()["errors"], r.get_json()
    # ... and so do the messages that name other rows (a CSV file's name its lines)
    twice = [good[0], good[1], {**good[1], **{k: 2 * good[1][k] for k in ("epoch_time_s", "epoch_energy_j")}}]
    r = client.post("/v1/profiles", json={"rows": twice}, headers=HEADERS)
    assert r.get_json()["errors"]["rows.2.epoch_time_s"][0].startswith("rows 1, 2 measure the same mode")
    modes = [{"mode": "a", "cpu_cores": 4, "cpu_mhz": 1200, "gpu_mhz": 670, "emc_mhz": 1331.2},
             {"mode": "b", "cpu_cores": 4, "cpu_mhz": 99999, "gpu_mhz": 670, "emc_mhz": 1331.2}]
    r = client.post("/v1/predictions", json={"workload": {"id": "resnet18-cifar10"}, "modes": modes})
    assert r.status_code == 422 and any(k.startswith("modes.1.") for k in r.get_json()["errors"]), r.get_json()
    clients = [{"id": "a", "device": "nano"}, {"id": "b", "device": "tpu"}]
    r = client.post("/v1/fleet-plans", json={"workload": {"id": "resnet18-cifar10"}, "deadline_s": 1000,
                                             "clients": clients})
    assert r.status_code in (404, 422) and any(k.startswith("clients.1") for k in r.get_json()["errors"]), \
        r.get_json()


def test_unknown_columns_are_rejected_pass_through_columns_kept(client):
    rows = _rows("agx-xavier-published.csv", "resnet18-cifar10", 4)
    misspelt = [{**r, "workload": "typo"} for r in rows]
    misspelt[2]["epoch_tme_s"] = 1.0
    r = client.post("/v1/profiles", json={"rows": misspelt}, headers=HEADERS)
    assert r.status_code == 422
    errors = r.get_json()["errors"]
    assert list(errors) == ["rows.2.epoch_tme_s"] and "did you mean 'epoch_time_s'" in errors["rows.2.epoch_tme_s"][0]
    assert client.get("/v1/workloads/typo").status_code == 404
    # the profiler's own extra columns are documented pass-through columns: stored as they are
    twin = _rows("agx-xavier-simulated.csv", "vgg11-cifar10", 2)
    assert {"power_meter", "kernel_count", "flops_train"} <= set(twin[0])
    assert client.post("/v1/profiles", json={"rows": twin}, headers=HEADERS).status_code == 201
    stored = client.get("/v1/workloads/vgg11-cifar10").get_json()["rows"][0]
    assert stored["power_meter"] == "sim:agx-xavier" and stored["kernel_count"] == twin[0]["kernel_count"]


def test_cli_recommend_json_has_the_fields_of_the_http_answer(client, tmp_path, capsys):
    model = _fit_published_resnet(tmp_path, capsys)
    assert main(["recommend", "--model", str(model), "--objective", "min-time", "--max-power-w", "15",
                 "--format", "json"]) == 0
    import json

    cli = json.loads(capsys.readouterr().out)
    http = client.post("/v1/recommendations", json={"workload": {"id": "resnet18-cifar10"}, "objective": "min-time",
                                                    "constraints": {"max_power_w": 15}}).get_json()
    assert set(cli) == set(http)
    assert set(cli["best"]) == set(http["best"]) and set(cli["pareto"][0]) == set(http["pareto"][0])
    assert cli["best"]["mode"] == http["best"]["mode"] and cli["constraints"] == http["constraints"]


def test_answers_say_whether_their_stall_and_compute_were_measured(client):
    """Rows without the stall/compute columns fit the epoch total only: every answer of that workload says
    its split is the fit's attribution (``epoch_totals``), a fleet plan over both kinds of client says so
    too, and a workload whose rows carry the columns says ``components``."""
    totals = [{k: v for k, v in r.items() if k not in ("stall_time_s", "compute_time_s")}
              for r in _rows("agx-xavier-published.csv", "lenet5-mnist", 4)]
    assert all("stall_time_s" not in r for r in totals)
    up = client.post("/v1/profiles", json={"rows": totals}, headers=HEADERS).get_json()
    assert up["split_source"] == "epoch_totals"
    stored = client.get("/v1/workloads/lenet5-mnist").get_json()
    assert stored["split_source"] == "epoch_totals"
    for workload, split in (("lenet5-mnist", "epoch_totals"), ("resnet18-cifar10", "components")):
        ask = {"workload": {"id": workload}, "modes": "presets"}
        assert client.post("/v1/predictions", json=ask).get_json()["split_source"] == split
        rec = client.post("/v1/recommendations", json={"device": "agx-xavier", "workload": {"id": workload},
                                                       "objective": "min-time", "constraints": {}}).get_json()
        assert rec["split_source"] == split
    nano = [{**r, "workload": "lenet5-mnist"} for r in _rows("nano-simulated.csv", "lenet5-mnist", 4)]
    assert client.post("/v1/profiles", json={"rows": nano}, headers=HEADERS).status_code == 201
    fleet = {"workload": {"id": "lenet5-mnist"}, "deadline_s": 100000,
             "clients": [{"id": "n", "device": "nano"}, {"id": "x", "device": "agx-xavier"}]}
    plan = client.post("/v1/fleet-plans", json=fleet).get_json()
    assert {c["id"]: c["split_source"] for c in plan["clients"]} == {"n": "components", "x": "epoch_totals"}
    assert plan["split_source"] == "epoch_totals"  # one client's split from totals makes the plan's so
    # The other way round (the totals on the device that sorts last): still the plan's.
    nano = [{k: v for k, v in r.items() if k not in ("stall_time_s", "compute_time_s")}
            for r in _rows("nano-simulated.csv", "resnet18-cifar10", 4)]
    assert client.post("/v1/profiles", json={"rows": nano}, headers=HEADERS).status_code == 201
    plan = client.post("/v1/fleet-plans", json={**fleet, "workload": {"id": "resnet18-cifar10"}}).get_json()
    assert {c["id"]: c["split_source"] for c in plan["clients"]} == {"n": "epoch_totals", "x": "components"}
    assert plan["split_source"] == "epoch_totals"


def test_each_device_names_the_sources_of_its_catalogue_facts(app):
    """``GET /v1/devices`` carries each device's ``[sources]`` (specs, frequency steps, presets), so a user can
    check a fact where it came from; the presets' nvpmodel file is named by its file name."""
    from jetpredict.models.catalogue import load_device

    devices = {d["id"]: d for d in app.test_client().get("/v1/devices").json["devices"]}
    for device_id, device in devices.items():
        assert device["sources"] == load_device(device_id).sources
        assert set(device["sources"]) == {"specs", "steps", "presets"}, device_id
    assert "nvpmodel_p3767_0000.conf" in devices["orin-nx"]["sources"]["presets"]
    assert "nvpmodel_t194.conf" in devices["agx-xavier"]["sources"]["presets"]
