"""Which nodes a round trains, and what the records say of those it does not: the wrapped strategy samples
among planned nodes only, ``cheapest_fraction`` yields to ``min_train_nodes``, reasons speak in the user's
deadline and the node's own time, an app without the jetpredict mod is not sent the query round after
round, and a planner's confidence is checked when it is built."""

from __future__ import annotations

import logging
import random

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower integration needs the [flower] extra")

from flower_grid import InProcessGrid, configure, node_contexts
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping, FedAvg
from jetpredict.models.errors import InputError

from jetpredict.integrations.flower import (
    PLAN_RECORD,
    QUERY_RECORD,
    HttpPlanner,
    JetpredictStrategy,
    LocalPlanner,
    NodeInfo,
    PlannedRound,
    TwinWorkload,
    add_device_query,
    jetpredict_mod,
    plan_nodes,
)
from jetpredict.integrations.flower.strategy import NOT_CHEAPEST

WORKLOAD = "resnet18-cifar10"
#: At a 30 s deadline and epoch scale 0.02 the two AGX Xavier nodes are planned, the four Nanos are not.
SPLIT = {1: "agx-xavier", 2: "agx-xavier", 3: "nano", 4: "nano", 5: "nano", 6: "nano"}
#: At 600 s all four meet the deadline.
EASY = {1: "agx-xavier", 2: "agx-xavier", 3: "orin-nx", 4: "orin-nx"}
SCALE = 0.02


def twin_app(devices: dict[int, str]) -> ClientApp:
    """Node n is a ``devices[n]`` at epoch scale :data:`SCALE`, reporting the twin's figures."""
    app = ClientApp()
    add_device_query(app, device=lambda ctx: devices[ctx.node_id], epoch_scale=SCALE)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        twin = TwinWorkload(WORKLOAD, epoch_scale=SCALE)
        with PlannedRound(msg, context, device=devices[context.node_id], twin=twin) as planned:
            arrays = ArrayRecord([np.full(3, float(context.node_id))])
        content = RecordDict({"arrays": arrays, "metrics": MetricRecord({"num-examples": 1})})
        return Message(planned.attach(content), reply_to=msg)

    return app


def twin_grid(devices: dict[int, str]) -> InProcessGrid:
    return InProcessGrid(twin_app(devices), node_contexts(devices, lambda n: {}))


