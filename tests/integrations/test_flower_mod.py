"""The client mod: a plain Flower ClientApp, its train function untouched, gains jetpredict with one mod --
the device query is answered, the planned mode applied and restored (fake nvpmodel under
JETPREDICT_SYSFS_ROOT), the round measured in one window, and the figures reach the reply's metrics."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower integration needs the [flower] extra")

from flower_grid import InProcessGrid, node_contexts, train_message
from flwr.app import ArrayRecord, ConfigRecord, Context, Error, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp.strategy import FedAvg
from jetpredict.models.catalogue import load_device
from jetpredict.models.errors import InputError
from jetpredict.profiler.powermode import PrivilegedCommandError, detect_controller

from jetpredict.integrations.flower import (
    ENERGY_METRIC,
    FAILED_METRIC,
    FASTEST_PRESET,
    MISSES_METRIC,
    NODE_RECORD,
    PLAN_RECORD,
    POWER_METRIC,
    QUERY_RECORD,
    QUERY_TYPE,
    REPORT_RECORD,
    SIMULATED_METRIC,
    TIME_METRIC,
    ClientPlan,
    JetpredictStrategy,
    TwinWorkload,
    jetpredict_mod,
    twin_round,
)

DEVICES = {1: "agx-xavier", 2: "orin-nx", 3: "nano"}
SCALES = {1: 0.01, 2: 0.02, 3: 0.05}
WORKLOAD = "resnet18-cifar10"
ORIN = "orin-nx"
VDD_IN_W = 15.0  # 5000 mV x 3000 mA on the fake INA3221


def plain_app(mod, train_s: float = 0.0, trained: list | None = None) -> ClientApp:
    """A user's ClientApp: Flower only; its train function knows nothing of jetpredict."""
    app = ClientApp(mods=[mod])

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        if trained is not None:
            trained.append(context.node_id)
        time.sleep(train_s)
        return Message(RecordDict({"arrays": ArrayRecord([np.full(3, float(context.node_id))]),
                                   "metrics": MetricRecord({"num-examples": context.node_id})}), reply_to=msg)

    return app


def _first_round(model, twin_scales: dict[int, float]
                 ) -> tuple[InProcessGrid, JetpredictStrategy, list, list[int]]:
    """A plain app with the per-node mod (each node's twin at ``twin_scales``) under the strategy: its grid, the
    strategy, the first round's train messages and the list of nodes whose train function ran."""
    mod = jetpredict_mod(device=lambda ctx: DEVICES[ctx.node_id], epoch_scale=lambda ctx: SCALES[ctx.node_id],
                         twin=lambda msg, ctx: TwinWorkload(WORKLOAD, epoch_scale=twin_scales[ctx.node_id]))
    trained: list[int] = []
    grid = InProcessGrid(plain_app(mod, trained=trained), node_contexts(DEVICES, lambda n: {}))
    inner = FedAvg(fraction_evaluate=0.0, min_train_nodes=1, min_available_nodes=len(DEVICES))
    strategy = JetpredictStrategy(inner, model, deadline_s=600.0, local_epochs=2)
    messages = list(strategy.configure_train(1, ArrayRecord([np.zeros(3)]), ConfigRecord(), grid))
    return grid, strategy, messages, trained


def test_a_plain_client_app_gains_jetpredict_with_one_mod(resnet_model, server_identity):
    grid, strategy, messages, trained = _first_round(resnet_model, SCALES)
    # Flower routes query.jetpredict only to registered functions: the app answered with an error, and the
    # strategy asked again by a train message that the mod answered without training.
    kinds = [(m.metadata.message_type, QUERY_RECORD in m.content.config_records) for m in grid.sent]
    assert kinds[:len(DEVICES)] == [(QUERY_TYPE, False)] * len(DEVICES)
    assert kinds[len(DEVICES):2 * len(DEVICES)] == [("train", True)] * len(DEVICES)
    assert trained == []
    assert {r.node_id: r.device for r in strategy.records} == DEVICES
    assert messages and all(PLAN_RECORD in m.content.config_records for m in messages)

    replies = list(grid.send_and_receive(messages))
    assert sorted(trained) == sorted(m.metadata.dst_node_id for m in messages)
    for reply in replies:
        node = reply.metadata.src_node_id
        plan = ClientPlan.from_config(next(m for m in messages if m.metadata.dst_node_id == node)
                                      .content.config_records[PLAN_RECORD], node)
        expected = twin_round(DEVICES[node], plan.power_mode(), TwinWorkload(WORKLOAD, SCALES[node]), 2)
        metrics = reply.content.metric_records["metrics"]
        assert metrics["num-examples"] == node  # the app's own metrics are kept
        assert metrics[TIME_METRIC] == pytest.approx(expected["time_s"])
        assert metrics[ENERGY_METRIC] == pytest.approx(expected["energy_j"])
        assert metrics[POWER_METRIC] == pytest.approx(expected["avg_power_w"]) and metrics[SIMULATED_METRIC] == 1.0
        assert reply.content.config_records[REPORT_RECORD]["source"] == "simulated"
    arrays, metrics = strategy.aggregate_train(1, replies)
    assert arrays is not None and metrics["jetpredict-selected"] == len(messages)
    assert all(r.replied and r.source == "simulated" for r in strategy.records if r.selected)


