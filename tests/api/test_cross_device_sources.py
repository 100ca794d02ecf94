"""Cross-device answers over HTTP: a target mode outside the profiled share of a knob's top is flagged in a
fleet plan, and a device without rows is served from a workload's real rows before its twin rows."""

from __future__ import annotations

import csv

import pytest
from api_fixtures import json_row, published_rows
from jetpredict.models.paths import data_path


def _reference_rows(file: str, workload: str, as_id: str, modes: tuple[str, ...] | None = None, n: int = 4
                    ) -> list[dict]:
    """Bundled reference rows of ``workload`` (those of ``modes``, else the first ``n``) as a client sends them."""
    with (data_path("reference") / file).open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["workload"] == workload and (modes is None or r["mode"] in modes)]
    return [{**json_row(r), "workload": as_id} for r in rows[: None if modes else n]]


def test_a_fleet_plan_flags_an_orin_nano_mode_below_the_profiled_emc_share(client):
    """MobileNetV3 on AGX Xavier a-d profiles EMC at 62-75% of its top. On Orin Nano (EMC steps 204, 665.6,
    2133 MHz) the plan's mode at 665.6 MHz (31%) answered ``extrapolated_knobs: ''``: the range's ends had
    snapped outward, to 665.6 and 2133."""
    rows = published_rows("mobilenetv3-gld23k", as_id="mob", n=4)
    r = client.post("/v1/fleet-plans", json={"workload": {"rows": rows}, "deadline_s": 3600, "epochs": 1,
                                             "clients": [{"id": "x", "device": "orin-nano"}]})
    assert r.status_code == 200, r.json
    nano = r.json["clients"][0]
    assert nano["cross_device"] and nano["emc_mhz"] == 665.6
    assert "emc_mhz" in nano["extrapolated_knobs"].split(";")


@pytest.mark.parametrize("device", ["xavier-nx", "orin-nano"])
def test_published_rows_serve_a_device_without_rows_before_twin_rows(client, auth, device):
    """The audit's workload: 4 published AGX Xavier LeNet-5 rows and twin Nano rows (narrower intervals on
    every target). Xavier NX and Orin Nano answered ``rows_device nano, workload_source simulated``."""
    xavier = _reference_rows("agx-xavier-published.csv", "lenet5-mnist", "lw", modes=("e", "f", "i", "j"))
    twin = _reference_rows("nano-simulated.csv", "lenet5-mnist", "lw")
    for rows in (xavier, twin):
        assert client.post("/v1/profiles", json={"rows": rows}, headers=auth).status_code == 201
    r = client.post("/v1/predictions", json={"device": device, "workload": {"id": "lw"}, "modes": "presets"})
    assert r.status_code == 200, r.json
    assert (r.json["rows_device"], r.json["workload_source"]) == ("agx-xavier", "published")
    assert r.json["workload_devices"] == ["agx-xavier", "nano"]
