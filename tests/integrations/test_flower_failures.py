"""What the strategy does when something fails: a planner service that is down is asked once per round, not
once per epoch scale; a node whose device query raises is not counted as heard (and is logged); a node that
trains but reports nothing has an unknown deadline, not a missed one, and one whose training raises has
failed, not missed it."""

from __future__ import annotations

import logging

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower integration needs the [flower] extra")

from flower_fixtures import resnet_records
from flower_grid import InProcessGrid, configure, node_contexts
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp.strategy import FedAvg

from jetpredict.client import (
    BadRequest,
    Client,
    ConnectionFailed,
    NotFound,
    Overloaded,
    ServiceError,
    Unauthorized,
)
from jetpredict.integrations.flower import (
    ENERGY_METRIC,
    ENERGY_REPORTED_METRIC,
    FAILED_METRIC,
    MISSES_METRIC,
    PRED_ENERGY_METRIC,
    DeviceQueryError,
    HttpPlanner,
    JetpredictStrategy,
    LocalPlanner,
    NodeInfo,
    PlannedRound,
    PlannerError,
    TwinWorkload,
    add_device_query,
    plan_nodes,
)

WORKLOAD = "resnet18-cifar10"
SCALE = 0.02
#: Five nodes, five epoch scales: five fleet plans when every scale is asked.
SCALES = {1: 0.01, 2: 0.02, 3: 0.03, 4: 0.04, 5: 0.05}


# --- a planner service that is down ----------------------------------------------------------------------

def unreachable_planner() -> tuple[HttpPlanner, list[float]]:
    """An HttpPlanner of a port nothing listens on (1), its client retrying once at once, and the deadlines
    (s) of the fleet plans it asked for. The workload is given as rows: nothing stored whose revision it would
    read first (a stored id's read fails alike; test_flower_plan_basis.py covers it)."""
    planner = HttpPlanner(Client("http://127.0.0.1:1", api_key="", timeout_s=2.0, retries=1, backoff_s=0.01),
                          {"rows": resnet_records()})
    asked: list[float] = []
    fleet_plans = planner.client.fleet_plans

    def counted(workload, clients, deadline_s, **kwargs):
        asked.append(deadline_s)
        return fleet_plans(workload, clients, deadline_s, **kwargs)

    planner.client.fleet_plans = counted
    return planner, asked


def test_an_unreachable_service_is_asked_once_not_once_per_epoch_scale():
    planner, asked = unreachable_planner()
    nodes = [NodeInfo(n, "nano", s) for n, s in SCALES.items()]
    with pytest.raises(PlannerError, match="failed") as caught:
        plan_nodes(planner, nodes, 60.0, epochs=1)
    assert len(asked) == 1  # not one request (each with its retries) per epoch scale
    assert caught.value.round_wide and isinstance(caught.value.__cause__, ConnectionFailed)


def test_a_round_is_skipped_at_the_first_request_the_service_cannot_answer(server_identity):
    app = ClientApp()
    add_device_query(app, device="nano", epoch_scale=lambda ctx: SCALES[ctx.node_id])

    @app.train()
    def train(msg: Message, context: Context) -> Message:  # pragma: no cover - no plan, no training
        raise AssertionError("a node was trained without a plan")

    planner, asked = unreachable_planner()
    strategy = JetpredictStrategy(FedAvg(fraction_evaluate=0.0, min_train_nodes=1, min_available_nodes=5),
                                  planner, deadline_s=60.0)
    assert configure(strategy, InProcessGrid(app, node_contexts(SCALES, lambda n: {}))) == []
    assert len(asked) == 1
    assert all("round skipped: the planner failed" in r.reason and "127.0.0.1:1" in r.reason
               for r in strategy.records)


class FailingPlanner:
    """A LocalPlanner whose plans under the ``failing`` deadlines (s) fail as HttpPlanner's do: a
    PlannerError raised from the client's error ``cause``."""

    def __init__(self, model, cause: ServiceError, failing: set[float]) -> None:
        self.local = LocalPlanner(model)
        self.cause = cause
        self.failing = failing
        self.asked: list[float] = []

    def plan(self, clients, deadline_s, epochs):
        self.asked.append(deadline_s)
        if deadline_s in self.failing:
            raise PlannerError(str(self.cause)) from self.cause
        return self.local.plan(clients, deadline_s, epochs)


