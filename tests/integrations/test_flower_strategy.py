"""Server side of the Flower integration: plans per node (epoch scale, in process and over HTTP), client
selection, plan records in the train messages, and what the strategy records from the replies.

The selection tests drive a real ``ClientApp`` through a small in-process Grid (Flower's own Grid base
class, messages handed to the app directly); ``test_flower_simulation.py`` runs the simulation engine."""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower integration needs the [flower] extra")

from flower_fixtures import PUBLISHED_CSV, resnet_records
from flower_grid import InProcessGrid, node_contexts
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp.strategy import FedAvg
from flwr.supercore.task_identity import TaskIdentity
from jetpredict.models.errors import InputError
from jetpredict.predictor.limits import MAX_EPOCHS
from jetpredict.predictor.service import plan_fleet

from jetpredict.integrations.flower import (
    ENERGY_METRIC,
    ENERGY_REPORTED_METRIC,
    PLAN_RECORD,
    PRED_ENERGY_METRIC,
    TIME_METRIC,
    ClientPlan,
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
    twin_round,
)
from jetpredict.integrations.flower.planners import PROVENANCE_KEYS
from jetpredict.integrations.flower.strategy import NOT_CHEAPEST

DEVICES = {1: "agx-xavier", 2: "orin-agx", 3: "nano", 4: "orin-nx", 5: "xavier-nx", 6: "orin-nano"}
SCALES = {1: 0.01, 2: 0.02, 3: 0.05, 4: 0.01, 5: 0.02, 6: 0.03}
WORKLOAD = "resnet18-cifar10"


def client_plan(model, device: str, deadline_s: float, epochs: int) -> dict:
    """The service's plan of one client, as the JSON-shaped dict of ``POST /v1/fleet-plans``."""
    plan = plan_fleet(model, [{"id": "a", "device": device}], deadline_s, epochs=epochs)
    return (plan.as_dict() if hasattr(plan, "as_dict") else plan)["clients"][0]


def test_epoch_scale_plans_under_the_scaled_deadline(resnet_model):
    planner = LocalPlanner(resnet_model)
    deadline_s, scale = 1500.0, 0.25
    plans = plan_nodes(planner, [NodeInfo(1, "nano", 1.0), NodeInfo(2, "nano", scale)], deadline_s, epochs=2)
    direct = client_plan(resnet_model, "nano", deadline_s, 2)
    scaled = client_plan(resnet_model, "nano", deadline_s / scale, 2)
    whole, quarter = plans[1], plans[2]
    assert (whole.mode, whole.meets_deadline) == (direct["mode"], direct["meets_deadline"])
    assert whole.time_s == pytest.approx(direct["round_time_s"])
    assert quarter.mode == scaled["mode"] and quarter.meets_deadline == scaled["meets_deadline"]
    assert quarter.time_s == pytest.approx(scale * scaled["round_time_s"])
    assert quarter.time_s_high == pytest.approx(scale * scaled["round_time_s_high"])
    for p in (whole, quarter):
        assert p.time_s_low <= p.time_s <= p.time_s_high
        assert p.energy_j_low <= p.energy_j <= p.energy_j_high
    # A quarter of the work meets a deadline the whole epoch cannot.
    assert quarter.meets_deadline and not whole.meets_deadline and whole.reason


