"""Federated round plans on a real fit: deadline with the upper bound, idle energy, stragglers."""

from __future__ import annotations

import numpy as np
import pytest
from jetpredict.models.catalogue import ModeArrays, load_device
from jetpredict.models.errors import InputError
from jetpredict.models.profile_files import read_profile_csv
from jetpredict.predictor import limits, service
from jetpredict.predictor.bundled import fit_workload, predict_modes
from jetpredict.predictor.fleet import _energy_high_j, round_figures
from jetpredict.predictor.recommend import DEFAULT_RUN_TO_RUN_SPREAD, RUN_TO_RUN_SPREAD
from jetpredict.predictor.reference import REFERENCE_DIR


@pytest.fixture(scope="module")
def resnet():
    rows = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")
    rows = rows[(rows["workload"] == "resnet18-cifar10") & rows["mode"].isin(["a", "d", "g", "h"])]
    return fit_workload(rows.reset_index(drop=True), load_device("agx-xavier"))


@pytest.fixture(scope="module")
def lenet():
    """LeNet-5 profiled on e,f,i,j of AGX Xavier (published rows): other devices' plans rest on them."""
    rows = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")
    rows = rows[(rows["workload"] == "lenet5-mnist") & rows["mode"].isin(["e", "f", "i", "j"])]
    return fit_workload(rows.reset_index(drop=True), load_device("agx-xavier"))


def _brute_force(model, device_id: str, deadline_s: float, epochs: int) -> tuple[str, float]:
    """(mode, energy J) by ``recommend``'s rule over the presets and the space together, presets first: the
    least-energy candidate meeting the deadline that is in range or wins beyond its interval (upper energy,
    idle counted from the earliest finish, below the best in-range point)."""
    device = load_device(device_id)
    # Any run of that many epochs varies this much more (as the plan's round figures state).
    spread = RUN_TO_RUN_SPREAD.get(device_id, DEFAULT_RUN_TO_RUN_SPREAD)

    def figures(modes: ModeArrays):
        p = predict_modes(model, modes, device)
        meets = epochs * p.epoch_time_s_high * (1 + spread) <= deadline_s
        idle = p.base_power_w * np.clip(deadline_s - epochs * p.epoch_time_s, 0, None)
        energy = epochs * p.epoch_energy_j + idle
        # The bound idles from the earliest finish, where the idle share is largest.
        idle_high = p.base_power_w * np.clip(deadline_s - epochs * p.epoch_time_s_low * (1 - spread), 0, None)
        return meets, energy, epochs * p.epoch_energy_j_high * (1 + spread) + idle_high, p.extrapolated

    presets = device.presets
    labels = [p.mode for p in presets] + list(device.modes().labels())
    parts = [figures(ModeArrays.of(list(presets))), figures(ModeArrays.of_device(device))]
    meets, energy, high, extrapolated = (np.concatenate(column) for column in zip(*parts, strict=True))
    inside = meets & ~extrapolated
    reference = energy[inside].min() if inside.any() else np.inf
    stands = ~extrapolated | (high < reference)
    i = int(np.argmin(np.where(meets & stands, energy, np.inf)))
    return labels[i], float(energy[i])


def test_each_client_gets_least_energy_mode_meeting_deadline(resnet):
    clients = [{"id": "c1", "device": "agx-xavier"}, {"id": "c2", "device": "xavier-nx"},
               {"id": "c3", "device": "agx-xavier"}]
    plan = service.plan_fleet(resnet, clients, deadline_s=3000, epochs=2).as_dict()
    assert plan["feasible"] and plan["infeasible_clients"] == [] and plan["confidence"] == limits.DEFAULT_CONFIDENCE
    by_id = {c["id"]: c for c in plan["clients"]}
    assert [c["id"] for c in plan["clients"]] == ["c1", "c2", "c3"]
    for c in plan["clients"]:
        assert c["meets_deadline"] and c["round_time_s_high"] <= 3000
        assert c["round_time_s"] == pytest.approx(2 * c["epoch_time_s"])
        assert c["energy_j"] == pytest.approx(c["train_energy_j"] + c["idle_energy_j"])
        assert c["idle_energy_j"] > 0  # finishes early and idles until the deadline
        assert c["avg_power_w_low"] < c["avg_power_w"] < c["avg_power_w_high"]
        assert c["round_time_s_low"] < c["round_time_s"] < c["round_time_s_high"]
        assert c["train_energy_j_low"] < c["train_energy_j"] < c["train_energy_j_high"]
        mode, energy = _brute_force(resnet, c["device"], 3000, 2)
        assert (c["mode"], c["energy_j"]) == (mode, pytest.approx(energy))
    assert by_id["c2"]["cross_device"] and not by_id["c1"]["cross_device"]
    assert by_id["c2"]["extrapolated_knobs"] == ""  # cross-device: flagged by cross_device instead
    assert plan["total_energy_j"] == pytest.approx(sum(c["energy_j"] for c in plan["clients"]))


