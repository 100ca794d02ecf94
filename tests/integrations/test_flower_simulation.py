"""The strategy wrapper under Flower's real simulation engine (``flwr.simulation.run_simulation``, Ray):
2 rounds, 4 simulated Jetsons, FedAvg inside, client figures from the digital twin."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower integration needs the [flower] extra")
pytest.importorskip("ray", reason="Flower's simulation engine needs the [flower] extra (flwr[simulation])")

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.serverapp import Grid, ServerApp  # noqa: E402
from flwr.serverapp.strategy import FedAvg  # noqa: E402
from flwr.simulation import run_simulation  # noqa: E402

from jetpredict.integrations.flower import (  # noqa: E402
    JetpredictStrategy,
    LocalPlanner,
    NodeInfo,
    PlannedRound,
    TwinWorkload,
    add_device_query,
    plan_nodes,
    twin_round,
)

#: Partition p is a DEVICES[p] holding SCALES[p] of a ResNet-18/CIFAR-10 epoch.
DEVICES = ("orin-agx", "orin-nx", "nano", "agx-xavier")
SCALES = (0.01, 0.01, 0.04, 0.02)
WORKLOAD = "resnet18-cifar10"
DEADLINE_S = 30.0
ROUNDS = 2


def _pid(context: Context) -> int:
    return int(context.node_config["partition-id"])


def client_app() -> ClientApp:
    app = ClientApp()
    add_device_query(app, device=lambda ctx: DEVICES[_pid(ctx)], epoch_scale=lambda ctx: SCALES[_pid(ctx)])

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        p = _pid(context)
        with PlannedRound(msg, context, twin=TwinWorkload(WORKLOAD, epoch_scale=SCALES[p])) as planned:
            arrays = ArrayRecord([msg.content["arrays"].to_numpy_ndarrays()[0] + p])
        content = RecordDict({"arrays": arrays, "metrics": MetricRecord({"num-examples": 1, "partition": p})})
        return Message(planned.attach(content), reply_to=msg)

    return app


def test_two_rounds_under_the_simulation_engine(resnet_model, monkeypatch):
    logging.getLogger("flwr").setLevel(logging.WARNING)
    monkeypatch.setenv("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")  # Ray's warning about GPU env vars
    # Flower's Ray backend writes this process's whole sys.path into PYTHONPATH for its workers; undo it
    # after the test, or later subprocesses would import the repository's folders as top-level packages.
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    out: dict = {}
    server = ServerApp()

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        strategy = JetpredictStrategy(
            FedAvg(fraction_evaluate=0.0, min_train_nodes=1, min_available_nodes=len(DEVICES)),
            LocalPlanner(resnet_model), deadline_s=DEADLINE_S, local_epochs=1)
        out["result"] = strategy.start(grid=grid, initial_arrays=ArrayRecord([np.zeros(2)]), num_rounds=ROUNDS,
                                       train_config=ConfigRecord({"lr": 0.1}))
        out["strategy"] = strategy

    run_simulation(server_app=server, client_app=client_app(), num_supernodes=len(DEVICES),
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                   "init_args": {"num_cpus": 1, "logging_level": "ERROR", "log_to_driver": False}})
    assert "strategy" in out, "the ServerApp did not finish"
    strategy, result = out["strategy"], out["result"]
    records = strategy.records
    assert [r.round for r in records].count(1) == len(DEVICES) == [r.round for r in records].count(2)
    selected = [r for r in records if r.selected]
    assert selected and len(selected) < len(records)  # the nano's 4% of an epoch cannot make 30 s
    for r in records:
        p = DEVICES.index(r.device)
        assert r.epoch_scale == SCALES[p]
        if not r.selected:
            assert r.device == "nano" and "deadline" in r.reason
            continue
        assert r.replied and r.source == "simulated" and r.mode_applied
        assert r.pred_time_s_low <= r.pred_time_s <= r.pred_time_s_high
        # The node ran the planned mode: its report is the twin's figure for that mode.
        plan = plan_nodes(LocalPlanner(resnet_model), [NodeInfo(0, r.device, SCALES[p])], DEADLINE_S, 1)[0]
        assert plan.mode == r.mode
        expected = twin_round(r.device, plan.power_mode(), TwinWorkload(WORKLOAD, SCALES[p]), epochs=1)
        assert r.reported_time_s == pytest.approx(expected["time_s"])
        assert r.reported_energy_j == pytest.approx(expected["energy_j"])
    per_round = result.train_metrics_clientapp
    assert set(per_round) == {1, 2}
    for metrics in per_round.values():
        assert metrics["jetpredict-selected"] == len(selected) / ROUNDS
        assert metrics["jetpredict-energy-j"] > 0
        assert "jetpredict-time-s" not in metrics  # stripped before FedAvg's averages
    # FedAvg ran on the selected nodes only: the global array grew by their mean partition id each round.
    picked = sorted({DEVICES.index(r.device) for r in selected})
    assert result.arrays.to_numpy_ndarrays()[0] == pytest.approx(np.full(2, ROUNDS * np.mean(picked)))


def test_twin_round_scales_with_the_work():
    from jetpredict.models.catalogue import load_device

    mode = load_device("nano").maxn
    one = twin_round("nano", mode, TwinWorkload(WORKLOAD, 0.01), epochs=1)
    four = twin_round("nano", mode, TwinWorkload(WORKLOAD, 0.02), epochs=2)
    assert four["time_s"] == pytest.approx(4 * one["time_s"]) and four["energy_j"] == pytest.approx(4 * one["energy_j"])
