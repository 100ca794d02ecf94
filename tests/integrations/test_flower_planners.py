"""The planners and how their answers become node plans: the plans of several groups of a round merged (their
provenance the weakest of every part, a client entry silent on the deadline no promise, a round-wide failure
of one group raised at once), what a planner keeps of its settings (timeout, confidence, the workload id of
a workload's per-device models), and plan entries at their edges (a fastest mode ending exactly at the
node's deadline, no idle time left in the plan, cached entries no node used)."""

from __future__ import annotations

import pytest

pytest.importorskip("flwr", reason="the Flower integration needs the [flower] extra")

from jetpredict.models.errors import InputError

from jetpredict.client import DEFAULT_RETRIES, Client, ConnectionFailed
from jetpredict.integrations.flower import HttpPlanner, LocalPlanner, NodeInfo, PlannerError, plan_nodes
from jetpredict.integrations.flower.planners import _plan_groups, summarize_provenance
from tools.testing import published_rows

#: One model's provenance, as provenance_of gives it.
PROVENANCE = {"workload_id": "w", "reference_source": "published", "workload_source": "measured",
              "split_source": "components", "profiled_modes": 9, "model_version": "mech-17"}


# --- merging the plans of several groups ------------------------------------------------------------------

@pytest.mark.parametrize("weak_first", [False, True])
def test_merged_provenance_is_the_weakest_of_every_part_in_either_order(weak_first):
    weak = {**PROVENANCE, "split_source": "epoch_totals", "profiled_modes": 3}
    out = summarize_provenance([weak, PROVENANCE] if weak_first else [PROVENANCE, weak])
    assert (out["split_source"], out["profiled_modes"]) == ("epoch_totals", 3) and out["provenance_note"]


def test_a_value_one_part_does_not_state_is_not_the_merged_plans():
    """Two models, one silent on its model_version: the merge cannot claim the other's."""
    out = summarize_provenance([PROVENANCE, {**PROVENANCE, "model_version": None, "profiled_modes": 4}])
    assert out["model_version"] is None and out["workload_id"] == "w"


def test_the_flower_merge_and_the_services_fleet_merge_agree():
    """A fleet plan's top level (service.fleet_provenance) and a plan merged from several models' (Flower) rest
    on the same rules."""
    from jetpredict.predictor.service import fleet_provenance

    parts = [PROVENANCE, {**PROVENANCE, "reference_source": "simulated", "profiled_modes": 4},
             {**PROVENANCE, "workload_source": "published", "split_source": "epoch_totals"}]
    flower, service = summarize_provenance(parts), fleet_provenance(dict(enumerate(parts)))
    merged = ("reference_source", "workload_source", "split_source", "profiled_modes")
    assert {k: flower[k] for k in merged} == {k: service[k] for k in merged} == {
        "reference_source": "simulated", "workload_source": "measured", "split_source": "epoch_totals",
        "profiled_modes": 4}


def two_groups(answers: dict) -> dict:
    """A round of a Nano and an Orin NX client, each device its own group; ``answers[device]``: the fields of
    its client entry, or the PlannerError its plan raises."""
    clients = [{"id": "1", "device": "nano"}, {"id": "2", "device": "orin-nx"}]

    def plan_group(device, group):
        if isinstance(answers[device], BaseException):
            raise answers[device]
        return {"confidence": 0.9, "clients": [{**c, **answers[device]} for c in group]}

    return _plan_groups(clients, lambda device: device, lambda device: device, plan_group)


def test_a_client_entry_silent_on_the_deadline_does_not_meet_it():
    out = two_groups({"nano": {"mode": "MAXN", "energy_j": 5.0},
                      "orin-nx": {"mode": "MAXN", "energy_j": 7.0, "meets_deadline": True}})
    assert out["feasible"] is False and out["infeasible_clients"] == ["1"] and out["total_energy_j"] == 7.0


def test_no_client_in_time_is_no_energy_total_not_a_free_round():
    out = two_groups({"nano": {"meets_deadline": False}, "orin-nx": {"meets_deadline": False}})
    assert out["total_energy_j"] is None


def test_a_round_wide_failure_of_one_group_is_raised_at_once():
    unreachable = PlannerError("the service is unreachable")
    unreachable.__cause__ = ConnectionFailed("connection refused", before_sending=True)
    assert unreachable.round_wide
    with pytest.raises(PlannerError, match="unreachable"):
        two_groups({"nano": {"mode": "MAXN", "meets_deadline": True}, "orin-nx": unreachable})


# --- the planners' settings ---------------------------------------------------------------------------------

def test_a_deadline_the_service_refuses_is_a_planner_refusal_of_that_request(resnet_model):
    with pytest.raises(PlannerError, match=r"deadline_s must be a finite number > 0, got -1\.0") as err:
        LocalPlanner(resnet_model).plan([{"id": "1", "device": "agx-xavier"}], -1.0, 1)
    assert not err.value.round_wide


def test_a_workloads_per_device_models_plan_under_its_id(resnet_model):
    from jetpredict.predictor.workload_devices import DeviceModels

    answer = LocalPlanner(DeviceModels.single(resnet_model)).plan([{"id": "1", "device": "agx-xavier"}], 600.0, 1)
    assert answer["workload_id"] == "my-resnet" and answer["clients"][0]["workload_id"] == "my-resnet"


def test_the_http_planner_asks_at_its_confidence_within_its_timeout(service_url):
    Client(service_url, api_key="k").upload_profiles(published_rows(as_id="my-resnet"))
    planner = HttpPlanner(service_url, "my-resnet", timeout_s=2.5, confidence=0.999)
    assert planner.client.timeout_s == 2.5
    answer = planner.plan([{"id": "1", "device": "agx-xavier"}], 600.0, 1)
    assert answer["confidence"] == pytest.approx(0.999)