@pytest.mark.parametrize("device", ["agx-xavier", "nano"])
def test_the_assignment_carries_the_intervals_predict_states_for_that_many_epochs(resnet, device):
    """A round's figures are those ``predict --epochs`` states for the same mode: the per-epoch interval
    times the epochs, widened by the device's run-to-run spread (Nano 7.8%); a deadline held by a narrower
    bound would admit a node whose own stated upper bound misses it."""
    from jetpredict.predictor.fleet import ClientAssignment, one_mode, round_figures

    deadline = 3000 if device == "agx-xavier" else 22000
    c = service.plan_fleet(resnet, [{"id": "a", "device": device}], deadline_s=deadline, epochs=3).clients[0]
    assert isinstance(c, ClientAssignment) and c.meets_deadline
    mode = [{k: getattr(c, k) for k in ("mode", "cpu_cores", "cpu_mhz", "gpu_mhz", "emc_mhz")}]
    row = service.predict(resnet, mode, device).iloc[0]
    runs = service.predict(resnet, mode, device, epochs=3).iloc[0]
    for tail in ("", "_low", "_high"):
        assert getattr(c, f"round_time_s{tail}") == pytest.approx(runs[f"time_to_accuracy_s{tail}"])
        assert getattr(c, f"train_energy_j{tail}") == pytest.approx(runs[f"energy_to_accuracy_j{tail}"])
    assert c.round_time_s == pytest.approx(3 * row["epoch_time_s"])
    assert c.round_time_s_high > 3 * row["epoch_time_s_high"] and c.round_time_s_high <= deadline
    figures = round_figures(one_mode({**row.to_dict(), "base_power_w": 5.0}), deadline, 3, device)  # one mode
    assert float(figures["round_time_s_high"][0]) == pytest.approx(c.round_time_s_high)
    assert float(figures["idle_energy_j"][0]) == pytest.approx(5.0 * (deadline - c.round_time_s))


def test_the_energy_bound_the_range_guard_uses_bounds_training_and_idle_together(resnet):
    """An extrapolated mode wins a fleet choice only if its energy to the round's end is below the best
    in-range point even at its upper end: training at its upper end *and* idle from its earliest finish,
    where idle energy is largest (idle from the point finish is no bound: it undercounts a fast run)."""
    deadline = 3000.0
    pred = predict_modes(resnet, ModeArrays(*load_device("agx-xavier").maxn.knobs())).columns()
    fig = round_figures(pred, deadline, 1, "agx-xavier")
    bound = float(_energy_high_j(pred, fig, deadline)[0])
    base = float(np.asarray(pred["base_power_w"])[0])
    for train in ("train_energy_j_low", "train_energy_j", "train_energy_j_high"):
        for finish in ("round_time_s_low", "round_time_s", "round_time_s_high"):
            energy = float(fig[train][0]) + base * max(deadline - float(fig[finish][0]), 0.0)
            assert energy <= bound + 1e-9, (train, finish)
    assert bound > float(fig["train_energy_j_high"][0] + fig["idle_energy_j"][0])


