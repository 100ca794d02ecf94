"""Rounds of a large or unusual fleet: plans reused across rounds and shared by close epoch scales (a
10,000-node fleet plans within the service's rate limit), a rate limit mid-round keeping the plans made,
an epoch scale too small to plan, one device's workload refused, a node whose training raises, and the
twin's epoch scale as the node's answer to the device query."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower integration needs the [flower] extra")

from flower_fixtures import resnet_records
from flower_grid import InProcessGrid, configure, node_contexts
from flwr.app import Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp.strategy import FedAvg
from jetpredict.models.errors import InputError, UnknownWorkloadError
from jetpredict.profiler.sim import workload_complexity

from jetpredict.client import ConnectionFailed, Overloaded
from jetpredict.integrations.flower import (
    FAILED_METRIC,
    MISSES_METRIC,
    HttpPlanner,
    JetpredictStrategy,
    LocalPlanner,
    NodeInfo,
    PlannerError,
    TwinWorkload,
    jetpredict_mod,
    plan_nodes,
    twin_round,
)
from jetpredict.integrations.flower.plans import PLAN_CACHE_ROUNDS, planning_scale
from jetpredict.integrations.flower.twin import preset_mode

DEVICES = ("agx-xavier", "orin-agx", "nano", "orin-nx", "xavier-nx", "orin-nano")
#: The service's default limit on costly POSTs (api.config.DEFAULT_RATE_LIMIT: 600/minute).
REQUESTS_PER_MINUTE = 600


class CountingPlanner:
    """A real LocalPlanner whose plans are counted; from call ``fail_from`` on, it fails as HttpPlanner does
    on a 429 (a PlannerError raised from the client's Overloaded)."""

    def __init__(self, model, fail_from: int | None = None) -> None:
        self.local = LocalPlanner(model)
        self.fail_from = fail_from
        self.asked: list[float] = []

    def plan(self, clients, deadline_s, epochs):
        self.asked.append(deadline_s)
        if self.fail_from is not None and len(self.asked) >= self.fail_from:
            cause = Overloaded("429 rate limited: retry after 38 s (more than max_wait_s=30)", status=429,
                               retry_after_s=38.0)
            raise PlannerError(str(cause)) from cause
        return self.local.plan(clients, deadline_s, epochs)


def twin_app(train_raises_on: int | None = None, scale_from_config: bool = False) -> ClientApp:
    """Nodes answer the device query with their node config's device and report the twin's figures, for
    epoch scale 0.05 (a fixed twin) or, with ``scale_from_config``, their node config's."""
    def per_node(msg: Message, context: Context) -> TwinWorkload:
        return TwinWorkload("resnet18-cifar10", epoch_scale=context.node_config["jetpredict-epoch-scale"])

    mod = jetpredict_mod(twin=per_node if scale_from_config else TwinWorkload("resnet18-cifar10", epoch_scale=0.05))
    app = ClientApp(mods=[mod])
    mod.register_query(app)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        if context.node_id == train_raises_on:
            raise RuntimeError("CUDA out of memory")
        return Message(RecordDict({"arrays": msg.content["arrays"], "metrics": MetricRecord({"num-examples": 10})}),
                       reply_to=msg)

    return app


def strategy_of(planner, deadline_s: float = 600.0) -> JetpredictStrategy:
    return JetpredictStrategy(FedAvg(fraction_evaluate=0.0, min_train_nodes=1, min_available_nodes=1), planner,
                              deadline_s=deadline_s)


# --- 1: plans reused across rounds, close scales sharing one plan, a 429 mid-round ----------------------

def test_plans_are_reused_across_rounds_and_asked_again_when_an_input_changes(resnet_model, server_identity):
    scales = {1: 0.01, 2: 0.02, 3: 0.03}
    planner = CountingPlanner(resnet_model)
    strategy = strategy_of(planner)
    grid = InProcessGrid(twin_app(scale_from_config=True), node_contexts(scales, lambda n: {"jetpredict-device": "nano",
                                                                      "jetpredict-epoch-scale": scales[n]}))
    first = {m.metadata.dst_node_id: dict(m.content["jetpredict.plan"]) for m in configure(strategy, grid, 1)}
    assert len(planner.asked) == 3 and len(first) == 3
    second = {m.metadata.dst_node_id: dict(m.content["jetpredict.plan"]) for m in configure(strategy, grid, 2)}
    assert len(planner.asked) == 3 and second == first  # the same inputs: the same plans, not asked again
    strategy.deadline_s = 700.0
    configure(strategy, grid, 3)
    assert len(planner.asked) == 6 and set(planner.asked[3:]) == {700.0 / s for s in scales.values()}


def test_a_10000_node_fleet_of_distinct_scales_plans_within_the_rate_limit(resnet_model):
    rng = np.random.default_rng(0)
    scales = 10 ** rng.uniform(-4, -1, 10_000)  # every node its own share, over three decades
    nodes = [NodeInfo(n, DEVICES[n % len(DEVICES)], float(s)) for n, s in enumerate(scales)]
    planner = CountingPlanner(resnet_model)
    plans = plan_nodes(planner, nodes, 60.0, epochs=1)
    assert len(plans) == len(nodes) and len(planner.asked) <= REQUESTS_PER_MINUTE // 2
    for node in nodes:
        plan = plans[node.node_id]
        assert plan.epoch_scale == node.epoch_scale and plan.deadline_s == 60.0
        if plan.meets_deadline:  # planned under a deadline at most 10% tighter: the node's own still holds
            assert plan.time_s_high <= 60.0 and plan.time_s_low <= plan.time_s <= plan.time_s_high
        else:
            assert plan.reason


def test_a_shared_plan_gives_each_node_its_own_work_and_idle(resnet_model):
    # 0.0123 and 0.013 share the plan made for 0.013 (the deadline holds for both): each node's time and
    # training energy are its own work's, its idle energy its own time to the deadline.
    planner = CountingPlanner(resnet_model)
    plans = plan_nodes(planner, [NodeInfo(1, "nano", 0.0123), NodeInfo(2, "nano", 0.013)], 60.0, epochs=1)
    assert planner.asked == [pytest.approx(60.0 / 0.013)]
    a, b = plans[1], plans[2]
    assert a.mode == b.mode and a.meets_deadline and b.meets_deadline
    assert a.time_s == pytest.approx(b.time_s * 0.0123 / 0.013)
    assert a.energy_j == pytest.approx(b.energy_j * 0.0123 / 0.013)
    base_w = b.idle_energy_j / (60.0 - b.time_s)
    assert a.idle_energy_j == pytest.approx(base_w * (60.0 - a.time_s))


def test_a_rate_limit_mid_round_keeps_the_plans_made(resnet_model, server_identity):
    scales = {1: 0.01, 2: 0.02, 3: 0.03, 4: 0.04}
    planner = CountingPlanner(resnet_model, fail_from=3)  # the third request gets a 429
    strategy = strategy_of(planner)
    grid = InProcessGrid(twin_app(scale_from_config=True), node_contexts(scales, lambda n: {"jetpredict-device": "nano",
                                                                      "jetpredict-epoch-scale": scales[n]}))
    sent = configure(strategy, grid, 1)
    assert len(planner.asked) == 3  # stopped at the 429: asking on would only fail alike
    assert sorted(m.metadata.dst_node_id for m in sent) == [1, 2]  # the nodes planned train
    unplanned = [r for r in strategy.records if r.node_id in (3, 4)]
    assert all(not r.selected and "not planned this round" in r.reason and "429" in r.reason for r in unplanned)
    # The next round asks only for what is missing.
    planner.fail_from = None
    assert sorted(m.metadata.dst_node_id for m in configure(strategy, grid, 2)) == [1, 2, 3, 4]
    assert len(planner.asked) == 5


# --- 2: an epoch scale too small to plan ----------------------------------------------------------------

@pytest.mark.parametrize("tiny", [1e-307, 5e-324])
def test_a_scale_too_small_to_plan_is_refused_for_its_node_only_by_a_local_planner(resnet_model, tiny,
                                                                                   server_identity):
    scales = {1: tiny, 2: 0.02}
    strategy = strategy_of(LocalPlanner(resnet_model))
    grid = InProcessGrid(twin_app(scale_from_config=True), node_contexts(scales, lambda n: {"jetpredict-device": "orin-nx",
                                                                      "jetpredict-epoch-scale": scales[n]}))
    assert [m.metadata.dst_node_id for m in configure(strategy, grid)] == [2]
    record = next(r for r in strategy.records if r.node_id == 1)
    assert not record.selected and f"epoch scale {tiny:g} is too small" in record.reason


def test_a_scale_too_small_to_plan_is_refused_before_either_planner_is_asked(resnet_model, service_url):
    nodes = [NodeInfo(1, "nano", 1e-307), NodeInfo(2, "nano", 0.02)]
    for planner in (LocalPlanner(resnet_model), HttpPlanner(service_url, {"rows": resnet_records()})):
        plans = plan_nodes(planner, nodes, 600.0, epochs=1)
        assert plans[2].mode is not None
        assert plans[1].mode is None and "epoch scale 1e-307 is too small" in plans[1].reason, planner
        assert "too small" in plans[1].reason


# --- 3: one device's workload refused ---------------------------------------------------------------------

def test_one_devices_refused_workload_leaves_only_its_clients_unplanned(service_url):
    nodes = [NodeInfo(1, "agx-xavier", 0.01), NodeInfo(2, "nano", 0.01), NodeInfo(3, "orin-nx", 0.01)]
    planner = HttpPlanner(service_url, {"nano": "no-such-workload", "*": {"rows": resnet_records()}})
    plans = plan_nodes(planner, nodes, 60.0, epochs=1)
    assert plans[1].mode is not None and plans[3].mode is not None
    assert plans[2].mode is None and not plans[2].meets_deadline and "404" in plans[2].reason
    # Refused for every device: no plan at all, the round is skipped.
    with pytest.raises(PlannerError, match="404"):
        plan_nodes(HttpPlanner(service_url, {"nano": "no-such-workload"}), nodes[1:2], 60.0, epochs=1)


# --- 4: the twin's epoch scale is the node's answer -------------------------------------------------------

def test_a_fixed_twin_answers_the_device_query_with_its_own_scale(resnet_model, server_identity):
    strategy = strategy_of(LocalPlanner(resnet_model), deadline_s=1000.0)
    grid = InProcessGrid(twin_app(), node_contexts([1], lambda n: {"jetpredict-device": "orin-nx"}))
    replies = grid.send_and_receive(configure(strategy, grid))
    strategy.aggregate_train(1, replies)
    record = strategy.records[0]
    assert record.epoch_scale == 0.05 and record.selected
    # The plan costs the work the twin simulates: its interval holds the twin's time.
    assert record.pred_time_s_low <= record.reported_time_s <= record.pred_time_s_high


def test_a_mod_scale_that_contradicts_its_fixed_twin_is_refused():
    with pytest.raises(InputError, match="epoch_scale"):
        jetpredict_mod(epoch_scale=1.0, twin=TwinWorkload("resnet18-cifar10", epoch_scale=0.05))
    jetpredict_mod(epoch_scale=0.05, twin=TwinWorkload("resnet18-cifar10", epoch_scale=0.05))


# --- 5: a twin workload checks its numbers ----------------------------------------------------------------

@pytest.mark.parametrize("scale", [0, 0.0, -1, float("nan"), float("inf"), "abc", True, None])
def test_a_twin_refuses_an_epoch_scale_that_is_not_a_positive_number(scale):
    with pytest.raises(InputError, match="epoch_scale") as caught:
        TwinWorkload("resnet18-cifar10", epoch_scale=scale)
    assert caught.value.field == "epoch_scale"


@pytest.mark.parametrize("epochs", [0, -2, 1.5, True, "3"])
def test_a_twin_refuses_epochs_that_are_not_a_whole_number_of_at_least_one(epochs):
    with pytest.raises(InputError, match="epochs") as caught:
        TwinWorkload("resnet18-cifar10", epochs=epochs)
    assert caught.value.field == "epochs"
    with pytest.raises(InputError, match="epochs"):
        twin_round("orin-nx", preset_mode("orin-nx", "fastest"), TwinWorkload("resnet18-cifar10"), epochs)


@pytest.mark.parametrize("name", ["nope", "resnet18", " "])
def test_a_twin_refuses_a_workload_name_the_twin_can_never_run(name):
    # The node would pass the device query and planning, then fail every round with this same text.
    with pytest.raises(InputError, match="workload") as caught:
        TwinWorkload(name, epoch_scale=1)
    assert caught.value.field == "workload"
    if name.strip():
        assert isinstance(caught.value, UnknownWorkloadError)
        # The text the round would have failed with (tracing a name the twin has no cache for needs torch).
        pytest.importorskip("torch")
        with pytest.raises(UnknownWorkloadError) as in_a_round:
            workload_complexity(name)
        assert caught.value.message == in_a_round.value.message


def test_a_twin_keeps_the_workload_names_tracing_may_run():
    # torchvision:NAME and module:factory are traced on the host when a round needs them: not refused here.
    assert TwinWorkload("torchvision:resnet50").workload == "torchvision:resnet50"
    assert TwinWorkload("my_models:make").workload == "my_models:make"


def test_a_valid_twin_costs_positive_work():
    assert TwinWorkload("resnet18-cifar10", epoch_scale="0.5").epoch_scale == 0.5  # a node-config string
    figures = twin_round("orin-nx", preset_mode("orin-nx", "fastest"), TwinWorkload("resnet18-cifar10", epochs=2), 2)
    assert figures["time_s"] > 0 and figures["energy_j"] > 0
    assert TwinWorkload("resnet18-cifar10").epochs is None


# --- 6: a node whose training raises -----------------------------------------------------------------------

def test_a_node_whose_training_raises_is_counted_failed_not_late(resnet_model, server_identity):
    devices = {1: "agx-xavier", 2: "orin-agx"}
    strategy = strategy_of(LocalPlanner(resnet_model), deadline_s=1000.0)
    grid = InProcessGrid(twin_app(train_raises_on=2), node_contexts(devices, lambda n: {
        "jetpredict-device": devices[n]}))
    sent = configure(strategy, grid)
    assert len(sent) == 2
    _, metrics = strategy.aggregate_train(1, grid.send_and_receive(sent))
    assert metrics[MISSES_METRIC] == 0 and metrics[FAILED_METRIC] == 1
    failed = next(r for r in strategy.records if r.node_id == 2)
    assert failed.failed and not failed.replied and failed.deadline_missed is None
    assert "training failed" in failed.reason and "CUDA out of memory" in failed.reason
    ok = next(r for r in strategy.records if r.node_id == 1)
    assert not ok.failed and ok.deadline_missed is False and ok.reason is None
    assert math.isfinite(ok.reported_time_s)
    # A selected node that never replies is still a deadline miss, not a failure.
    strategy = strategy_of(LocalPlanner(resnet_model), deadline_s=1000.0)
    grid = InProcessGrid(twin_app(), node_contexts(devices, lambda n: {"jetpredict-device": devices[n]}))
    replies = [r for r in grid.send_and_receive(configure(strategy, grid)) if r.metadata.src_node_id == 1]
    _, metrics = strategy.aggregate_train(1, replies)
    assert metrics[MISSES_METRIC] == 1 and metrics[FAILED_METRIC] == 0


# --- review: a shared plan, its node's own deadline, refusals kept, a refit reached ----------------------

def test_a_node_whose_own_deadline_the_shared_plans_fastest_mode_meets_trains(resnet_model):
    """Planned at 0.013 (its 0.0123 rounded up), the fastest mode misses the shared deadline D / 0.013 but
    meets the node's own D / 0.0123: the node is planned at its own scale and trains (it used to be left
    out, 'cannot meet')."""
    planner = LocalPlanner(resnet_model)
    fastest = plan_nodes(planner, [NodeInfo(1, "nano", 1.0)], 1.0, 1)[1].time_s_high  # s per epoch, upper
    deadline = 0.0126 * fastest
    counting = _CountingPlanner(resnet_model)
    plan = plan_nodes(counting, [NodeInfo(1, "nano", 0.0123)], deadline, 1)[1]
    assert plan.time_s_high <= deadline and plan.meets_deadline and plan.reason is None
    # planned again at its own scale: its idle until the deadline counted (the shared plan, which missed
    # its deadline, had none to give)
    assert len(counting.calls) == 2 and plan.idle_energy_j > 0
    missed = plan_nodes(planner, [NodeInfo(1, "nano", 0.0123)], 0.012 * fastest, 1)[1]
    assert not missed.meets_deadline and "cannot meet" in missed.reason


def test_binary_noise_in_a_scale_is_no_work():
    assert planning_scale(0.1 + 0.2) == 0.3 and planning_scale(0.0123) == 0.013 and planning_scale(0.02) == 0.02


class _CountingPlanner:
    """A LocalPlanner that counts the devices of each request and refuses ``refused`` devices' groups."""

    confidence = None

    def __init__(self, model, refused: tuple[str, ...] = ()) -> None:
        self.local, self.refused, self.calls = LocalPlanner(model), refused, []

    def plan(self, clients, deadline_s, epochs):
        self.calls.append(sorted(c["device"] for c in clients))
        if any(c["device"] in self.refused for c in clients):
            raise PlannerError(f"answered 404: no workload for {self.refused[0]}")
        return self.local.plan(clients, deadline_s, epochs)


def test_a_refused_device_is_not_asked_again_every_round_and_is_named(resnet_model):
    planner = _CountingPlanner(resnet_model, refused=("nano",))
    nodes = [NodeInfo(1, "nano", 0.01), NodeInfo(2, "nano", 0.02)]
    cache: dict = {}
    for _ in range(3):
        with pytest.raises(PlannerError, match="404"):  # no node has a plan: the round is skipped
            plan_nodes(planner, nodes, 60.0, 1, cache)
    assert len(planner.calls) == 2  # once per planning scale, then kept
    mixed = _CountingPlanner(resnet_model, refused=("nano",))
    nodes = [NodeInfo(1, "nano", 0.01), NodeInfo(2, "orin-nx", 0.02)]
    for _ in range(3):
        plans = plan_nodes(mixed, nodes, 60.0, 1, cache)
        assert plans[2].mode is not None and plans[1].mode is None
        assert plans[1].reason.startswith("not planned at epoch scale 0.01") and "404" in plans[1].reason
    assert mixed.calls == [["nano"], ["orin-nx"]]  # each asked once over the three rounds (a new planner)


def test_cached_plans_are_asked_for_again_after_a_number_of_rounds(resnet_model):
    """A planner that cannot say what its plans rest on (no ``basis``): a refit reaches them within
    PLAN_CACHE_ROUNDS rounds."""
    planner = _CountingPlanner(resnet_model)
    nodes = [NodeInfo(1, "orin-nx", 0.01)]
    cache: dict = {}
    for _ in range(PLAN_CACHE_ROUNDS):
        plan_nodes(planner, nodes, 60.0, 1, cache)
    assert len(planner.calls) == 1  # not asked again before then
    plan_nodes(planner, nodes, 60.0, 1, cache)
    assert len(planner.calls) == 2


def test_an_outage_when_cached_plans_expire_keeps_them_one_more_round(resnet_model):
    """A planner unreachable in the round its plans are due to be asked again: the round keeps them (it was
    skipped, though it had plans)."""
    planner = _CountingPlanner(resnet_model)
    nodes = [NodeInfo(1, "orin-nx", 0.01)]
    cache: dict = {}
    for _ in range(PLAN_CACHE_ROUNDS):
        kept = plan_nodes(planner, nodes, 60.0, 1, cache)[1].mode

    def unreachable(clients, deadline_s, epochs):
        raise PlannerError("the service is unreachable") from ConnectionFailed("no route")

    planner.plan = unreachable
    assert plan_nodes(planner, nodes, 60.0, 1, cache)[1].mode == kept