def test_a_service_that_does_not_answer_within_the_planners_timeout_fails_the_round(stub, waits):
    silent = stub(["sleep"], sleep_s=30.0)  # its handler thread is a daemon: closing the stub does not wait
    with pytest.raises(PlannerError, match=r"no answer within 0\.3 s") as err:
        HttpPlanner(silent.url, "my-resnet", timeout_s=0.3).plan([{"id": "1", "device": "agx-xavier"}], 600.0, 1)
    # The client's retries, each within the timeout (its backoff recorded by ``waits``, not slept).
    assert err.value.round_wide and len(silent.requests) == DEFAULT_RETRIES + 1 == len(waits) + 1


# --- plan entries at their edges ----------------------------------------------------------------------------

class OneModePlanner:
    """Plans every client at Nano's MAXN clocks; ``entry(deadline_s)``: the rest of each client entry for the
    planning deadline it is asked (s). ``asked``: those deadlines, in order."""

    confidence = None

    def __init__(self, entry) -> None:
        self.entry = entry
        self.asked: list[float] = []

    def plan(self, clients, deadline_s, epochs):
        self.asked.append(deadline_s)
        return {"confidence": 0.9, "clients": [
            {**c, "mode": "MAXN", "cpu_cores": 4, "cpu_mhz": 1479.0, "gpu_mhz": 921.6, "emc_mhz": 1600.0,
             **self.entry(deadline_s)} for c in clients]}


def test_a_node_whose_fastest_mode_ends_exactly_at_its_deadline_is_planned_again():
    # Fastest mode: up to 8 s of profiled epochs. Scale 0.125 plans at 0.13 (deadline 1 / 0.13 = 7.7 s:
    # missed), but 8 s x 0.125 is 1 s, exactly the node's deadline: planned again at its own scale.
    planner = OneModePlanner(lambda d: {"meets_deadline": d >= 8.0, "round_time_s": 7.0, "round_time_s_high": 8.0})
    plan = plan_nodes(planner, [NodeInfo(1, "nano", 0.125)], 1.0, 1)[1]
    assert planner.asked == [pytest.approx(1 / 0.13), 8.0]
    assert plan.meets_deadline and plan.time_s_high == 1.0


def test_a_plan_with_no_idle_time_left_scales_its_idle_energy_without_dividing_by_zero():
    # Planned at 0.13 for a node of scale 0.125, the entry trains for the whole planning deadline: no idle
    # time to derive a base power from, so its idle energy is scaled as it is.
    planner = OneModePlanner(lambda d: {"meets_deadline": True, "round_time_s": d, "round_time_s_high": d,
                                        "idle_energy_j": 5.0})
    assert plan_nodes(planner, [NodeInfo(1, "nano", 0.125)], 10.0, 1)[1].idle_energy_j == pytest.approx(0.625)


def test_an_entry_silent_on_the_deadline_is_no_plan_that_meets_it():
    planner = OneModePlanner(lambda d: {"round_time_s": 7.0, "round_time_s_high": 8.0})
    assert plan_nodes(planner, [NodeInfo(1, "nano", 1.0)], 100.0, 1)[1].meets_deadline is False


def test_a_planners_own_reason_for_a_miss_is_kept_with_what_it_was_asked():
    """Only the service's own miss ('cannot meet deadline_s=...', its upper bound, which the plan carries) is
    said again in the node's time; another planner's reason rests on its own figures (an oracle's twin
    times), kept in its words with the planning deadline it answered (10 s / 0.05 = 200 s)."""
    planner = OneModePlanner(lambda d: {"meets_deadline": False, "round_time_s": 300.0, "round_time_s_high": 480.0,
                                        "reason": f"no preset meets deadline_s={d:g}: the fastest needs 292.3 s"})
    plan = plan_nodes(planner, [NodeInfo(1, "nano", 0.05)], 10.0, 1)[1]
    assert plan.reason == ("the planner, asked at epoch scale 0.05 (deadline 10 s / 0.05 = 200 s of profiled "
                           "epochs), says: no preset meets deadline_s=200: the fastest needs 292.3 s")
    assert plan.time_s_high == pytest.approx(24.0)  # the plan's own figure, scaled, is not the reason's


def test_cached_entries_no_node_used_are_dropped():
    planner = OneModePlanner(lambda d: {"meets_deadline": True, "round_time_s": 7.0})
    cache: dict = {}
    nano, orin = NodeInfo(1, "nano", 1.0), NodeInfo(2, "orin-nx", 1.0)
    plan_nodes(planner, [nano, orin], 10.0, 1, cache)
    plan_nodes(planner, [orin], 10.0, 1, cache)  # the Nano node left: its entry goes
    assert {device for _, _, device, _, _ in cache} == {"orin-nx"}
    asked = len(planner.asked)
    plan_nodes(planner, [nano, orin], 10.0, 1, cache)  # back: asked for again
    assert len(planner.asked) == asked + 1


@pytest.mark.parametrize("workload", ["", "  ", {"id": ""}, {"nano": "my-resnet", "orin-nx": " "}, {"*": ""}])
def test_a_blank_workload_id_is_refused_when_the_planner_is_built(workload):
    """None and 42 were refused here, but "" was taken and failed at every plan request of the run."""
    with pytest.raises(InputError, match="give one workload, or a mapping of device id -> workload: a "
                                         "workload id must be a non-empty string, got ") as caught:
        HttpPlanner("http://127.0.0.1:9", workload)
    assert caught.value.field == "workload"