def test_the_wrapped_strategy_is_left_as_it_was(resnet_model, server_identity):
    """Its settings are its own before and after the round; during its configure_train only
    ``min_available_nodes`` is lowered, to the planned nodes its Grid lists (the connected nodes met it)."""
    seen = []

    class WatchedFedAvg(FedAvg):
        def configure_train(self, server_round, arrays, config, grid):
            seen.append((dict(vars(self)), len(list(grid.get_node_ids()))))
            return super().configure_train(server_round, arrays, config, grid)

    mod = jetpredict_mod(device=lambda ctx: DEVICES[ctx.node_id], epoch_scale=lambda ctx: SCALES[ctx.node_id],
                         twin=lambda msg, ctx: TwinWorkload(WORKLOAD, epoch_scale=SCALES[ctx.node_id]))
    grid = InProcessGrid(plain_app(mod), node_contexts(DEVICES, lambda n: {}))
    inner = WatchedFedAvg(fraction_evaluate=0.0, min_train_nodes=1, min_available_nodes=len(DEVICES))
    before = dict(vars(inner))
    # A deadline that only some nodes meet: fewer planned nodes than the inner strategy's min_available_nodes.
    strategy = JetpredictStrategy(inner, resnet_model, deadline_s=60.0, local_epochs=2)
    messages = list(strategy.configure_train(1, ArrayRecord([np.zeros(3)]), ConfigRecord(), grid))
    assert 0 < len(messages) < len(DEVICES)
    strategy.aggregate_train(1, grid.send_and_receive(messages))
    assert vars(inner) == before
    [(during, listed)] = seen
    assert listed < len(DEVICES) and during == {**before, "min_available_nodes": listed}


def test_a_per_node_twin_whose_scale_is_not_the_nodes_fails_its_round_not_the_deadline(resnet_model,
                                                                                      server_identity):
    """The per-node form with the twin's scale 3x the node's: the plan is for the node's work, the twin would
    cost 3x as much and miss every deadline. Each node's training fails naming both scales (counted failed,
    not missed), and the app's train function never runs."""
    twin_scales = {1: 0.03, 2: 0.06, 3: 0.15}
    grid, strategy, messages, trained = _first_round(resnet_model, twin_scales)
    assert messages
    replies = list(grid.send_and_receive(messages))
    assert trained == [] and all(r.has_error() for r in replies)
    _, metrics = strategy.aggregate_train(1, replies)
    assert metrics[FAILED_METRIC] == len(messages) and metrics[MISSES_METRIC] == 0
    for record in (r for r in strategy.records if r.selected):
        assert record.failed and record.deadline_missed is None
        assert (f"epoch_scale={SCALES[record.node_id]} contradicts the twin's "
                f"epoch_scale={twin_scales[record.node_id]}") in record.reason


def test_a_plan_less_round_refuses_an_epoch_scale_given_against_the_twins():
    """Without a plan the contradiction is the mod's own arguments: refused as the constant form is."""
    mod = jetpredict_mod(device="nano", epoch_scale=lambda ctx: 1.0,
                         twin=lambda msg, ctx: TwinWorkload("lenet5-mnist", epoch_scale=3.0))
    with pytest.raises(InputError, match=r"epoch_scale=1\.0 contradicts the twin's epoch_scale=3\.0"):
        plain_app(mod)(train_message(None), context())
    # Alike, or with no epoch_scale given (the twin's is the node's), the round is costed.
    for scale in (lambda ctx: 3.0, None):
        alike = jetpredict_mod(device="nano", epoch_scale=scale,
                               twin=lambda msg, ctx: TwinWorkload("lenet5-mnist", epoch_scale=3.0))
        reply = plain_app(alike)(train_message(None), context())
        assert reply.content.config_records[REPORT_RECORD]["epoch-scale"] == 3.0


