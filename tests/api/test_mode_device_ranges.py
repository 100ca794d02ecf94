"""A mode object's knob outside the range of the device the request names is refused in that device's words.

The schema's static bounds (the document's too) are the union over the catalogue: the schema cannot depend
on the body. A value past them was told the union ("Must be greater than or equal to 76.8 and less than or
equal to 1377.0." for 99999 MHz on AGX Xavier, whose GPU runs 114.75..1377 MHz), a rule that is not the
device's; 80 MHz, inside the union, was already refused later with the device's range."""

from __future__ import annotations

import pytest
from api_fixtures import published_rows
from jetpredict.api.query_schemas import CATALOGUE_RANGE_NOTE, MODE_BOUNDS
from jetpredict.models.catalogue import MODE_FIELDS, RANGE_TOLERANCE_MHZ, list_devices, load_device
from jetpredict.predictor.service import ROW_COLUMNS, predict, records

_MODE = {"cpu_cores": 8, "cpu_mhz": 1190.4, "gpu_mhz": 675.75, "emc_mhz": 1600}
_XAVIER_GPU = "is outside device 'agx-xavier': must be in 114.75..1377 MHz"


def _predict(client, modes: list[dict], device: str | None = "agx-xavier"):
    body = {"workload": {"id": "my-resnet"}, "modes": modes, **({"device": device} if device else {})}
    return client.post("/v1/predictions", json=body)


@pytest.mark.parametrize("gpu_mhz", [99999, 80, 1e300])
def test_a_knob_outside_the_named_device_is_told_that_devices_range(client, stored, gpu_mhz):
    r = _predict(client, [_MODE, _MODE, _MODE, {**_MODE, "gpu_mhz": gpu_mhz}])
    assert r.status_code == 422, r.json
    assert r.json["errors"] == {"modes.3.gpu_mhz": [f"modes[3]: gpu_mhz={gpu_mhz:g} {_XAVIER_GPU}"]}, r.json


def test_every_mode_past_the_devices_range_is_named_at_once(client, stored):
    """Past the union or only past the device's range: both are reported in one answer, each with the rule."""
    r = _predict(client, [{**_MODE, "gpu_mhz": 80, "mode": "slow"}, _MODE, {**_MODE, "gpu_mhz": 99999, "cpu_cores": 99}])
    assert r.status_code == 422
    assert r.json["errors"] == {
        "modes.0.gpu_mhz": [f"modes[0] (slow): gpu_mhz=80 {_XAVIER_GPU}"],
        "modes.2.gpu_mhz": [f"modes[2]: gpu_mhz=99999 {_XAVIER_GPU}"],
        "modes.2.cpu_cores": ["modes[2]: cpu_cores=99 is outside device 'agx-xavier': must be in 1..8"]}, r.json


@pytest.mark.parametrize("device", [d.id for d in list_devices()])
def test_each_device_states_its_own_range_past_the_catalogues(client, stored, device):
    high = {k: MODE_BOUNDS[k].high * 2 for k in MODE_FIELDS}
    r = _predict(client, [{**_MODE, **high, "cpu_cores": int(high["cpu_cores"])}], device)
    assert r.status_code == 422, r.json
    ranges = next(d for d in list_devices() if d.id == device).knob_ranges()
    for k in MODE_FIELDS:
        lo, hi = ranges[k]
        said = r.json["errors"][f"modes.0.{k}"]
        assert len(said) == 1 and f"is outside device '{device}': must be in {lo:g}..{hi:g}" in said[0], said
    assert set(r.json["errors"]) == {f"modes.0.{k}" for k in MODE_FIELDS}


def test_the_schemas_own_rules_stand_beside_the_devices(client, stored):
    """Text in a number field is told the type rule, a number past a float's reach marshmallow's; a field past the union without a device named (the
    workload's device is not known to the schema) is told it lies outside every catalogue device. An integer
    field past a float's reach gets past marshmallow to the range check: shown by its leading digits."""
    cores = MODE_BOUNDS["cpu_cores"]
    r = _predict(client, [{**_MODE, "gpu_mhz": "80"}, {**_MODE, "emc_mhz": 10**400}, {**_MODE, "cpu_cores": 10**400}])
    assert r.status_code == 422 and r.json["errors"] == {
        "modes.0.gpu_mhz": ["must be a number (a JSON number, not text or a boolean)"],
        "modes.1.emc_mhz": ["Number too large."], "modes.2.cpu_cores": [
            f"cpu_cores=100000000000... is outside every catalogue device: must be in {cores.low:g}..{cores.high:g} "
            f"{CATALOGUE_RANGE_NOTE}"]}, r.json
    lo, hi = MODE_BOUNDS["gpu_mhz"].low, MODE_BOUNDS["gpu_mhz"].high
    for device in (None, "no-such-board"):
        r = _predict(client, [{**_MODE, "gpu_mhz": 99999}], device)
        assert r.status_code == 422
        assert r.json["errors"]["modes.0.gpu_mhz"] == [
            f"gpu_mhz=99999 is outside every catalogue device: must be in {lo:g}..{hi:g} MHz "
            f"{CATALOGUE_RANGE_NOTE}"], r.json