def test_upper_bound_is_the_straggler_margin(resnet):
    # A deadline between the fastest mode's point time and its upper bound cannot be promised.
    a = load_device("agx-xavier").maxn
    p = predict_modes(resnet, ModeArrays(a.cpu_cores, a.cpu_mhz, a.gpu_mhz, a.emc_mhz))
    spread = RUN_TO_RUN_SPREAD["agx-xavier"]  # any run of that many epochs varies this much more
    deadline = float((p.epoch_time_s[0] + p.epoch_time_s_high[0]) / 2 * (1 + spread))
    plan = service.plan_fleet(resnet, [{"id": 7, "device": "agx-xavier"}], deadline_s=deadline)
    assert not plan.feasible and plan.infeasible_clients == ("7",)
    client = plan.clients[0]
    assert not client.meets_deadline and "cannot meet deadline_s" in client.reason
    assert client.round_time_s_high > deadline
    assert plan.total_energy_j is None  # no client meets the deadline: no round to sum, not a free one
    # At a lower confidence the upper bound shrinks below the deadline: the client can be planned.
    assert service.plan_fleet(resnet, [{"id": 7, "device": "agx-xavier"}], deadline_s=deadline,
                              confidence=0.5).feasible


def test_a_client_that_cannot_meet_the_deadline_counts_no_idle_energy(resnet):
    # Its point time ends before the deadline (idle at base power would count > 0 J), but its upper bound
    # does not, so it is late: it does not wait for a deadline it misses, and its energy is its training's.
    a = load_device("agx-xavier").maxn
    p = predict_modes(resnet, ModeArrays(a.cpu_cores, a.cpu_mhz, a.gpu_mhz, a.emc_mhz))
    deadline = float((p.epoch_time_s[0] + p.epoch_time_s_high[0]) / 2 * (1 + RUN_TO_RUN_SPREAD["agx-xavier"]))
    late = service.plan_fleet(resnet, [{"id": 7, "device": "agx-xavier"}], deadline_s=deadline).clients[0]
    assert not late.meets_deadline and late.round_time_s < deadline
    assert late.idle_energy_j == 0.0 and late.energy_j == late.train_energy_j > 0.0


def test_tight_deadline_reports_slow_device_not_drops_it(resnet):
    fast = service.plan_fleet(resnet, [{"id": "x", "device": "agx-xavier"}], deadline_s=1e6)
    agx_min = min(service.predict(resnet, "all")["epoch_time_s_high"])
    nano = service.predict(resnet, "all", device="nano")["epoch_time_s_high"].min()
    assert nano > agx_min  # the Nano is slower, so a deadline between them splits the fleet
    deadline = float((agx_min + nano) / 2)
    plan = service.plan_fleet(resnet, [{"id": "x", "device": "agx-xavier"}, {"id": "y", "device": "nano"}],
                              deadline_s=deadline)
    assert plan.infeasible_clients == ("y",) and not plan.feasible
    assert [c.id for c in plan.clients] == ["x", "y"]
    assert plan.total_energy_j == pytest.approx(plan.clients[0].energy_j)
    assert fast.feasible
    # The late client is reported at the Nano's fastest mode: the least upper bound of the round over its
    # modes (reported at the slowest, it read 1c-102-76.8-204 instead of 4c-1479-921.6-1600).
    space = service.predict_space(resnet, load_device("nano"), limits.DEFAULT_CONFIDENCE)
    highs = round_figures(space, deadline, 1, "nano")["round_time_s_high"]
    late = plan.clients[1]
    assert late.round_time_s_high == pytest.approx(float(highs.min())) and late.round_time_s_high > deadline
    assert late.mode == "MAXN"  # 4c-1479-921.6-1600 (ties keep the preset's name: the test below)