@pytest.mark.parametrize("cause", [
    ConnectionFailed("no answer within 30 s", attempts=4),
    Overloaded("busy", status=503, retry_after_s=5.0),
    Overloaded("rate limited", status=429),
    Unauthorized("no such key", status=403),
    ServiceError("internal error", status=500),
], ids=["no-answer", "503", "429", "403", "500"])
def test_a_failure_of_the_service_stops_planning_at_once(resnet_model, cause):
    nodes = [NodeInfo(n, "nano", s) for n, s in SCALES.items()]
    planner = FailingPlanner(resnet_model, cause, {600.0 / s for s in SCALES.values()})
    with pytest.raises(PlannerError) as caught:
        plan_nodes(planner, nodes, 600.0, epochs=1)
    assert len(planner.asked) == 1 and caught.value.__cause__ is cause


@pytest.mark.parametrize("cause", [
    BadRequest("deadline_s must be at most 315360000", status=422, errors={"deadline_s": ["max"]}),
    NotFound("no such workload", status=404),
], ids=["422", "404"])
def test_a_refusal_of_one_request_leaves_only_its_nodes_unplanned(resnet_model, cause):
    nodes = [NodeInfo(n, "nano", s) for n, s in SCALES.items()]
    planner = FailingPlanner(resnet_model, cause, {600.0 / SCALES[1]})
    plans = plan_nodes(planner, nodes, 600.0, epochs=1)
    assert len(planner.asked) == len(SCALES)  # every scale was asked
    assert plans[1].mode is None and "not planned at epoch scale 0.01" in plans[1].reason
    assert all(plans[n].mode is not None for n in SCALES if n != 1)
    # Refused at every scale: each was asked, and the round has no plan.
    planner = FailingPlanner(resnet_model, cause, {600.0 / s for s in SCALES.values()})
    with pytest.raises(PlannerError):
        plan_nodes(planner, nodes, 600.0, epochs=1)
    assert len(planner.asked) == len(SCALES)


# --- a device query that raises --------------------------------------------------------------------------

def flaky_grid(failing: set[int]) -> InProcessGrid:
    """Three Orin NX nodes (epoch scale :data:`SCALE`) whose query function raises on the ``failing`` ones;
    each trains on the twin."""
    def device(ctx: Context) -> str:
        if ctx.node_id in failing:
            raise RuntimeError("transient failure on node")
        return "orin-nx"

    app = ClientApp()
    add_device_query(app, device=device, epoch_scale=SCALE)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        with PlannedRound(msg, context, device="orin-nx", twin=TwinWorkload(WORKLOAD, SCALE)) as planned:
            pass
        content = RecordDict({"arrays": ArrayRecord([np.zeros(3)]), "metrics": MetricRecord({"num-examples": 1})})
        return Message(planned.attach(content), reply_to=msg)

    return InProcessGrid(app, node_contexts([1, 2, 3], lambda n: {}))


def test_a_failed_device_query_is_not_an_answer(resnet_model, server_identity, caplog):
    strategy = JetpredictStrategy(FedAvg(fraction_evaluate=0.0, min_available_nodes=3, min_train_nodes=1),
                                  resnet_model, deadline_s=600.0, query_timeout_s=1.0)
    with caplog.at_level(logging.WARNING), pytest.raises(DeviceQueryError, match=r"1 of the 3 nodes needed"):
        configure(strategy, flaky_grid({2, 3}))
    told = [r.message for r in caplog.records if "device query failed" in r.message]
    assert len(told) == 1 and "node(s) 2, 3" in told[0] and "transient failure on node" in told[0]