@pytest.mark.parametrize("device", [d.id for d in list_devices()])
def test_a_clock_within_the_tolerance_past_the_devices_range_is_predicted(app, client, stored, device):
    """Each clock 0.9 RANGE_TOLERANCE_MHZ past either end of the named device's range is taken and predicted
    as the service (the CLI's ``predict --device``) predicts it, also where the device's end is the
    catalogue's (AGX Xavier's 2265.6 MHz CPU, Nano's 76.8 MHz GPU); 1.1 of it past is the device's 422."""
    ranges = load_device(device).knob_ranges()
    inside = {k: ranges[k][0] for k in MODE_FIELDS}
    past = 0.9 * RANGE_TOLERANCE_MHZ
    modes = [{**inside, "mode": f"{k}{end}", k: ranges[k][end] + (past if end else -past)}
             for k in MODE_FIELDS[1:] for end in (0, 1)]
    r = _predict(client, modes, device)
    assert r.status_code == 200, r.json
    model = app.extensions["jetpredict"].workloads.stored("my-resnet").model
    expected = [{k: row[k] for k in ROW_COLUMNS if k in row} for row in records(predict(model, modes, device=device))]
    assert [{k: p[k] for k in e} for p, e in zip(r.json["predictions"], expected, strict=True)] == expected
    lo, hi = ranges["cpu_mhz"]
    r = _predict(client, [{**inside, "cpu_mhz": hi + 1.1 * RANGE_TOLERANCE_MHZ}], device)
    assert r.status_code == 422 and r.json["errors"] == {"modes.0.cpu_mhz": [
        f"modes[0]: cpu_mhz={hi + 1.1 * RANGE_TOLERANCE_MHZ:g} is outside device '{device}': must be in "
        f"{lo:g}..{hi:g} MHz"]}, r.json


@pytest.mark.parametrize("bad", [5, "MAXN", [1, 2], None], ids=["number", "text", "list", "null"])
def test_a_mode_that_is_not_an_object_beside_a_named_device_is_told_so_not_a_500(client, stored, bad):
    """The device's range check runs over the modes the schema refused, this one among them."""
    r = _predict(client, [_MODE, bad])
    assert r.status_code == 422, (r.status_code, r.json)
    assert r.json["errors"] == {"modes.1._schema": ["must be a JSON object"]}, r.json


@pytest.mark.parametrize("label", [7, "x" * 500], ids=["number", "too-long"])
def test_a_label_the_schema_refuses_is_left_out_of_the_devices_range_message(client, stored, label):
    """The range message quotes a label only where the schema takes it, as the route names the mode."""
    r = _predict(client, [{**_MODE, "gpu_mhz": 80, "mode": label}])
    assert r.status_code == 422, r.json
    assert "modes.0.mode" in r.json["errors"]  # refused by the schema (not a string, past 100 characters)
    assert r.json["errors"]["modes.0.gpu_mhz"] == [f"modes[0]: gpu_mhz=80 {_XAVIER_GPU}"], r.json


def test_inline_rows_of_one_device_are_told_that_devices_range_without_device_named(client):
    """The inline rows' device cells name the device, as ``device`` would: 16 cores past the catalogue's 1..12
    are told AGX Xavier's 1..8 at once, not the catalogue's range and then, for 12, Xavier's."""
    rows = [{**row, "device": f" {row['device']} "} for row in published_rows()]  # cells are stripped
    assert {row["device"].strip() for row in rows} == {"agx-xavier"}
    for cores in (16, 12):
        r = client.post("/v1/predictions", json={"workload": {"rows": rows}, "modes": [{**_MODE, "cpu_cores": cores}]})
        assert r.status_code == 422, r.json
        assert r.json["errors"] == {"modes.0.cpu_cores": [
            f"modes[0]: cpu_cores={cores} is outside device 'agx-xavier': must be in 1..8"]}, r.json


def test_a_stored_workload_without_device_is_told_how_to_have_its_devices_range_checked(client, stored):
    """A stored workload's device is not known to the schema: the catalogue's range stands, saying that the
    workload's device may allow less and how to have its range checked at once."""
    cores = MODE_BOUNDS["cpu_cores"]
    r = _predict(client, [{**_MODE, "cpu_cores": 16}], None)
    assert r.status_code == 422, r.json
    assert r.json["errors"] == {"modes.0.cpu_cores": [
        f"cpu_cores=16 is outside every catalogue device: must be in {cores.low:g}..{cores.high:g} "
        "(the workload's device may allow less: name device to have its range checked here)"]}, r.json
    r = _predict(client, [{**_MODE, "cpu_cores": 16}])  # device named: its own range, first time
    assert r.json["errors"] == {"modes.0.cpu_cores": [
        "modes[0]: cpu_cores=16 is outside device 'agx-xavier': must be in 1..8"]}, r.json
