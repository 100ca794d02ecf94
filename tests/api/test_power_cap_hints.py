"""A power cap refused over HTTP names the field, the rule and a likely unit slip, as the CLI does.

``constraints.max_power_w: 15000`` was told marshmallow's "Must be greater than or equal to 0.1 and less than
or equal to 10000.0." while ``recommend --max-power-w 15000`` said it looks like milliwatts (15 W); and 100 on
AGX Xavier was told it looks like milliwatts (0.1 W), the floor no mode can meet."""

from __future__ import annotations

import pandas as pd
import pytest
from jetpredict.api.schemas import MAX_POWER_CAP_W
from jetpredict.models.catalogue import list_devices, load_device
from jetpredict.models.paths import data_path

_NO_CAP = "; leave the cap out for no cap"


def _recommend(client, cap_w: object):
    body = {"workload": {"id": "my-resnet"}, "objective": "min-time", "constraints": {"max_power_w": cap_w}}
    return client.post("/v1/recommendations", json=body)


@pytest.mark.parametrize(("cap_w", "said"), [
    (15000, f"max_power_w=15000 W is above {MAX_POWER_CAP_W:g} W; it looks like milliwatts (15 W){_NO_CAP}"),
    (15000.5, f"max_power_w=15000.5 W is above {MAX_POWER_CAP_W:g} W; it looks like milliwatts (15 W){_NO_CAP}"),
    # 1e8 mW is 100 kW, no module's cap either: no hint
    (1e8, f"max_power_w=1e+08 W is above {MAX_POWER_CAP_W:g} W{_NO_CAP}"),
    (0.05, "max_power_w=0.05 W is below the 0.1 W any powered Jetson module draws; it looks like kilowatts (50 W)"),
    (0.001, "max_power_w=0.001 W is below the 0.1 W any powered Jetson module draws")])
def test_a_cap_past_the_schemas_range_is_told_the_rule_and_the_unit_slip(client, stored, cap_w, said):
    r = _recommend(client, cap_w)
    assert r.status_code == 422, r.json
    assert r.json["errors"] == {"constraints.max_power_w": [said]}, r.json


def test_a_cap_in_milliwatts_within_the_schemas_range_gets_the_devices_hint(client, stored):
    r = _recommend(client, 7000)
    assert r.status_code == 422, r.json
    assert "max_power_w=7000 W is above what a Jetson AGX Xavier" in r.json["message"], r.json
    assert f"; it looks like milliwatts (7 W){_NO_CAP}" in r.json["message"], r.json


def test_a_cap_whose_milliwatt_reading_no_mode_meets_gets_no_milliwatt_hint(client, stored):
    """100 mW is 0.1 W, the floor every module draws above: the hint would send the user to a cap no mode of
    AGX Xavier meets. The cap is still refused by name, with the device's rule."""
    r = _recommend(client, 100)
    assert r.status_code == 422, r.json
    message = r.json["message"]
    assert "max_power_w=100 W is above what a Jetson AGX Xavier" in message and message.endswith(_NO_CAP), r.json
    assert "milliwatts" not in message, r.json


@pytest.mark.parametrize("device", [d.id for d in list_devices()])
def test_every_cap_the_hint_may_name_is_met_by_some_mode_of_the_reference_sweep(device):
    """The hint's lowest cap (Device.cap_hint_range_w) lies above the least power some mode of the device's
    reference sweep draws: a cap the hint names is one some mode meets."""
    sweep = pd.read_csv(data_path("reference") / f"{device}-simulated.csv", comment="#")
    low_w, high_w = load_device(device).cap_hint_range_w
    assert sweep["avg_power_w"].min() < low_w <= high_w, (sweep["avg_power_w"].min(), low_w)