def test_one_prediction_per_device_type(resnet, monkeypatch):
    from jetpredict.predictor import space

    calls: list[str] = []
    real = space.predict_modes

    def counting(model, modes, device=None, confidence=limits.DEFAULT_CONFIDENCE):  # a spy around the real prediction
        calls.append(device.id)
        return real(model, modes, device, confidence)

    monkeypatch.setattr(space, "predict_modes", counting)
    clients = [{"id": f"c{i}", "device": ("agx-xavier", "xavier-nx", "nano")[i % 3]} for i in range(50)]
    plan = service.plan_fleet(resnet, clients, deadline_s=5000, confidence=0.8)  # a level not cached yet
    assert len(plan.clients) == 50
    assert sorted(calls) == ["agx-xavier", "nano", "xavier-nx"]


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
    ([{"id": f"c{i}", "device": "nano"} for i in range(limits.MAX_CLIENTS + 1)], 100, 1, "clients"),
])
def test_bad_fleet_input_names_field(resnet, clients, deadline, epochs, field):
    with pytest.raises(InputError) as err:
        service.plan_fleet(resnet, clients, deadline_s=deadline, epochs=epochs)
    assert err.value.field == field


def test_the_plan_says_when_real_data_do_not_back_its_confidence(resnet):
    """The intervals are calibrated on real held-out rows [E11]: a plan on real rows of the clients' own
    device stands at any accepted level; one on twin rows, or crossing devices above the default level,
    says its confidence is not checked there."""
    own = [{"id": "c1", "device": "agx-xavier"}]
    assert service.plan_fleet(resnet, own, 3000, confidence=limits.MAX_CONFIDENCE).confidence_note is None
    crossed = own + [{"id": "c2", "device": "xavier-nx"}]
    assert service.plan_fleet(resnet, crossed, 3000).confidence_note is None
    for level in (0.95, 0.99):  # any level above the default: the note was once held back below 0.99
        note = service.plan_fleet(resnet, crossed, 3000, confidence=level).confidence_note
        assert "cross devices" in note and f"{level:g} confidence is not" in note
    rows = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")
    twin_rows = rows[rows["workload"] == "resnet18-cifar10"].assign(source="simulated: digital twin")
    twin = fit_workload(twin_rows.reset_index(drop=True), load_device("agx-xavier"))
    note = service.plan_fleet(twin, own, 3000).as_dict()["confidence_note"]
    assert "simulated rows" in note and f"{limits.DEFAULT_CONFIDENCE:g} confidence is not checked" in note


def _candidates(model, device_id: str, deadline_s: float, epochs: int) -> dict[str, dict[str, float]]:
    """Per preset (by name), and for the best in-range mode of the space meeting the deadline (key
    "in range"): the round's energy ``energy_j`` and upper bound ``high`` (J), training + idle as the plan
    counts them."""
    device = load_device(device_id)
    out = {}
    for pred in (service.predict_presets(model, device, limits.DEFAULT_CONFIDENCE),
                 service.predict_space(model, device, limits.DEFAULT_CONFIDENCE)):
        fig = round_figures(pred, deadline_s, epochs, device_id)
        high = _energy_high_j(pred, fig, deadline_s)  # as the plan bounds it: idle from the earliest finish
        if "mode" in pred:  # the presets
            out.update({str(name): {"energy_j": fig["energy_j"][j], "high": high[j]}
                        for j, name in enumerate(pred["mode"])})
            continue
        in_range = (fig["round_time_s_high"] <= deadline_s) & ~np.asarray(pred["extrapolated"], dtype=bool)
        out["in range"] = {"energy_j": fig["energy_j"][in_range].min()}
    return out


def test_an_out_of_range_preset_below_the_pick_only_on_its_point_is_not_planned(resnet):
    """AGX Xavier's MODE_10W (22,594 J for the round, up to 24,208 J) lies outside the profiled core counts
    and GPU clocks: below the best in-range mode (22,961 J) on its point, not beyond its interval. The
    fleet holds it to the rule it holds every mode to, as ``recommend`` does, and plans the in-range mode
    (it used to plan MODE_10W on its point alone)."""
    c = service.plan_fleet(resnet, [{"id": "a", "device": "agx-xavier"}], deadline_s=3000, epochs=2).clients[0]
    got = _candidates(resnet, "agx-xavier", 3000, 2)
    ten = got["MODE_10W"]
    assert ten["energy_j"] < got["in range"]["energy_j"] <= ten["high"]
    assert c.mode != "MODE_10W" and c.extrapolated_knobs == "" and c.meets_deadline
    assert c.energy_j == pytest.approx(got["in range"]["energy_j"])