def test_off_a_jetson_a_mod_without_a_twin_says_how_a_flower_node_runs_there(fake_root, monkeypatch, tmp_path):
    """No nvpmodel: the planned round fails before training, the reason names the mod's ``twin=`` (the Flower
    way off a Jetson) and keeps the controller's own cause."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvpmodel anywhere
    trained: list[int] = []
    with pytest.raises(PrivilegedCommandError) as caught:
        plain_app(jetpredict_mod(), trained=trained)(train_message(maxn_plan()), context())
    text = str(caught.value)
    assert trained == []
    assert "jetpredict_mod(twin=TwinWorkload(" in text and "on a Jetson" in text and ORIN in text
    assert "nvpmodel not found on PATH" in text  # the cause, kept
    assert isinstance(caught.value.__cause__, PrivilegedCommandError)


def maxn_plan() -> ClientPlan:
    m = load_device(ORIN).preset("MAXN")
    return ClientPlan(node_id=7, device=ORIN, epoch_scale=1.0, epochs=1, deadline_s=60.0, meets_deadline=True,
                      mode=m.mode, cpu_cores=int(m.cpu_cores), cpu_mhz=float(m.cpu_mhz), gpu_mhz=float(m.gpu_mhz),
                      emc_mhz=float(m.emc_mhz))


def switches(root) -> list[str]:
    return [c[-1] for c in root.calls() if c[0] == "nvpmodel" and "-m" in c]


def context() -> Context:
    return Context(run_id=1, node_id=7, node_config={"jetpredict-device": ORIN}, state=RecordDict(), run_config={})


def test_the_mod_runs_train_at_the_planned_mode_measures_it_and_restores(orin):
    status = []
    app = ClientApp(mods=[jetpredict_mod(sampler_hz=50.0)])

    @app.train()
    def train(msg: Message, ctx: Context) -> Message:
        status.append(orin.read("/var/lib/nvpmodel/status"))
        time.sleep(0.25)
        return Message(RecordDict({"metrics": MetricRecord({"num-examples": 4})}), reply_to=msg)

    reply = app(train_message(maxn_plan()), context())
    assert status == ["pmode:0000"] and switches(orin) == ["0", "2"]  # MAXN inside, 15W again after
    assert orin.read("/var/lib/nvpmodel/status") == "pmode:0002"
    metrics = reply.content.metric_records["metrics"]
    assert metrics["num-examples"] == 4 and metrics[SIMULATED_METRIC] == 0.0
    assert metrics[TIME_METRIC] >= 0.25
    assert metrics[ENERGY_METRIC] == pytest.approx(VDD_IN_W * metrics[TIME_METRIC], rel=1e-6)
    assert metrics[POWER_METRIC] == pytest.approx(VDD_IN_W)
    report = reply.content.config_records[REPORT_RECORD]
    assert report["source"] == "measured" and report["mode"] == "MAXN" and report["mode-applied"] is True


def test_an_exception_in_train_restores_the_mode(orin):
    app = ClientApp(mods=[jetpredict_mod()])
    cores = []

    @app.train()
    def train(msg: Message, ctx: Context) -> Message:
        cores.append(detect_controller("jetson", ORIN).read_back().cpu_cores)
        raise ZeroDivisionError("lost")

    with pytest.raises(ZeroDivisionError):
        app(train_message(maxn_plan()), context())
    assert cores == [8]  # MAXN runs all 8 cores
    assert switches(orin) == ["0", "2"] and orin.read("/var/lib/nvpmodel/status") == "pmode:0002"
    assert detect_controller("jetson", ORIN).read_back().cpu_cores == 4  # 15W runs 4 cores


def test_without_a_plan_or_a_meter_the_mode_is_left_alone_and_energy_is_null(fake_root):
    from jetpredict.profiler.power import NullPowerMeter

    app = plain_app(jetpredict_mod(meter=NullPowerMeter("no sensor found")))
    reply = app(train_message(None), context())
    metrics = reply.content.metric_records["metrics"]
    assert TIME_METRIC in metrics and ENERGY_METRIC not in metrics and POWER_METRIC not in metrics
    report = reply.content.config_records[REPORT_RECORD]
    assert report["mode-applied"] is False and report["energy-null-reason"] == "none: no sensor found"
    assert switches(fake_root) == []


def test_a_message_without_a_plan_runs_at_the_default_mode_applied_and_restored(orin):
    """``default_mode``: a plain strategy's train message (no plan) runs at the fastest preset, or at the named
    one, through the same controller (switched back to 15W after); a plan still wins over it."""
    from jetpredict.models.errors import InputError

    status: list[str] = []
    app = ClientApp(mods=[jetpredict_mod(sampler_hz=50.0, default_mode=FASTEST_PRESET)])

    @app.train()
    def train(msg: Message, ctx: Context) -> Message:
        status.append(orin.read("/var/lib/nvpmodel/status"))
        return Message(RecordDict({"metrics": MetricRecord({"num-examples": 4})}), reply_to=msg)

    reply = app(train_message(None), context())
    assert status == ["pmode:0000"] and switches(orin) == ["0", "2"]  # MAXN inside, 15W again after
    assert orin.read("/var/lib/nvpmodel/status") == "pmode:0002"
    report = reply.content.config_records[REPORT_RECORD]
    assert report["mode"] == "MAXN" and report["mode-applied"] is True and report["source"] == "measured"
    # A named preset (10W, id 1); a plan (MAXN) wins over the default.
    named = ClientApp(mods=[jetpredict_mod(sampler_hz=50.0, default_mode="10W")])
    named.train()(train)
    assert named(train_message(None), context()).content.config_records[REPORT_RECORD]["mode"] == "10W"
    assert named(train_message(maxn_plan()), context()).content.config_records[REPORT_RECORD]["mode"] == "MAXN"
    assert status[1:] == ["pmode:0001", "pmode:0000"] and switches(orin)[2:] == ["1", "2", "0", "2"]
    # No device to resolve the default against: refused before anything is switched or trained.
    bare = Context(run_id=1, node_id=7, node_config={}, state=RecordDict(), run_config={})
    with pytest.raises(InputError, match="default_mode='fastest' needs the device"):
        app(train_message(None), bare)
    assert len(status) == 3 and len(switches(orin)) == 6


def test_the_device_query_and_other_messages():
    trained: list[int] = []
    mod = jetpredict_mod(epoch_scale=0.5)
    app = plain_app(mod, trained=trained)
    query = train_message(None)
    query.content = RecordDict({QUERY_RECORD: ConfigRecord({"keys": ["jetpredict-device"]})})
    answer = app(query, context()).content.config_records[NODE_RECORD]
    assert answer["device"] == ORIN and answer["epoch-scale"] == 0.5 and trained == []
    with pytest.raises(ValueError, match="No query function registered with name 'jetpredict'"):
        app(train_message(None, QUERY_TYPE), context())  # Flower's routing: the mod never sees it
    mod.register_query(app)
    assert app(train_message(None, QUERY_TYPE), context()).content.config_records[NODE_RECORD]["device"] == ORIN

    @app.evaluate()
    def evaluate(msg: Message, ctx: Context) -> Message:
        return Message(RecordDict({"metrics": MetricRecord({"accuracy": 0.5})}), reply_to=msg)

    reply = app(train_message(None, "evaluate"), context())
    assert dict(reply.content.metric_records["metrics"]) == {"accuracy": 0.5}  # passed through untouched


def test_a_train_message_of_a_named_action_is_planned_and_measured_too():
    """``@app.train("custom")`` receives ``train.custom`` messages: train messages all the same."""
    app = ClientApp(mods=[jetpredict_mod(twin=TwinWorkload(WORKLOAD, epoch_scale=0.02))])

    @app.train("custom")
    def train(msg: Message, ctx: Context) -> Message:
        return Message(RecordDict({"metrics": MetricRecord({"num-examples": 1})}), reply_to=msg)

    reply = app(train_message(None, "train.custom"), context())
    assert TIME_METRIC in reply.content.metric_records["metrics"]
    assert reply.content.config_records[REPORT_RECORD]["source"] == "simulated"


def test_an_error_reply_of_train_is_passed_on_as_it_is():
    app = ClientApp(mods=[jetpredict_mod(twin=TwinWorkload(WORKLOAD, epoch_scale=0.02))])

    @app.train()
    def train(msg: Message, ctx: Context) -> Message:
        return Message(Error(code=0, reason="the data loader failed"), reply_to=msg)

    reply = app(train_message(None), context())
    assert reply.has_error() and reply.error.reason == "the data loader failed"
