"""What the strategy records of each node and totals per round from the nodes' reports: a node's reason
exactly when its plan misses the deadline, whether it applied its mode, a node done exactly at the deadline
in time, the round's time the slowest node's, and a predicted round energy only when every node had one.
The nodes' train replies carry the ``jetpredict.report`` record a PlannedRound attaches, with the figures
each test gives them."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower integration needs the [flower] extra")

from flower_grid import InProcessGrid, configure, node_contexts
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp.strategy import FedAvg

from jetpredict.integrations.flower import (
    ENERGY_METRIC,
    EXCLUDED_METRIC,
    FAILED_METRIC,
    MISSES_METRIC,
    PRED_ENERGY_METRIC,
    REPORT_RECORD,
    ROUND_TIME_METRIC,
    SELECTED_METRIC,
    ClientPlan,
    JetpredictStrategy,
    LocalPlanner,
    add_device_query,
)
from jetpredict.integrations.flower.strategy import ClientRecord

DEADLINE_S = 600.0
SCALE = 0.02  # every node meets DEADLINE_S on these devices at this epoch scale


def reporting_grid(devices: dict[int, str], reports: dict[int, dict]) -> InProcessGrid:
    """Node n is a ``devices[n]`` at epoch scale :data:`SCALE`; its train reply reports ``reports[n]``."""
    app = ClientApp()
    add_device_query(app, device=lambda ctx: devices[ctx.node_id], epoch_scale=SCALE)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        return Message(RecordDict({"arrays": ArrayRecord([np.zeros(3)]), "metrics": MetricRecord({"num-examples": 1}),
                                   REPORT_RECORD: ConfigRecord({"source": "measured", **reports[context.node_id]})}),
                       reply_to=msg)

    return InProcessGrid(app, node_contexts(devices, lambda n: {}))


def run_round(planner, grid: InProcessGrid) -> tuple[dict[int, ClientRecord], MetricRecord]:
    """One round training every node of ``grid``: its records by node, and the aggregated metrics."""
    n = len(grid.contexts)
    strategy = JetpredictStrategy(FedAvg(fraction_evaluate=0.0, min_train_nodes=n, min_available_nodes=n),
                                  planner, deadline_s=DEADLINE_S)
    messages = configure(strategy, grid)
    assert len(messages) == n
    _, metrics = strategy.aggregate_train(1, grid.send_and_receive(messages))
    return {r.node_id: r for r in strategy.records}, metrics


def _plan(meets_deadline: bool, reason: str | None) -> ClientPlan:
    return ClientPlan(node_id=1, device="nano", epoch_scale=1.0, epochs=1, deadline_s=10.0,
                      meets_deadline=meets_deadline, reason=reason)


def test_plans_and_records_state_the_provenance_keys_and_a_records_row_keeps_its_column_order():
    """One field list (PlanProvenance) holds what a plan rests on: PROVENANCE_KEYS and cross_device. A record's
    row leads with its own fields (round, node id) and ends with the plan's provenance, as its columns always
    stood; a plan's provenance travels into the record whole."""
    from dataclasses import fields

    from jetpredict.integrations.flower import PROVENANCE_KEYS
    from jetpredict.integrations.flower.plans import PlanProvenance

    said = {"cross_device": True, "workload_id": "w", "reference_source": "published", "workload_source": "measured",
            "split_source": "components", "profiled_modes": 9, "model_version": "mech-17"}
    assert [f.name for f in fields(PlanProvenance)] == ["cross_device", *PROVENANCE_KEYS] == list(said)
    plan = ClientPlan(node_id=1, device="nano", epoch_scale=1.0, epochs=1, deadline_s=10.0, meets_deadline=True,
                      **said)
    record = ClientRecord(round=1, node_id=1, device="nano", epoch_scale=1.0, selected=False)
    record.add_plan(plan)
    assert plan.provenance() == record.provenance() == said
    row = list(record.as_dict())
    assert row[:2] == ["round", "node_id"] and row[-len(said) - 1:] == ["confidence_note", *said]


