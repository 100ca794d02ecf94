"""A workload on several device types: each device's own model serves it, others transfer from the most
certain one; fleet plans say per client whose rows they rest on."""

from __future__ import annotations

import pytest
from jetpredict.models.catalogue import load_device
from jetpredict.models.errors import InputError
from jetpredict.models.profile_files import read_profile_csv
from jetpredict.predictor import service
from jetpredict.predictor.bundled import fit_workload
from jetpredict.predictor.reference import REFERENCE_DIR
from jetpredict.predictor.workload_devices import DeviceModels, best_source, transfer_uncertainty


def _model(device_id: str, n: int = 4):
    rows = read_profile_csv(REFERENCE_DIR / f"{device_id}-simulated.csv")
    rows = rows[rows["workload"] == "resnet18-cifar10"].iloc[: 7 * n : 7].reset_index(drop=True)
    return fit_workload(rows, load_device(device_id))


@pytest.fixture(scope="module")
def models() -> DeviceModels:
    return DeviceModels({"nano": _model("nano"), "orin-nano": _model("orin-nano", n=6)}, "orin-nano")


def test_own_rows_serve_their_device_and_the_primary_is_the_default(models):
    for device_id in ("nano", "orin-nano"):
        served = models.serve(load_device(device_id))
        assert served.own and served.rows_device == device_id and served.model is models.models[device_id]
    assert models.serve().rows_device == "orin-nano" and models.devices == ("nano", "orin-nano")


def test_other_devices_transfer_from_the_most_certain_source(models):
    for device_id in ("orin-agx", "xavier-nx"):
        target = load_device(device_id)
        widths = {d: transfer_uncertainty(m, target) for d, m in models.models.items()}
        served = models.serve(load_device(device_id))
        assert not served.own and served.rows_device == min(widths, key=widths.get)
        assert best_source(models.models, target) == served.rows_device
        assert widths[served.rows_device] > 0


def test_a_workload_needs_a_device_with_rows():
    with pytest.raises(InputError, match="at least one device"):
        DeviceModels({}, "nano")
    with pytest.raises(InputError, match="primary device"):
        DeviceModels({"nano": _model("nano")}, "orin-nano")


def test_fleet_plans_use_each_clients_own_rows_where_stored(models):
    clients = [{"id": "a", "device": "nano"}, {"id": "b", "device": "orin-agx"}, {"id": "c", "device": "orin-nano"}]
    plan = service.plan_fleet(models, clients, deadline_s=20000.0)
    by_id = {c.id: c for c in plan.clients}
    assert (by_id["a"].rows_device, by_id["a"].own_rows, by_id["a"].cross_device) == ("nano", True, False)
    assert (by_id["c"].rows_device, by_id["c"].own_rows) == ("orin-nano", True)
    assert by_id["b"].own_rows is False and by_id["b"].cross_device
    assert by_id["b"].rows_device == models.source_for(load_device("orin-agx"))
    # The nano client's plan is that of a plan on the nano's rows alone.
    alone = service.plan_fleet(models.models["nano"], clients[:1], deadline_s=20000.0).clients[0]
    assert (alone.mode, alone.rows_device, alone.own_rows) == (by_id["a"].mode, "nano", True)
    assert alone.energy_j == pytest.approx(by_id["a"].energy_j, rel=1e-12)