@pytest.mark.parametrize(("deadline_s", "stands"), [(250, False), (3000, True)])
def test_an_out_of_range_preset_and_the_space_are_held_to_one_rule(lenet, deadline_s, stands):
    """Orin NX on LeNet-5 rows of AGX Xavier, one epoch: its 10W preset lies outside the profiled CPU
    range. At 250 s (818 J, up to 978 J, against the best in-range 885 J) it is not better beyond its
    interval and the in-range mode is planned (the preset used to be, on its point alone); at 3,000 s
    (9,414 J, up to 9,574 J, against 10,176 J) it is, and so are lower modes of the space outside the ranges
    (1c-345.6-306-204: 7,478 J): the plan takes the lowest of those that stand, as every mode is held to
    one rule (it used to take the preset, having passed over them for the in-range mode)."""
    c = service.plan_fleet(lenet, [{"id": "a", "device": "orin-nx"}], deadline_s=deadline_s).clients[0]
    got = _candidates(lenet, "orin-nx", deadline_s, 1)
    ten, in_range = got["10W"], got["in range"]["energy_j"]
    assert ten["energy_j"] < in_range and (ten["high"] < in_range) == stands
    assert c.meets_deadline and c.mode != "10W"
    if stands:
        assert c.extrapolated_knobs != "" and c.energy_j < ten["energy_j"]
    else:
        assert c.extrapolated_knobs == "" and c.energy_j == pytest.approx(in_range)
    mode, energy = _brute_force(lenet, "orin-nx", deadline_s, 1)
    assert c.mode == mode and c.energy_j == pytest.approx(energy)


def test_a_one_clock_profile_keeps_other_devices_near_what_was_measured():
    """a-d profile one CPU clock (1200 MHz) on AGX Xavier. Its share of another device's top falls between
    two of that device's steps; the range keeps the step nearest its middle, so each device has modes in range, and
    a client goes to a mode outside them only where that mode wins beyond its interval. (AGX Orin's
    1-core, lowest-clock corner does under an 8,000 s deadline, which it spends mostly idle at its low base
    power: predicted 2,256 s [1,343, 3,790] at 4.5 W, the twin 2,165 s at 4.5 W. Before the transfer took
    the non-negative posterior properly its interval reached the 1000x cap and hid that.)"""
    rows = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")
    rows = rows[(rows["workload"] == "resnet18-cifar10") & rows["mode"].isin(["a", "b", "c", "d"])]
    model = fit_workload(rows.reset_index(drop=True), load_device("agx-xavier"))
    devices = ["xavier-nx", "nano", "orin-agx", "orin-nx", "orin-nano"]
    plan = service.plan_fleet(model, [{"id": d, "device": d} for d in devices], deadline_s=8000, epochs=1)
    for c in plan.clients:
        device = load_device(c.device)
        space = service.predict_space(model, device, limits.DEFAULT_CONFIDENCE)
        assert not np.asarray(space["extrapolated"]).all(), c.device
        mode, energy = _brute_force(model, c.device, 8000, 1)
        assert c.mode == mode and c.energy_j == pytest.approx(energy)


def test_a_client_no_mode_can_make_late_is_told_the_fastest_mode_under_the_presets_name(resnet):
    """Where no mode meets the deadline the client is given the fastest mode, and a preset tied with a space
    mode keeps its name (nvpmodel sets it), as in a plan that meets the deadline and as `recommend` names it."""
    plan = service.plan_fleet(resnet, [{"id": "x", "device": "agx-xavier"}], deadline_s=10.0)
    client = plan.clients[0]
    assert not client.meets_deadline
    maxn = predict_modes(resnet, ModeArrays(*load_device("agx-xavier").maxn.knobs()))
    space_fastest = np.nanmin(service.predict_space(resnet, load_device("agx-xavier"), 0.9)["epoch_time_s_high"])
    assert float(maxn.epoch_time_s_high[0]) == pytest.approx(space_fastest, rel=1e-12)  # the tie
    assert client.mode == "MAXN" and f"{client.round_time_s_high:.4g} s" in client.reason
