"""Federated round plans on a real fit: deadline with the upper bound, idle energy, stragglers."""

from __future__ import annotations

import numpy as np
import pytest
from jetpredict.models.catalogue import load_device
from jetpredict.models.errors import InputError
from jetpredict.models.profile_rows import read_profile_csv
from jetpredict.predictor import service
from jetpredict.predictor.model import fit_workload
from jetpredict.predictor.reference import REFERENCE_DIR


@pytest.fixture(scope="module")
def resnet():
    rows = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")
    rows = rows[(rows["workload"] == "resnet18-cifar10") & rows["mode"].isin(["a", "d", "g", "h"])]
    return fit_workload(rows.reset_index(drop=True), "agx-xavier")


class CountingModel:
    """Delegates to a real fitted model and counts its all-modes predictions (a spy, not a stand-in)."""

    def __init__(self, model) -> None:
        self._model = model
        self.calls: list[str | None] = []

    def predict_arrays(self, *knobs, device_id=None):
        self.calls.append(device_id)
        return self._model.predict_arrays(*knobs, device_id=device_id)


def _brute_force(model, device_id: str, deadline_s: float, epochs: int) -> tuple[int, float]:
    a = load_device(device_id).modes().as_arrays()
    p = model.predict_arrays(a["cpu_cores"], a["cpu_mhz"], a["gpu_mhz"], a["emc_mhz"], device_id=device_id)
    meets = epochs * p["epoch_time_s_high"] <= deadline_s
    energy = epochs * p["epoch_energy_j"] + p["base_power_w"] * (deadline_s - epochs * p["epoch_time_s"])
    i = int(np.argmin(np.where(meets, energy, np.inf)))
    return i, float(energy[i])


def test_each_client_gets_least_energy_mode_meeting_deadline(resnet):
    clients = [{"id": "c1", "device": "agx-xavier"}, {"id": "c2", "device": "xavier-nx"},
               {"id": "c3", "device": "agx-xavier"}]
    plan = service.plan_fleet(resnet, clients, deadline_s=3000, epochs=2)
    assert plan["feasible"] and plan["infeasible_clients"] == []
    by_id = {c["id"]: c for c in plan["clients"]}
    assert [c["id"] for c in plan["clients"]] == ["c1", "c2", "c3"]
    for c in plan["clients"]:
        assert c["meets_deadline"] and c["round_time_s_high"] <= 3000
        assert c["round_time_s"] == pytest.approx(2 * c["epoch_time_s"])
        assert c["energy_j"] == pytest.approx(c["train_energy_j"] + c["idle_energy_j"])
        assert c["idle_energy_j"] > 0  # finishes early and idles until the deadline
        _, energy = _brute_force(resnet, c["device"], 3000, 2)
        assert c["energy_j"] == pytest.approx(energy)
    assert by_id["c2"]["cross_device"] and not by_id["c1"]["cross_device"]
    assert plan["total_energy_j"] == pytest.approx(sum(c["energy_j"] for c in plan["clients"]))


def test_upper_bound_is_the_straggler_margin(resnet):
    # A deadline between the fastest mode's point time and its upper bound cannot be promised.
    a = load_device("agx-xavier").maxn
    p = resnet.predict_arrays(a.cpu_cores, a.cpu_mhz, a.gpu_mhz, a.emc_mhz)
    deadline = float((p["epoch_time_s"][0] + p["epoch_time_s_high"][0]) / 2)
    plan = service.plan_fleet(resnet, [{"id": 7, "device": "agx-xavier"}], deadline_s=deadline)
    assert not plan["feasible"] and plan["infeasible_clients"] == ["7"]
    client = plan["clients"][0]
    assert not client["meets_deadline"] and "cannot meet deadline_s" in client["reason"]
    assert client["round_time_s_high"] > deadline
    assert plan["total_energy_j"] == 0.0


def test_tight_deadline_reports_slow_device_not_drops_it(resnet):
    fast = service.plan_fleet(resnet, [{"id": "x", "device": "agx-xavier"}], deadline_s=1e6)
    agx_min = min(service.predict(resnet, "all")["epoch_time_s_high"])
    nano = service.predict(resnet, "all", device_id="nano")["epoch_time_s_high"].min()
    assert nano > agx_min  # the Nano is slower, so a deadline between them splits the fleet
    deadline = float((agx_min + nano) / 2)
    plan = service.plan_fleet(resnet, [{"id": "x", "device": "agx-xavier"}, {"id": "y", "device": "nano"}],
                              deadline_s=deadline)
    assert plan["infeasible_clients"] == ["y"] and not plan["feasible"]
    assert [c["id"] for c in plan["clients"]] == ["x", "y"]
    assert plan["total_energy_j"] == pytest.approx(plan["clients"][0]["energy_j"])
    assert fast["feasible"]


def test_one_prediction_per_device_type(resnet):
    spy = CountingModel(resnet)
    clients = [{"id": f"c{i}", "device": ("agx-xavier", "xavier-nx", "nano")[i % 3]} for i in range(50)]
    plan = service.plan_fleet(spy, clients, deadline_s=5000)
    assert len(plan["clients"]) == 50
    assert sorted(spy.calls) == ["agx-xavier", "nano", "xavier-nx"]


@pytest.mark.parametrize(("clients", "deadline", "epochs", "field"), [
    ([], 100, 1, "clients"),
    ([{"id": "a", "device": "agx-xavier"}, {"id": "a", "device": "nano"}], 100, 1, "clients.1.id"),
    ([{"id": "a", "device": "agx-xavier"}, {"id": "b", "device": "tx9"}], 100, 1, "clients.1.device"),
    ([{"device": "agx-xavier"}], 100, 1, "clients.0.id"),
    ([{"id": "a"}], 100, 1, "clients.0.device"),
    (["agx-xavier"], 100, 1, "clients.0"),
    ([{"id": "a", "device": "agx-xavier"}], -5, 1, "deadline_s"),
    ([{"id": "a", "device": "agx-xavier"}], None, 1, "deadline_s"),
    ([{"id": "a", "device": "agx-xavier"}], 100, 0, "epochs"),
])
def test_bad_fleet_input_names_field(resnet, clients, deadline, epochs, field):
    with pytest.raises(InputError) as err:
        service.plan_fleet(resnet, clients, deadline_s=deadline, epochs=epochs)
    assert err.value.field == field
