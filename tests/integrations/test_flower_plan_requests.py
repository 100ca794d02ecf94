"""How many planning requests a fleet costs (README: at most one per planning scale and eight per device type,
per workload), and that sharing them costs no node a plan that meets its own deadline."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower integration needs the [flower] extra")

from jetpredict.api.config import DEFAULT_RATE_LIMIT
from jetpredict.models.catalogue import device_ids
from limits import parse_many

from jetpredict.integrations.flower import LocalPlanner, NodeInfo, plan_nodes
from jetpredict.integrations.flower.plans import STRADDLER_PLANS, planning_scale

DEVICES = tuple(device_ids())
#: The service's default limit on costly POSTs a minute (api.config.DEFAULT_RATE_LIMIT: 600/minute).
REQUESTS_PER_MINUTE = next(item.amount for item in parse_many(DEFAULT_RATE_LIMIT)
                           if item.GRANULARITY.name == "minute")
#: Planning scales over three decades: two significant digits, 90 a decade, and the top's.
THREE_DECADES_SCALES = 3 * 90 + 1


class CountingPlanner(LocalPlanner):
    """A real LocalPlanner whose requests (their deadlines, s of profiled epochs) are recorded."""

    def __init__(self, model) -> None:
        super().__init__(model)
        self.asked: list[float] = []

    def plan(self, clients, deadline_s, epochs):
        self.asked.append(deadline_s)
        return super().plan(clients, deadline_s, epochs)


def fastest_high_s(model, device: str) -> float:
    """Upper end (s) of one profiled epoch in ``device``'s fastest mode."""
    plan = plan_nodes(LocalPlanner(model), [NodeInfo(1, device, 1.0)], 1e-9, 1)[1]
    assert not plan.meets_deadline  # nothing meets 1 ns: the plan names the fastest mode
    return plan.time_s_high


def fleet(scales: np.ndarray) -> list[NodeInfo]:
    return [NodeInfo(n, DEVICES[n % len(DEVICES)], float(s)) for n, s in enumerate(scales)]


def request_bound(nodes: list[NodeInfo]) -> int:
    """The documented worst case: one request per planning scale among the nodes, eight per device type."""
    return len({planning_scale(n.epoch_scale) for n in nodes}) + STRADDLER_PLANS * len({n.device for n in nodes})


def straddlers(model, nodes: list[NodeInfo], deadline_s: float) -> int:
    """Nodes whose shared plan (at their planning scale) misses while their own scale's alone meets."""
    planner = LocalPlanner(model)
    return sum(1 for n in nodes
               if not _alone(planner, n, deadline_s / planning_scale(n.epoch_scale))["meets_deadline"]
               and _alone(planner, n, deadline_s / n.epoch_scale)["meets_deadline"])


def _alone(planner: LocalPlanner, node: NodeInfo, planning_deadline_s: float) -> dict:
    """The client entry of ``node`` planned by itself under ``planning_deadline_s`` (s of profiled epochs)."""
    answer = planner.plan([{"id": "n", "device": node.device}], planning_deadline_s, 1)
    return answer["clients"][0]


@pytest.mark.parametrize("case", ["uniform-straddling", "log-uniform-three-decades"])
def test_a_10000_node_fleet_costs_at_most_one_request_per_planning_scale_and_device_type(resnet_model, case):
    """The audit's cases: near-equal shares straddling the deadline of the fastest AGX Xavier mode (809
    requests before: one per distinct straddling scale), and scales over three decades (311)."""
    rng = np.random.default_rng(0)
    if case == "uniform-straddling":
        scales = rng.uniform(0.0200, 0.0210, 10_000)
        deadline = 0.0205 * fastest_high_s(resnet_model, "agx-xavier")
    else:
        scales = 10 ** rng.uniform(-2, 1, 10_000)
        deadline = 900.0
    nodes = fleet(scales)
    planner = CountingPlanner(resnet_model)
    plans = plan_nodes(planner, nodes, deadline, 1)
    assert len(plans) == len(nodes)
    bound = request_bound(nodes)
    assert len(planner.asked) <= bound <= THREE_DECADES_SCALES + STRADDLER_PLANS * len(DEVICES) <= REQUESTS_PER_MINUTE
    # the case is the worst one: some nodes needed a plan of their own scale's (more than one per group)
    assert len(planner.asked) > len({planning_scale(n.epoch_scale) for n in nodes})
    for node in nodes:
        plan = plans[node.node_id]
        if plan.meets_deadline:
            assert plan.time_s_high <= deadline


def test_each_node_meets_its_deadline_wherever_its_own_scale_allows(resnet_model):
    """Against each node planned alone at its own scale: the same verdict, a met deadline kept with the
    upper end of the time, and a node no mode can serve given the fastest mode, as alone."""
    rng = np.random.default_rng(1)
    high = {d: fastest_high_s(resnet_model, d) for d in DEVICES}
    deadline = 0.0205 * high["agx-xavier"]
    # shares straddling each device type's threshold D / high (its two planning scales around it)
    scales = np.concatenate([rng.uniform(0.97, 1.03, 8) * deadline / high[d] for d in DEVICES])
    nodes = [NodeInfo(n, DEVICES[n // 8], float(s)) for n, s in enumerate(scales)]
    planner = CountingPlanner(resnet_model)
    plans = plan_nodes(planner, nodes, deadline, 1)
    assert len(planner.asked) <= request_bound(nodes)
    assert straddlers(resnet_model, nodes, deadline) > len(DEVICES)  # several per type
    alone_planner = LocalPlanner(resnet_model)
    for node in nodes:
        plan, alone = plans[node.node_id], _alone(alone_planner, node, deadline / node.epoch_scale)
        assert plan.meets_deadline == alone["meets_deadline"], node
        shared = _alone(alone_planner, node, deadline / planning_scale(node.epoch_scale))
        if alone["meets_deadline"] and not shared["meets_deadline"]:
            # at most STRADDLER_PLANS per device type straddle here: each is planned at its own scale
            assert plan.mode == alone["mode"], node
        if plan.meets_deadline:
            assert plan.time_s_high <= deadline and plan.reason is None
        else:
            assert plan.mode == alone["mode"] and "cannot meet" in plan.reason