def test_a_record_gives_a_reason_exactly_when_its_plan_misses_the_deadline():
    missed = ClientRecord(round=1, node_id=1, device="nano", epoch_scale=1.0, selected=False)
    missed.add_plan(_plan(False, None))
    assert missed.reason == "cannot meet the deadline"
    met = ClientRecord(round=1, node_id=1, device="nano", epoch_scale=1.0, selected=False, reason="earlier")
    met.add_plan(_plan(True, "a note of the planner"))
    assert met.reason is None


def test_the_records_keep_each_report_and_the_round_time_is_the_slowest_nodes(resnet_model, server_identity):
    """Node 1 ends exactly at the deadline (in time), node 2 a microsecond after it (a miss); node 2 did not
    apply its mode, and says so."""
    reports = {1: {"time-s": DEADLINE_S, "mode-applied": True},
               2: {"time-s": DEADLINE_S + 1e-6, "mode-applied": False},
               3: {"time-s": 10.0, "mode-applied": True}}
    records, metrics = run_round(LocalPlanner(resnet_model), reporting_grid(dict.fromkeys(reports, "agx-xavier"),
                                                                            reports))
    assert {n: r.mode_applied for n, r in records.items()} == {1: True, 2: False, 3: True}
    assert {n: r.deadline_missed for n, r in records.items()} == {1: False, 2: True, 3: False}
    assert metrics[MISSES_METRIC] == 1 and metrics[ROUND_TIME_METRIC] == DEADLINE_S + 1e-6


class NoEnergyFor:
    """A LocalPlanner whose plans for ``device`` predict no training energy."""

    def __init__(self, model, device: str) -> None:
        self.local, self.device = LocalPlanner(model), device

    def plan(self, clients, deadline_s, epochs):
        answer = self.local.plan(clients, deadline_s, epochs)
        return {**answer, "clients": [{k: v for k, v in c.items()
                                       if not (c["device"] == self.device and k.startswith("train_energy_j"))}
                                      for c in answer["clients"]]}


def test_the_predicted_round_energy_is_left_out_when_a_node_had_none(resnet_model, server_identity):
    reports = {1: {"time-s": 10.0, "energy-j": 50.0}, 2: {"time-s": 10.0, "energy-j": 70.0}}
    records, metrics = run_round(NoEnergyFor(resnet_model, "orin-nx"),
                                 reporting_grid({1: "agx-xavier", 2: "orin-nx"}, reports))
    assert records[1].pred_energy_j is not None and records[2].pred_energy_j is None
    assert metrics[ENERGY_METRIC] == 120.0 and PRED_ENERGY_METRIC not in metrics


def test_a_selected_node_that_never_replies_is_a_miss_and_the_energies_are_the_replying_nodes(
        resnet_model, server_identity):
    """Three nodes trained; node 3's reply never came. Its silence is a deadline miss (not unknown), it stays
    selected (not excluded), and the round's reported and predicted energies are those of nodes 1 and 2."""
    reports = {n: {"time-s": 10.0, "energy-j": 40.0 + n} for n in (1, 2, 3)}
    grid = reporting_grid(dict.fromkeys(reports, "agx-xavier"), reports)
    strategy = JetpredictStrategy(FedAvg(fraction_evaluate=0.0, min_train_nodes=3, min_available_nodes=3),
                                  LocalPlanner(resnet_model), deadline_s=DEADLINE_S)
    messages = configure(strategy, grid)
    assert len(messages) == 3
    replies = [r for r in grid.send_and_receive(messages) if r.metadata.src_node_id != 3]
    _, metrics = strategy.aggregate_train(1, replies)
    records = {r.node_id: r for r in strategy.records}
    assert {n: r.deadline_missed for n, r in records.items()} == {1: False, 2: False, 3: True}
    assert not records[3].replied and not records[3].failed and records[3].pred_energy_j is not None
    assert metrics[SELECTED_METRIC] == 3 and metrics[EXCLUDED_METRIC] == 0
    assert metrics[MISSES_METRIC] == 1 and metrics[FAILED_METRIC] == 0
    assert metrics[ENERGY_METRIC] == 83.0
    assert metrics[PRED_ENERGY_METRIC] == pytest.approx(records[1].pred_energy_j + records[2].pred_energy_j)