class WatchedFedAvg(FedAvg):
    """FedAvg that notes the nodes each sampling Grid lists, and fails at once where Flower's
    ``sample_nodes`` would wait for ever (more nodes required than listed)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.listed: list[set[int]] = []

    def configure_train(self, server_round, arrays, config, grid):
        listed = set(grid.get_node_ids())
        self.listed.append(listed)
        assert self.min_available_nodes <= len(listed), "the strategy would wait for nodes never listed"
        return super().configure_train(server_round, arrays, config, grid)


@pytest.mark.parametrize("dp", [False, True], ids=["fedavg", "dp-wrapped"])
def test_the_wrapped_strategy_samples_among_the_planned_nodes_only(resnet_model, server_identity, dp):
    planned = {n for n, p in plan_nodes(LocalPlanner(resnet_model), [NodeInfo(n, d, SCALE) for n, d in SPLIT.items()],
                                        30.0, 1).items() if p.meets_deadline}
    assert planned == {1, 2}  # fewer than min_available_nodes (6)
    grid = twin_grid(SPLIT)
    fedavg = WatchedFedAvg(fraction_train=0.5, fraction_evaluate=0.0, min_train_nodes=1,
                           min_available_nodes=len(SPLIT))
    inner = DifferentialPrivacyServerSideFixedClipping(fedavg, 1.0, 1.0, 1) if dp else fedavg
    strategy = JetpredictStrategy(inner, LocalPlanner(resnet_model), deadline_s=30.0)
    for server_round in range(1, 21):
        random.seed(server_round)  # FedAvg samples with `random`: every round a different draw
        messages = configure(strategy, grid, server_round)
        # fraction_train 0.5 of the 2 planned nodes: one trains, every round; no unplanned node is drawn.
        assert len(messages) == 1 and messages[0].metadata.dst_node_id in planned
    assert all(listed == planned for listed in fedavg.listed)
    assert fedavg.min_available_nodes == len(SPLIT)  # the wrapped strategy's setting is left as it was


@pytest.mark.parametrize("min_train_nodes, fraction", [(2, 0.25), (1, 0.4)], ids=["min-train-nodes", "rounded-up"])
def test_cheapest_fraction_keeps_at_least_min_train_nodes(resnet_model, server_identity, min_train_nodes, fraction):
    """A quarter of 4 nodes is 1, but the wrapped strategy trains at least 2; 0.4 of 4 is 1.6 nodes, rounded
    up to 2: the two cheapest train either way."""
    grid = twin_grid(EASY)
    strategy = JetpredictStrategy(FedAvg(fraction_evaluate=0.0, min_train_nodes=min_train_nodes,
                                         min_available_nodes=4),
                                  resnet_model, deadline_s=600.0, cheapest_fraction=fraction)
    plans = plan_nodes(strategy.planner, [NodeInfo(n, d, SCALE) for n, d in EASY.items()], 600.0, 1)
    assert all(p.meets_deadline for p in plans.values())
    cost = {n: p.energy_j + p.idle_energy_j for n, p in plans.items()}
    cheapest = set(sorted(cost, key=cost.get)[:2])
    messages = configure(strategy, grid)
    assert {m.metadata.dst_node_id for m in messages} == cheapest
    assert {r.node_id: r.reason for r in strategy.records if not r.selected} == dict.fromkeys(
        set(EASY) - cheapest, NOT_CHEAPEST)


@pytest.mark.parametrize("min_train_nodes, deadline_s, met, need", [(3, 30.0, 2, 3), (0, 1e-3, 0, 1)],
                         ids=["too-few", "none-and-no-minimum"])
def test_a_skipped_round_says_how_many_nodes_meet_the_deadline(resnet_model, server_identity, caplog,
                                                               min_train_nodes, deadline_s, met, need):
    """A wrapped strategy that asks for no minimum still trains one node: a round no node can make is
    skipped too, not handed to it with nobody to sample."""
    grid = twin_grid(SPLIT)
    strategy = JetpredictStrategy(FedAvg(fraction_evaluate=0.0, min_train_nodes=min_train_nodes,
                                         min_available_nodes=6),
                                  resnet_model, deadline_s=deadline_s, cheapest_fraction=0.25)
    with caplog.at_level(logging.WARNING):
        assert configure(strategy, grid) == []
    said = f"only {met} node(s) meet the {deadline_s:g} s deadline, the wrapped strategy trains at least {need}"
    skipped = [r.node_id for r in strategy.records if r.reason == f"round skipped: {said}"]
    late = [r.node_id for r in strategy.records if r.reason.startswith(f"cannot meet the {deadline_s:g} s deadline")]
    assert (skipped, len(skipped) + len(late)) == ([1, 2][:met], len(strategy.records))  # every node says why
    # The line says why, not only how many: the planned node that misses the deadline by least, its upper bound.
    misses = {n: p for n, p in plan_nodes(LocalPlanner(resnet_model), [NodeInfo(n, d, SCALE) for n, d in SPLIT.items()],
                                          deadline_s, 1).items() if not p.meets_deadline}
    n, fastest = min(misses.items(), key=lambda kv: kv[1].time_s_high)
    [line] = [r.message for r in caplog.records if "round 1 skipped" in r.message]
    assert line.endswith(f"round 1 skipped: {met} node(s) meet the {deadline_s:g} s deadline, the wrapped strategy "
                         f"trains at least {need}; the fastest planned node that misses it, node {n} "
                         f"({SPLIT[n]}), needs up to {fastest.time_s_high:.4g} s at {fastest.mode}")


class WithAnExtra(FedAvg):
    """FedAvg that adds a message of its own, to a node it was not shown (99)."""

    def configure_train(self, server_round, arrays, config, grid):
        return [*super().configure_train(server_round, arrays, config, grid),
                Message(content=RecordDict({"config": ConfigRecord()}), dst_node_id=99, message_type="train")]


def test_a_wrapped_strategys_own_message_to_an_unplanned_node_is_not_sent(resnet_model, server_identity):
    inner = WithAnExtra(fraction_evaluate=0.0, min_train_nodes=1, min_available_nodes=len(EASY))
    strategy = JetpredictStrategy(inner, resnet_model, deadline_s=600.0)
    messages = configure(strategy, twin_grid(EASY))
    assert {m.metadata.dst_node_id for m in messages} == set(EASY)
    assert all(PLAN_RECORD in m.content.config_records for m in messages)


def test_a_missed_deadline_is_told_in_the_users_deadline_and_the_nodes_time(resnet_model, server_identity):
    nodes = [NodeInfo(1, "nano", SCALE), NodeInfo(2, "nano", 1.0)]
    plans = plan_nodes(LocalPlanner(resnet_model), nodes, 30.0, 2)
    for plan in plans.values():
        assert not plan.meets_deadline
        assert plan.reason == (f"cannot meet the 30 s deadline: the fastest planned mode, {plan.mode}, needs up to "
                               f"{plan.time_s_high:.4g} s for 2 local epoch(s) on this node")
    assert plans[1].time_s_high == pytest.approx(SCALE * plans[2].time_s_high)  # the node's own time
    strategy = JetpredictStrategy(FedAvg(fraction_evaluate=0.0, min_train_nodes=1, min_available_nodes=6),
                                  resnet_model, deadline_s=30.0)
    configure(strategy, twin_grid(SPLIT))
    nano = next(r for r in strategy.records if r.node_id == 3)
    assert nano.reason.startswith("cannot meet the 30 s deadline:") and "deadline_s=" not in nano.reason


def test_an_app_without_the_mod_gets_the_query_in_its_train_function_once(resnet_model, server_identity,
                                                                              caplog):
    calls: list[int] = []
    app = ClientApp()  # neither jetpredict_mod nor add_device_query

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        calls.append(context.node_id)
        return Message(RecordDict({"metrics": MetricRecord({"num-examples": 1})}), reply_to=msg)

    grid = InProcessGrid(app, node_contexts([1, 2], lambda n: {"jetpredict-device": "nano"}))
    strategy = JetpredictStrategy(FedAvg(fraction_evaluate=0.0, min_train_nodes=1, min_available_nodes=2),
                                  resnet_model, deadline_s=600.0)
    with caplog.at_level(logging.WARNING):
        for server_round in (1, 2, 3):
            assert configure(strategy, grid, server_round) == []
    assert sorted(calls) == [1, 2]  # one query per node, not one per round
    assert len(strategy.records) == 6
    for record in strategy.records:
        assert "has no jetpredict mod" in record.reason and "add_device_query" in record.reason
    told = [r.message for r in caplog.records if "no jetpredict mod" in r.message and "skipped" not in r.message]
    assert len(told) == 1 and "1, 2" in told[0]
    # No node was planned: the skip line says why (the nodes' reasons, counted), not the deadline.
    [line] = [r.message for r in caplog.records if "round 1 skipped" in r.message]
    assert line.endswith(f"round 1 skipped: no node was planned, the wrapped strategy trains at least 1; left out "
                         f"2 node(s): {strategy.records[0].reason} (2)")


def test_a_node_naming_no_usable_device_is_asked_once_and_a_failed_query_again(resnet_model, server_identity,
                                                                                caplog):
    """Node 2's config names no Jetson and node 3's none at all: their answers stay so while they are
    connected. Node 4's query function fails once: an error may pass, so it is asked again."""
    failures = {4: 1}

    def device(ctx: Context) -> str:
        if failures.get(ctx.node_id):
            failures[ctx.node_id] -= 1
            raise OSError("sensor busy")
        return {1: "nano", 2: "toaster", 4: "nano"}.get(ctx.node_id, "")

    app = ClientApp()
    add_device_query(app, device=device, epoch_scale=SCALE)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        return Message(RecordDict({"metrics": MetricRecord({"num-examples": 1})}), reply_to=msg)

    grid = InProcessGrid(app, node_contexts([1, 2, 3, 4], lambda n: {}))
    strategy = JetpredictStrategy(FedAvg(fraction_evaluate=0.0, min_train_nodes=1, min_available_nodes=1),
                                  resnet_model, deadline_s=600.0)
    with caplog.at_level(logging.WARNING):
        for server_round in (1, 2, 3):
            configure(strategy, grid, server_round)
    queried = [m.metadata.dst_node_id for m in grid.sent if m.metadata.message_type != "train"]
    assert sorted(queried) == [1, 2, 3, 4, 4]
    by_round = {(r.round, r.node_id): r for r in strategy.records}
    assert "unknown device 'toaster'" in by_round[3, 2].reason and by_round[3, 3].reason
    assert "sensor busy" in by_round[1, 4].reason and by_round[2, 4].selected
    told = [r.message for r in caplog.records if "not asked again while connected" in r.message]
    assert len(told) == 2 and "toaster" in " ".join(told)


