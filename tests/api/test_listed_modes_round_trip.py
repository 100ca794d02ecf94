"""The service's own mode objects go back to it: the presets ``GET /v1/devices/{device}/power-modes`` lists
(with ``nvpmodel_id``, ``power_budget_w``, ``gpu_share``) predict in ``POST /v1/predictions`` exactly as
``jetpredict predict --presets`` predicts them, gated presets included; an object's own ``gpu_share`` is not
read: the device's preset for its label and knobs decides the gating."""

from __future__ import annotations

import io

import pandas as pd
import pytest
from api_fixtures import published_rows

from jetpredict.cli import main

FIGURES = ["epoch_time_s", "epoch_time_s_low", "epoch_time_s_high", "avg_power_w", "epoch_energy_j",
           "epoch_energy_j_low", "epoch_energy_j_high"]


@pytest.fixture(scope="module")
def cli_model(tmp_path_factory):
    """``jetpredict fit`` on the rows the ``stored`` fixture uploads (workload ``my-resnet``)."""
    d = tmp_path_factory.mktemp("listed")
    pd.DataFrame(published_rows()).to_csv(d / "rows.csv", index=False)
    assert main(["fit", "--device", "agx-xavier", "--profiles", str(d / "rows.csv"), "--out", str(d / "m.json")]) == 0
    return d / "m.json"


@pytest.mark.parametrize("device", ["agx-xavier", "orin-agx"])  # own device; another, with two gated presets
def test_listed_presets_predict_as_the_cli_predicts_them(client, stored, cli_model, capsys, device):
    listed = client.get(f"/v1/devices/{device}/power-modes").json["modes"]
    assert any(m["gpu_share"] < 1 for m in listed) and all("nvpmodel_id" in m for m in listed)
    r = client.post("/v1/predictions", json={"device": device, "workload": {"id": "my-resnet"}, "modes": listed})
    assert r.status_code == 200, r.json
    http = pd.DataFrame(r.json["predictions"])
    capsys.readouterr()
    assert main(["predict", "--model", str(cli_model), "--presets", "--device", device, "--format", "csv"]) == 0
    cli = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert http["mode"].tolist() == cli["mode"].astype(str).tolist() == [m["mode"] for m in listed]
    pd.testing.assert_frame_equal(http[FIGURES], cli[FIGURES], check_exact=False, rtol=1e-9)
    presets = client.post("/v1/predictions", json={"device": device, "workload": {"id": "my-resnet"},
                                                   "modes": "presets"}).json["predictions"]
    assert [p["epoch_time_s"] for p in presets] == http["epoch_time_s"].tolist()


def test_an_objects_own_gpu_share_is_not_read(client, stored):
    listed = client.get("/v1/devices/orin-agx/power-modes").json["modes"]
    gated = next(i for i, m in enumerate(listed) if m["gpu_share"] < 1)
    body = {"device": "orin-agx", "workload": {"id": "my-resnet"}}
    plain = [{k: m[k] for k in ("mode", "cpu_cores", "cpu_mhz", "gpu_mhz", "emc_mhz")} for m in listed]
    expected = client.post("/v1/predictions", json={**body, "modes": plain}).json["predictions"]
    for share in (1.0, 0.01):  # the whole GPU claimed for a gated preset, a share no preset has
        modes = [dict(m) for m in listed]
        modes[gated]["gpu_share"] = share
        r = client.post("/v1/predictions", json={**body, "modes": modes})
        assert r.status_code == 200, r.json
        assert [p["epoch_time_s"] for p in r.json["predictions"]] == [p["epoch_time_s"] for p in expected]
    gated_time = expected[gated]["epoch_time_s"]
    custom = {**plain[gated], "mode": "c", "gpu_share": listed[gated]["gpu_share"]}  # a custom mode: the whole GPU
    r = client.post("/v1/predictions", json={**body, "modes": [custom]})
    assert r.status_code == 200 and r.json["predictions"][0]["epoch_time_s"] < gated_time, r.json


@pytest.mark.parametrize("extra, field", [({"gpu_share": 0}, "gpu_share"), ({"gpu_share": 1.5}, "gpu_share"),
                                          ({"gpu_share": None}, "gpu_share"), ({"nvpmodel_id": "1"}, "nvpmodel_id"),
                                          ({"power_budget_w": -5}, "power_budget_w"), ({"bogus": 1}, "bogus")])
def test_listing_fields_are_typed_and_other_keys_still_refused(client, stored, extra, field):
    mode = {"mode": "x", "cpu_cores": 8, "cpu_mhz": 1190.4, "gpu_mhz": 675.75, "emc_mhz": 1600, **extra}
    r = client.post("/v1/predictions", json={"workload": {"id": "my-resnet"}, "modes": [mode]})
    assert r.status_code == 422 and any(k.endswith(field) for k in r.json["errors"]), r.json


def test_the_openapi_document_lists_the_listing_fields(client):
    spec = client.get("/openapi.json").json
    modes = spec["components"]["schemas"]["PredictionRequest"]["properties"]["modes"]["oneOf"]
    items = next(m["items"] for m in modes if m.get("type") == "array")
    listed = {"nvpmodel_id", "power_budget_w", "gpu_share"}
    assert listed <= set(items["properties"]) and not listed & set(items["required"])


@pytest.mark.parametrize("nvpmodel_id, status", [(2, 200), (2.0, 200), (2.5, 422)])
def test_a_listed_nvpmodel_id_must_be_a_whole_number_on_the_fast_path_too(client, stored, nvpmodel_id, status):
    """A plain mode object skips the schema (the fast path): a fractional nvpmodel_id must not pass there."""
    mode = {"mode": "x", "cpu_cores": 8, "cpu_mhz": 1190.4, "gpu_mhz": 675.75, "emc_mhz": 1600,
            "nvpmodel_id": nvpmodel_id}
    r = client.post("/v1/predictions", json={"workload": {"id": "my-resnet"}, "modes": [mode]})
    assert r.status_code == status, r.json
    if status == 422:
        assert list(r.json["errors"]) == ["modes.0.nvpmodel_id"], r.json
        assert "whole number" in r.json["errors"]["modes.0.nvpmodel_id"][0]