def test_enough_answers_train_and_the_failed_nodes_say_why_without_blaming_the_mod(resnet_model,
                                                                                   server_identity, caplog):
    strategy = JetpredictStrategy(FedAvg(fraction_evaluate=0.0, min_available_nodes=1, min_train_nodes=1),
                                  resnet_model, deadline_s=600.0, query_timeout_s=1.0)
    with caplog.at_level(logging.WARNING):
        assert sorted(m.metadata.dst_node_id for m in configure(strategy, flaky_grid({2}))) == [1, 3]
    reason = {r.node_id: r.reason for r in strategy.records}[2]
    assert "transient failure on node" in reason and "jetpredict_mod" not in reason  # the app has the mod
    assert any("device query failed on node(s) 2:" in r.message for r in caplog.records)


# --- a reply without a report ----------------------------------------------------------------------------

def test_a_reply_without_a_report_is_an_unknown_deadline_not_a_miss(resnet_model, server_identity, caplog):
    """Node 1 reports (PlannedRound), node 2 trains without one (add_device_query only), node 3 raises."""
    app = ClientApp()
    add_device_query(app, device="orin-nx", epoch_scale=SCALE)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        content = RecordDict({"arrays": ArrayRecord([np.zeros(3)]), "metrics": MetricRecord({"num-examples": 1})})
        if context.node_id == 3:
            raise RuntimeError("out of memory")
        if context.node_id == 2:
            return Message(content, reply_to=msg)
        with PlannedRound(msg, context, device="orin-nx", twin=TwinWorkload(WORKLOAD, SCALE)) as planned:
            pass
        return Message(planned.attach(content), reply_to=msg)

    grid = InProcessGrid(app, node_contexts([1, 2, 3], lambda n: {}))
    strategy = JetpredictStrategy(FedAvg(fraction_evaluate=0.0, min_available_nodes=3, min_train_nodes=3),
                                  resnet_model, deadline_s=600.0)
    messages = configure(strategy, grid)
    assert len(messages) == 3
    with caplog.at_level(logging.WARNING):
        _, metrics = strategy.aggregate_train(1, grid.send_and_receive(messages))
    records = {r.node_id: r for r in strategy.records}
    assert records[1].deadline_missed is False and records[1].reason is None
    assert records[2].replied and records[2].deadline_missed is None
    assert "replied without a jetpredict report" in records[2].reason
    # An error reply is a failure, with its reason, not a deadline miss.
    assert records[3].failed and records[3].deadline_missed is None and "out of memory" in records[3].reason
    assert metrics[MISSES_METRIC] == 0 and metrics[FAILED_METRIC] == 1
    assert any("round 1: node(s) 2 replied without a jetpredict report" in r.message for r in caplog.records)


def test_a_node_whose_training_raised_did_not_reply_and_leaves_the_round_energy_to_the_others(resnet_model,
                                                                                             server_identity):
    """Nodes 1 and 2 report the twin's energy, node 3 raises: node 3 failed, it did not reply with figures, and
    the round's reported and predicted energies are those of nodes 1 and 2 (not withheld as partial)."""
    app = ClientApp()
    add_device_query(app, device="orin-nx", epoch_scale=SCALE)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        if context.node_id == 3:
            raise RuntimeError("out of memory")
        with PlannedRound(msg, context, device="orin-nx", twin=TwinWorkload(WORKLOAD, SCALE)) as planned:
            pass
        content = RecordDict({"arrays": ArrayRecord([np.zeros(3)]), "metrics": MetricRecord({"num-examples": 1})})
        return Message(planned.attach(content), reply_to=msg)

    grid = InProcessGrid(app, node_contexts([1, 2, 3], lambda n: {}))
    strategy = JetpredictStrategy(FedAvg(fraction_evaluate=0.0, min_available_nodes=3, min_train_nodes=3),
                                  resnet_model, deadline_s=600.0)
    _, metrics = strategy.aggregate_train(1, grid.send_and_receive(configure(strategy, grid)))
    records = {r.node_id: r for r in strategy.records}
    assert records[3].failed and not records[3].replied
    assert records[1].replied and records[2].replied and records[1].reported_energy_j > 0
    assert metrics[FAILED_METRIC] == 1 and metrics[ENERGY_REPORTED_METRIC] == 2
    assert metrics[ENERGY_METRIC] == pytest.approx(records[1].reported_energy_j + records[2].reported_energy_j)
    assert metrics[PRED_ENERGY_METRIC] == pytest.approx(records[1].pred_energy_j + records[2].pred_energy_j)