def test_one_fleet_plan_per_epoch_scale_and_no_prediction_per_mode(resnet_model, monkeypatch):
    from jetpredict.predictor import service

    calls = {"plan_fleet": 0, "predict": 0, "predict_space": 0}

    def counted(name):
        real = getattr(service, name)

        def spy(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(service, name, spy)

    for name in calls:
        counted(name)
    nodes = [NodeInfo(n, DEVICES[n], SCALES[n]) for n in DEVICES]  # 6 device types, 3 epoch scales
    plans = plan_nodes(LocalPlanner(resnet_model), nodes, 120.0, epochs=2)
    scales = len(set(SCALES.values()))
    assert calls["plan_fleet"] == scales and calls["predict"] == 0
    assert calls["predict_space"] == sum(len({DEVICES[n] for n in DEVICES if SCALES[n] == s})
                                         for s in set(SCALES.values()))  # one per device type in each plan
    for p in plans.values():  # every interval comes from the fleet plan
        assert p.time_s_low <= p.time_s <= p.time_s_high and p.energy_j_low <= p.energy_j <= p.energy_j_high
        assert p.avg_power_w_low <= p.avg_power_w <= p.avg_power_w_high


def test_local_planner_with_models_per_device(resnet_model):
    planner = LocalPlanner({"nano": resnet_model})
    plans = plan_nodes(planner, [NodeInfo(1, "nano", 0.01), NodeInfo(2, "orin-nx", 0.01)], 600.0, epochs=1)
    assert plans[1].mode is not None
    assert not plans[2].meets_deadline and "no workload model" in plans[2].reason
    with pytest.raises(InputError, match="unknown-board|device"):
        LocalPlanner({"unknown-board": resnet_model})


@pytest.fixture(scope="module")
def nano_lenet_model():
    """A second workload: ``my-lenet``, fitted on the epoch totals of 4 twin-simulated Nano rows (simulated, nano
    reference, no stall/compute columns)."""
    from jetpredict.models.profile_files import read_profile_csv, rows_to_records
    from jetpredict.models.profile_rows import validate_records
    from jetpredict.predictor.bundled import fit_workload

    rows = read_profile_csv(PUBLISHED_CSV.parent / "nano-simulated.csv")
    rows = rows[rows["workload"] == "lenet5-mnist"].drop_duplicates("mode").head(4).copy()
    rows["workload"] = "my-lenet"
    rows = rows.drop(columns=["stall_time_s", "compute_time_s"])
    return fit_workload(validate_records(rows_to_records(rows)))


def test_local_planner_answer_states_its_provenance(resnet_model, tmp_path):
    """The planner's answer says what it rests on, as the service's fleet answer does: at the top the least
    trusted over its devices, in each client entry that client's own (its device's), and the plan each
    node gets carries its own (model object or model file alike)."""
    from jetpredict.predictor.bundled import save_model
    from jetpredict.predictor.service import fleet_answer

    clients = [{"id": "1", "device": "agx-xavier"}, {"id": "2", "device": "nano"}]
    service = fleet_answer(resnet_model, clients, 600.0, epochs=1, workload_id="my-resnet")
    expected = {k: service[k] for k in PROVENANCE_KEYS}
    assert expected["workload_id"] == "my-resnet" and expected["workload_source"] == "published"
    assert expected["profiled_modes"] == 4 and expected["model_version"]
    # Each client's own: as a plan of that client alone states it. AGX Xavier's figures rest on its published
    # sweeps; Nano's, moved across devices, on Nano's simulated ones too, which is the plan's top level.
    own = {c["id"]: {k: fleet_answer(resnet_model, [c], 600.0, epochs=1, workload_id="my-resnet")[k]
                     for k in PROVENANCE_KEYS} for c in clients}
    assert (own["1"]["reference_source"], own["2"]["reference_source"]) == ("published", "simulated")
    assert expected["reference_source"] == "simulated"
    assert all({k: c[k] for k in PROVENANCE_KEYS if k != "workload_id"}
               == {k: v for k, v in own[c["id"]].items() if k != "workload_id"} for c in service["clients"])
    save_model(resnet_model, tmp_path / "m.json")
    for model in (resnet_model, tmp_path / "m.json"):
        answer = LocalPlanner(model).plan(clients, 600.0, 1)
        assert {k: answer[k] for k in PROVENANCE_KEYS} == expected and answer["provenance_note"] is None
        assert all({k: c[k] for k in PROVENANCE_KEYS} == own[c["id"]] for c in answer["clients"])
    plans = plan_nodes(LocalPlanner(resnet_model), [NodeInfo(1, "agx-xavier", 1.0), NodeInfo(2, "nano", 1.0)],
                       600.0, epochs=1)
    for n, plan in plans.items():
        assert {k: getattr(plan, k) for k in PROVENANCE_KEYS} == own[str(n)]
        assert plan.cross_device == (n == 2)
        assert ClientPlan.from_config(plan.to_config(), n).provenance() == plan.provenance()


def test_models_per_device_give_provenance_per_client(resnet_model, nano_lenet_model):
    """Clients planned by different models each carry their own model's provenance; the top level is the
    least trusted sources and the fewest profiled modes, says so, and leaves out what differs."""
    from jetpredict.predictor.service import fleet_answer

    planner = LocalPlanner({"nano": nano_lenet_model, "*": resnet_model})
    clients = [{"id": "1", "device": "agx-xavier"}, {"id": "2", "device": "nano"}]
    answer = planner.plan(clients, 600.0, 1)
    own = {c["id"]: {k: c[k] for k in PROVENANCE_KEYS} for c in answer["clients"]}
    for client, model, workload in ((clients[0], resnet_model, "my-resnet"), (clients[1], nano_lenet_model, "my-lenet")):
        service = fleet_answer(model, [client], 600.0, epochs=1, workload_id=workload)
        assert own[client["id"]] == {k: service[k] for k in PROVENANCE_KEYS}
    assert own["2"]["workload_source"] == "simulated" and own["1"]["workload_source"] == "published"
    assert answer["workload_source"] == "simulated" and answer["reference_source"] == "simulated"
    # The first client's model fitted its components, the second's only totals: the plan's split is so.
    assert (own["1"]["split_source"], own["2"]["split_source"]) == ("components", "epoch_totals")
    assert answer["split_source"] == "epoch_totals" and "split_source epoch_totals" in answer["provenance_note"]
    assert answer["profiled_modes"] == min(p["profiled_modes"] for p in own.values())
    assert answer["workload_id"] is None and "2 models" in answer["provenance_note"]
    assert "workload_id" in answer["provenance_note"]
    plans = plan_nodes(planner, [NodeInfo(1, "agx-xavier", 1.0), NodeInfo(2, "nano", 1.0), NodeInfo(3, "nano", 1.0)],
                       600.0, epochs=1)
    assert (plans[1].workload_id, plans[2].workload_id, plans[3].workload_id) == ("my-resnet", "my-lenet", "my-lenet")
    assert plans[2].workload_source == "simulated" and plans[1].workload_source == "published"
    # A node no model plans states no provenance.
    unplanned = plan_nodes(LocalPlanner({"nano": nano_lenet_model}), [NodeInfo(4, "orin-nx", 1.0)], 600.0, 1)[4]
    assert unplanned.mode is None and all(v is None for v in unplanned.provenance().values())


def test_http_planner_gives_the_in_process_plan(resnet_model, service_url):
    nodes = [NodeInfo(n, DEVICES[n], SCALES[n]) for n in DEVICES]
    local = plan_nodes(LocalPlanner(resnet_model), nodes, 120.0, epochs=2)
    remote = plan_nodes(HttpPlanner(service_url, {"rows": resnet_records()}), nodes, 120.0, epochs=2)
    assert local.keys() == remote.keys()
    for n in DEVICES:
        a, b = local[n], remote[n]
        assert (a.mode, a.meets_deadline) == (b.mode, b.meets_deadline)
        for name in ("time_s", "time_s_low", "time_s_high", "energy_j", "energy_j_low", "energy_j_high"):
            assert getattr(b, name) == pytest.approx(getattr(a, name), rel=1e-6), name
        # The service's answer states its provenance; the planner passes it on to each node's plan.
        assert b.reference_source == a.reference_source and b.workload_source == a.workload_source == "published"
        assert b.profiled_modes == a.profiled_modes == 4 and b.model_version == a.model_version
        # Inline rows name no stored workload: the plan names it by the rows' label, as the local fit does.
        assert b.workload_id == a.workload_id is not None
    with pytest.raises(PlannerError, match="404"):
        plan_nodes(HttpPlanner(service_url, "no-such-workload"), nodes[:1], 120.0, epochs=1)


def test_an_epoch_scale_the_service_refuses_leaves_only_its_nodes_unplanned(service_url):
    # 600 s / 1e-7 is past the service's 10-year limit on deadline_s (422): that node is not planned, with
    # the service's reason; the node with a plain scale is, and the round can go on without the other.
    planner = HttpPlanner(service_url, {"rows": resnet_records()})
    plans = plan_nodes(planner, [NodeInfo(1, "nano", 0.01), NodeInfo(2, "nano", 1e-7)], 600.0, epochs=1)
    assert plans[1].mode is not None and plans[1].meets_deadline and plans[1].reason is None
    tiny = plans[2]
    assert (tiny.mode, tiny.meets_deadline, tiny.epoch_scale) == (None, False, 1e-7)
    assert "not planned at epoch scale 1e-07" in tiny.reason and "deadline_s" in tiny.reason


# --- selection and records, through a real ClientApp -----------------------------------------------------

def twin_client_app() -> ClientApp:
    """Node n is a DEVICES[n] with epoch scale SCALES[n]; it trains nothing, reports the twin's figures."""
    app = ClientApp()
    add_device_query(app, device=lambda ctx: DEVICES[ctx.node_id], epoch_scale=lambda ctx: SCALES[ctx.node_id])

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        twin = TwinWorkload(WORKLOAD, epoch_scale=SCALES[context.node_id])
        with PlannedRound(msg, context, device=DEVICES[context.node_id], twin=twin) as planned:
            arrays = ArrayRecord([np.full(3, float(context.node_id))])
        content = RecordDict({"arrays": arrays, "metrics": MetricRecord({"num-examples": context.node_id})})
        return Message(planned.attach(content), reply_to=msg)

    return app


@pytest.fixture
def grid():
    # What a ServerApp process has set before a strategy builds messages.
    before = TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 0
    yield InProcessGrid(twin_client_app(), node_contexts(DEVICES, lambda n: {"partition-id": n}))
    TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = before


def fedavg(**kwargs) -> FedAvg:
    return FedAvg(fraction_evaluate=0.0, min_available_nodes=len(DEVICES), **kwargs)


def train_round(strategy: JetpredictStrategy, grid: InProcessGrid, server_round: int = 1):
    messages = list(strategy.configure_train(server_round, ArrayRecord([np.zeros(3)]), ConfigRecord(), grid))
    replies = grid.send_and_receive(messages)
    return messages, strategy.aggregate_train(server_round, replies)


def test_only_nodes_meeting_the_deadline_train_with_their_plan(resnet_model, grid):
    strategy = JetpredictStrategy(fedavg(min_train_nodes=1), resnet_model, deadline_s=60.0, local_epochs=2)
    plans = plan_nodes(strategy.planner, [NodeInfo(n, DEVICES[n], SCALES[n]) for n in DEVICES], 60.0, 2)
    feasible = {n for n, p in plans.items() if p.meets_deadline}
    assert 0 < len(feasible) < len(DEVICES)  # the deadline splits this fleet
    messages, (arrays, metrics) = train_round(strategy, grid)
    assert {m.metadata.dst_node_id for m in messages} == feasible
    for m in messages:
        node = m.metadata.dst_node_id
        assert ClientPlan.from_config(m.content.config_records[PLAN_RECORD], node) == plans[node]
        assert m.content.config_records["config"]["server-round"] == 1
    query = [m for m in grid.sent if m.metadata.message_type == "query.jetpredict"]
    assert len(query) == len(DEVICES)
    records = {r.node_id: r for r in strategy.records}
    for n, r in records.items():
        assert r.selected == (n in feasible) and r.device == DEVICES[n]
        if n in feasible:
            expected = twin_round(DEVICES[n], plans[n].power_mode(), TwinWorkload(WORKLOAD, SCALES[n]), 2)
            assert r.replied and r.source == "simulated" and r.mode == plans[n].mode
            assert r.reported_time_s == pytest.approx(expected["time_s"])
            assert r.reported_energy_j == pytest.approx(expected["energy_j"])
            assert r.pred_time_s == pytest.approx(plans[n].time_s)
            assert (r.workload_id, r.workload_source, r.profiled_modes) == ("my-resnet", "published", 4)
            assert r.cross_device == (DEVICES[n] != "agx-xavier") and r.reference_source == plans[n].reference_source
            assert r.deadline_missed == (expected["time_s"] > 60.0)
        else:
            assert "deadline" in r.reason
    # FedAvg averaged the feasible nodes' arrays by num-examples = node id; jetpredict metrics were not averaged.
    weights = {n: float(n) for n in feasible}
    expected_mean = sum(n * w for n, w in weights.items()) / sum(weights.values())
    assert arrays.to_numpy_ndarrays()[0] == pytest.approx(np.full(3, expected_mean))
    assert TIME_METRIC not in metrics
    assert metrics["jetpredict-selected"] == len(feasible)
    assert metrics["jetpredict-excluded"] == len(DEVICES) - len(feasible)
    assert metrics["jetpredict-energy-j"] == pytest.approx(sum(records[n].reported_energy_j for n in feasible))
    # Devices are learned once: a second round sends no query.
    train_round(strategy, grid, 2)
    assert len([m for m in grid.sent if m.metadata.message_type == "query.jetpredict"]) == len(DEVICES)


class _NoSwitch:
    """A power-mode controller that switches nothing (a measured node without a Jetson under it)."""

    def __enter__(self) -> _NoSwitch:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def apply(self, mode: object) -> None:
        pass


def mixed_energy_grid(unmetered: set[int]) -> InProcessGrid:
    """Nodes 1-3 on AGX Xavier: the twin's figures (energy known), but nodes in ``unmetered`` measure their
    round without a power meter (energy null, with a reason)."""
    from jetpredict.profiler.power import NullPowerMeter

    app = ClientApp()
    add_device_query(app, device="agx-xavier", epoch_scale=0.02)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        how = ({"meter": NullPowerMeter("no sensor"), "controller": _NoSwitch()} if context.node_id in unmetered
               else {"twin": TwinWorkload(WORKLOAD, epoch_scale=0.02)})
        with PlannedRound(msg, context, device="agx-xavier", **how) as planned:
            pass
        content = RecordDict({"arrays": ArrayRecord([np.zeros(3)]), "metrics": MetricRecord({"num-examples": 1})})
        return Message(planned.attach(content), reply_to=msg)

    return InProcessGrid(app, node_contexts([1, 2, 3], lambda n: {}))


@pytest.mark.parametrize("unmetered", [set(), {3}, {1, 2, 3}])
def test_round_energy_is_every_replying_nodes_or_absent_never_a_partial_sum(resnet_model, server_identity,
                                                                            unmetered, caplog):
    strategy = JetpredictStrategy(FedAvg(fraction_evaluate=0.0, min_available_nodes=3, min_train_nodes=3),
                                  resnet_model, deadline_s=600.0)
    messages, (_, metrics) = train_round(strategy, mixed_energy_grid(unmetered))
    records = [r for r in strategy.records if r.selected]
    assert len(messages) == len(records) == 3 and all(r.replied for r in records)
    assert metrics[ENERGY_REPORTED_METRIC] == 3 - len(unmetered)
    for r in records:
        assert (r.reported_energy_j is None) == (r.node_id in unmetered)
        assert (r.energy_null_reason is not None) == (r.node_id in unmetered)  # each node says why
    if unmetered:
        assert ENERGY_METRIC not in metrics and PRED_ENERGY_METRIC not in metrics
    else:
        assert metrics[ENERGY_METRIC] == pytest.approx(sum(r.reported_energy_j for r in records))
        assert metrics[PRED_ENERGY_METRIC] == pytest.approx(sum(r.pred_energy_j for r in records))
    if unmetered == {3}:  # some reported: the log says why the round has no energy figure
        assert "round 1 energy unknown: 1 of 3 node(s) that replied reported none (none: no sensor)" in caplog.text


def test_cheapest_fraction_keeps_the_cheapest_feasible_nodes(resnet_model, grid):
    strategy = JetpredictStrategy(fedavg(min_train_nodes=1), resnet_model, deadline_s=600.0, local_epochs=1,
                                  cheapest_fraction=0.5)
    plans = plan_nodes(strategy.planner, [NodeInfo(n, DEVICES[n], SCALES[n]) for n in DEVICES], 600.0, 1)
    feasible = [n for n, p in plans.items() if p.meets_deadline]
    cost = {n: (plans[n].energy_j + plans[n].idle_energy_j) / SCALES[n] for n in feasible}
    cheapest = set(sorted(feasible, key=cost.get)[: -(-len(feasible) // 2)])
    messages, _ = train_round(strategy, grid)
    assert {m.metadata.dst_node_id for m in messages} == cheapest
    assert all(r.reason == NOT_CHEAPEST for r in strategy.records
               if r.node_id in set(feasible) - cheapest)


def test_a_round_without_enough_feasible_nodes_is_skipped(resnet_model, grid):
    strategy = JetpredictStrategy(fedavg(min_train_nodes=2), resnet_model, deadline_s=1e-3, local_epochs=1)
    messages, (arrays, metrics) = train_round(strategy, grid)
    assert messages == [] and arrays is None
    assert metrics["jetpredict-selected"] == 0 and metrics["jetpredict-excluded"] == len(DEVICES)
    assert all(not r.selected and r.reason for r in strategy.records)


def test_bad_settings_name_the_field(resnet_model):
    with pytest.raises(InputError, match="deadline_s"):
        JetpredictStrategy(fedavg(), resnet_model, deadline_s=0)
    for bad in (0, None):
        with pytest.raises(InputError, match="local_epochs"):
            JetpredictStrategy(fedavg(), resnet_model, deadline_s=10, local_epochs=bad)
    # past what a plan takes: refused here, not with every round skipped later
    with pytest.raises(InputError, match="local_epochs must be a whole number from 1 to"):
        JetpredictStrategy(fedavg(), resnet_model, deadline_s=10, local_epochs=MAX_EPOCHS + 1)
    assert JetpredictStrategy(fedavg(), resnet_model, deadline_s=10, local_epochs=np.int64(2)).local_epochs == 2
    with pytest.raises(InputError, match="cheapest_fraction"):
        JetpredictStrategy(fedavg(), resnet_model, deadline_s=10, cheapest_fraction=1.5)


def test_a_wait_for_nodes_that_never_connect_ends_naming_its_setting(resnet_model):
    """Flower's own sampling waits for its nodes without end; the strategy's wait ends after
    node_wait_timeout_s with an error naming it (run in a thread joined with a limit: were the wait endless,
    the test fails instead of hanging)."""
    strategy = JetpredictStrategy(fedavg(), resnet_model, deadline_s=60.0, node_wait_timeout_s=0.2)
    nobody = InProcessGrid(lambda message, context: message, {})
    raised: list[BaseException] = []

    def configure() -> None:
        try:
            strategy.configure_train(1, ArrayRecord([np.zeros(3)]), ConfigRecord(), nobody)
        except BaseException as err:  # noqa: BLE001 - whatever ends the wait is what the test checks
            raised.append(err)

    waiting = threading.Thread(target=configure, daemon=True)
    waiting.start()
    waiting.join(10.0)
    assert not waiting.is_alive(), "the strategy still waits for nodes 10 s after its 0.2 s limit"
    (err,) = raised
    assert isinstance(err, DeviceQueryError)
    assert f"0 of the {len(DEVICES)} nodes needed" in str(err) and "node_wait_timeout_s=0.2" in str(err)
    with pytest.raises(InputError, match="node_wait_timeout_s must be a finite number > 0"):
        JetpredictStrategy(fedavg(), resnet_model, deadline_s=60.0, node_wait_timeout_s=0)


@pytest.mark.parametrize("value", ["ten", None, True, 0, -1.0, float("nan"), float("inf")])
def test_the_deadline_is_a_checked_number_naming_the_field(resnet_model, value):
    with pytest.raises(InputError, match=r"^deadline_s must be a finite number > 0") as err:
        JetpredictStrategy(fedavg(), resnet_model, deadline_s=value)
    assert err.value.field == "deadline_s"


# None is not among them: it is cheapest_fraction's default (keep every node that meets the deadline).
@pytest.mark.parametrize("value", ["ten", True, 0, -0.5, 1.5, float("nan"), float("inf")])
def test_the_cheapest_fraction_is_a_checked_number_in_0_to_1(resnet_model, value):
    with pytest.raises(InputError, match=r"^cheapest_fraction must be between 0 and 1 \(0 excluded") as err:
        JetpredictStrategy(fedavg(), resnet_model, deadline_s=10, cheapest_fraction=value)
    assert err.value.field == "cheapest_fraction"


def test_good_deadline_and_cheapest_fraction_pass(resnet_model):
    strategy = JetpredictStrategy(fedavg(), resnet_model, deadline_s=10, cheapest_fraction=1)
    assert strategy.deadline_s == 10.0 and strategy.cheapest_fraction == 1.0
    assert JetpredictStrategy(fedavg(), resnet_model, deadline_s=0.5, cheapest_fraction=1e-3).cheapest_fraction == 1e-3


@pytest.mark.slow
def test_an_unreachable_planner_skips_the_round_and_says_why(grid):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    strategy = JetpredictStrategy(fedavg(min_train_nodes=1), HttpPlanner(f"http://127.0.0.1:{port}", "w", timeout_s=5),
                                  deadline_s=60.0)
    messages, (arrays, metrics) = train_round(strategy, grid)
    assert messages == [] and arrays is None
    assert all(not r.selected and "planner failed" in r.reason for r in strategy.records)


def test_confidence_travels_to_the_plan_and_narrows_the_intervals(resnet_model):
    # Orin Nano: its least-energy mode lies in the profiled ranges (at the nearest steps) at both levels; a
    # mode outside them is taken only when its upper bound beats that, which moves with the level (at a 600 s
    # deadline the 50% bound lets the 1-core, lowest-clock corner win, mostly idle at its low base power).
    nodes = [NodeInfo(1, "orin-nano", 0.02)]
    wide = plan_nodes(LocalPlanner(resnet_model), nodes, 400.0, epochs=1)[1]
    narrow = plan_nodes(LocalPlanner(resnet_model, confidence=0.5), nodes, 400.0, epochs=1)[1]
    assert wide.confidence == pytest.approx(0.9) and narrow.confidence == pytest.approx(0.5)
    assert narrow.to_config()["confidence"] == pytest.approx(0.5)
    assert narrow.mode == wide.mode  # a loose deadline: both take the mode of least energy
    assert narrow.time_s_high < wide.time_s_high and narrow.time_s_low > wide.time_s_low
    assert narrow.time_s_low <= narrow.time_s <= narrow.time_s_high


def test_nodes_without_a_usable_device_config_are_not_planned(resnet_model):
    app = ClientApp()
    add_device_query(app, epoch_scale=lambda ctx: {1: "0.5", 2: "lots", 3: -1.0}[ctx.node_id])

    @app.train()
    def train(msg: Message, context: Context) -> Message:  # pragma: no cover - never sent a train message
        raise AssertionError("an unplanned node was trained")

    grid = InProcessGrid(app, node_contexts([1, 2, 3], lambda n: {"partition-id": n}))
    grid.contexts[1].node_config["jetpredict-device"] = "nano"
    grid.contexts[2].node_config["jetpredict-device"] = "orin-nx"
    before = TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 0
    try:
        strategy = JetpredictStrategy(FedAvg(fraction_evaluate=0.0, min_train_nodes=1, min_available_nodes=3),
                                      resnet_model, deadline_s=1e6)
        nodes = strategy._discover(grid)
    finally:
        TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = before
    assert nodes[1].device == "nano" and nodes[1].epoch_scale == 0.5
    assert nodes[2].device is None and "jetpredict-epoch-scale" in nodes[2].reason and "lots" in nodes[2].reason
    assert nodes[3].device is None and "no jetpredict-device" in nodes[3].reason


def test_the_plans_word_on_its_confidence_reaches_the_nodes_records_and_log(resnet_model, grid, caplog):
    """A plan its real-data calibration does not back says so (``fleet.confidence_note``): here every
    node but the AGX Xavier ones is predicted across devices above the default level."""
    nodes = [NodeInfo(1, "orin-nx", 0.02), NodeInfo(2, "agx-xavier", 0.02)]
    plans = plan_nodes(LocalPlanner(resnet_model, confidence=0.99), nodes, 600.0, epochs=1)
    assert "cross devices" in plans[1].confidence_note and plans[1].confidence_note == plans[2].confidence_note
    assert ClientPlan.from_config(plans[1].to_config(), 1) == plans[1]
    assert plan_nodes(LocalPlanner(resnet_model), nodes, 600.0, epochs=1)[1].confidence_note is None
    strategy = JetpredictStrategy(fedavg(min_train_nodes=1), LocalPlanner(resnet_model, confidence=0.99),
                                  deadline_s=600.0)
    with caplog.at_level("WARNING"):
        train_round(strategy, grid)
        train_round(strategy, grid, 2)
    told = [r.message for r in caplog.records if "cross devices" in r.message]
    assert len(told) == 1  # once per run, not per round
    assert all("cross devices" in r.confidence_note for r in strategy.records if r.selected)


def _left_out_told(resnet_model, grid, caplog) -> list[str]:
    """The strategy's "left out" log lines over two rounds of the six-node grid, its planner serving only
    agx-xavier (every other node: no workload model for its device)."""
    strategy = JetpredictStrategy(fedavg(min_train_nodes=1), LocalPlanner({"agx-xavier": resnet_model}),
                                  deadline_s=600.0)
    with caplog.at_level("WARNING"):
        train_round(strategy, grid)
        train_round(strategy, grid, 2)
    return [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]

def test_why_a_node_is_left_out_is_logged_once_per_run(resnet_model, grid, caplog):
    """A node the planner cannot serve (no workload model for its device) is left out; the log says which
    and why, once per run, not every round, and the round's own sampling is not reported as a fault."""
    told = _left_out_told(resnet_model, grid, caplog)
    others = sorted(n for n, d in DEVICES.items() if d != "agx-xavier")
    assert len(told) == len(others)  # one reason per device, each told once over two rounds
    for n in others:
        assert sum(f"node(s) {n} left out: no workload model for device {DEVICES[n]!r}" in t for t in told) == 1
    assert not any("cheapest fraction" in t or "wrapped strategy" in t for t in told)


def test_a_round_tells_its_most_common_reasons_and_counts_the_rest(resnet_model, grid, caplog, monkeypatch):
    """Deadline reasons differ per node (each one's time): a large fleet's log names the commonest
    MAX_REASONS_TOLD and counts the other nodes, rather than one line per node."""
    from jetpredict.integrations.flower import strategy as strategy_module

    monkeypatch.setattr(strategy_module, "MAX_REASONS_TOLD", 2)
    told = _left_out_told(resnet_model, grid, caplog)
    assert len(told) == 3 and "3 more node(s) left out for 3 other reasons" in told[2]