class LateGrid(InProcessGrid):
    """Loses the ``late`` nodes' first answers to the device query sent as a train message."""

    def __init__(self, *args, late=(), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.late = set(late)

    def send_and_receive(self, messages, *, timeout=None):
        messages = list(messages)
        replies = super().send_and_receive(messages, timeout=timeout)
        if all(QUERY_RECORD in m.content.config_records for m in messages):
            lost, self.late = self.late, set()
            return [r for r in replies if r.metadata.src_node_id not in lost]
        return replies


def test_a_mod_only_node_late_to_the_query_as_train_message_is_asked_again(resnet_model, server_identity):
    devices = {1: "orin-nx", 2: "orin-nx"}
    mod = jetpredict_mod(device=lambda ctx: devices[ctx.node_id], epoch_scale=SCALE,
                         twin=TwinWorkload(WORKLOAD, epoch_scale=SCALE))
    app = ClientApp(mods=[mod])  # no query function: the strategy asks again by a train message

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        return Message(RecordDict({"metrics": MetricRecord({"num-examples": 1})}), reply_to=msg)

    grid = LateGrid(app, node_contexts(devices, lambda n: {}), late=[2])
    # One node suffices: a late node is not heard (with 2 needed the round would be a DeviceQueryError).
    strategy = JetpredictStrategy(FedAvg(fraction_evaluate=0.0, min_train_nodes=1, min_available_nodes=1),
                                  resnet_model, deadline_s=600.0)
    assert [m.metadata.dst_node_id for m in configure(strategy, grid)] == [1]
    assert strategy.records[1].reason == "no reply to the device query"  # late, not without the mod
    assert sorted(m.metadata.dst_node_id for m in configure(strategy, grid, 2)) == [1, 2]


@pytest.mark.parametrize("confidence", [0.9999, 0.3])
def test_a_planners_confidence_is_checked_when_it_is_built(resnet_model, confidence):
    # Nothing listens on port 9: HttpPlanner must refuse before any request.
    for build in (LocalPlanner, lambda _, **kw: HttpPlanner("http://127.0.0.1:9", "w", **kw)):
        with pytest.raises(InputError, match="confidence must be between") as caught:
            build(resnet_model, confidence=confidence)
        assert caught.value.field == "confidence"
    assert LocalPlanner(resnet_model, confidence=0.99).confidence == 0.99
    assert HttpPlanner("http://127.0.0.1:9", "w").confidence is None
