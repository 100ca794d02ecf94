"""A simulated node's twin must cost the work its plan is for: a twin of another built-in workload, or of
other local epochs, fails its round naming the twin's field and the plan's value (counted in
jetpredict-failed, never as a deadline miss), and the records say which workload each node simulated."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower integration needs the [flower] extra")

from flower_grid import InProcessGrid, node_contexts, plan_for, train_message
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp.strategy import FedAvg
from jetpredict.models.catalogue import load_device
from jetpredict.models.errors import InputError

from jetpredict.integrations.flower import (
    FAILED_METRIC,
    MISSES_METRIC,
    JetpredictStrategy,
    PlannedRound,
    TwinWorkload,
    jetpredict_mod,
)

NANO = load_device("nano")


@pytest.fixture(scope="module")
def builtin_model():
    """A model of 4 published AGX Xavier rows of the built-in ``resnet18-cifar10`` (its plans name it)."""
    from flower_fixtures import PUBLISHED_CSV, read_profile_csv, rows_to_records
    from jetpredict.models.profile_rows import validate_records
    from jetpredict.predictor.bundled import fit_workload

    rows = read_profile_csv(PUBLISHED_CSV)
    return fit_workload(validate_records(rows_to_records(rows[rows["workload"] == "resnet18-cifar10"].head(4))))


def _planned(workload_id: str | None, epochs: int = 2):
    """Node 7's plan (2 local epochs at scale 0.5, nano's fastest mode), resting on ``workload_id``."""
    return dataclasses.replace(plan_for(NANO.maxn, "nano"), epochs=epochs, workload_id=workload_id)


@pytest.mark.parametrize(("plan", "twin", "said", "field"), [
    (_planned("lenet5-mnist"), TwinWorkload("resnet18-cifar10", 0.5),
     "twin workload='resnet18-cifar10' is not the plan's workload 'lenet5-mnist'", "workload"),
    (_planned("lenet5-mnist", epochs=2), TwinWorkload("lenet5-mnist", 0.5, epochs=6),
     "twin epochs=6 is not the plan's 2 local epochs", "epochs"),
])
def test_a_twin_costing_other_work_than_its_plan_is_refused_before_the_block_runs(plan, twin, said, field):
    ran = []
    with pytest.raises(InputError, match=said) as caught, PlannedRound(train_message(plan), twin=twin):
        ran.append(1)
    assert ran == [] and caught.value.field == field


@pytest.mark.parametrize("plan", [
    _planned("lenet5-mnist"),  # the same work
    _planned("my-lenet"),  # a stored workload id: nothing to compare it with
    _planned(None),  # the planner did not say
])
def test_a_twin_of_the_plans_work_or_of_a_workload_it_cannot_compare_runs(plan):
    with PlannedRound(train_message(plan), twin=TwinWorkload("lenet5-mnist", 0.5, epochs=2)) as planned:
        pass
    assert planned.report["source"] == "simulated" and planned.report["twin-workload"] == "lenet5-mnist"


DEVICES = {1: "agx-xavier", 2: "orin-nx", 3: "nano"}
SCALES = {1: 0.01, 2: 0.02, 3: 0.05}


def _round(model, workload: str) -> tuple[JetpredictStrategy, MetricRecord]:
    """One round of a plain app whose twin costs ``workload`` under plans of ``model``: the strategy and the
    round's aggregated metrics."""
    mod = jetpredict_mod(device=lambda ctx: DEVICES[ctx.node_id], epoch_scale=lambda ctx: SCALES[ctx.node_id],
                         twin=lambda msg, ctx: TwinWorkload(workload, epoch_scale=SCALES[ctx.node_id]))
    app = ClientApp(mods=[mod])

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        return Message(RecordDict({"arrays": ArrayRecord([np.zeros(3)]),
                                   "metrics": MetricRecord({"num-examples": 1})}), reply_to=msg)

    grid = InProcessGrid(app, node_contexts(DEVICES, lambda n: {}))
    strategy = JetpredictStrategy(FedAvg(fraction_evaluate=0.0, min_train_nodes=1,
                                         min_available_nodes=len(DEVICES)), model, deadline_s=600.0, local_epochs=2)
    messages = list(strategy.configure_train(1, ArrayRecord([np.zeros(3)]), ConfigRecord(), grid))
    assert messages
    _, metrics = strategy.aggregate_train(1, list(grid.send_and_receive(messages)))
    return strategy, metrics


def test_a_twin_of_another_workload_fails_its_round_not_the_deadline(builtin_model, server_identity):
    strategy, metrics = _round(builtin_model, "lenet5-mnist")  # plans of resnet18-cifar10
    selected = [r for r in strategy.records if r.selected]
    assert metrics[FAILED_METRIC] == len(selected) and metrics[MISSES_METRIC] == 0
    for record in selected:
        assert record.failed and record.deadline_missed is None and record.twin_workload is None
        assert "twin workload='lenet5-mnist' is not the plan's workload 'resnet18-cifar10'" in record.reason


def test_the_records_say_which_workload_each_node_simulated(builtin_model, server_identity):
    strategy, metrics = _round(builtin_model, "resnet18-cifar10")
    selected = [r for r in strategy.records if r.selected]
    assert metrics[FAILED_METRIC] == 0 and selected
    assert all(r.source == "simulated" and r.twin_workload == "resnet18-cifar10" for r in selected)
    assert all(r.twin_workload is None for r in strategy.records if not r.selected)
    assert "twin_workload" in selected[0].as_dict()
