"""The Flower fleet example app (examples/flower_fleet): its data split at any size, its settings, its
baselines and their accounting, driven in process through the app's own ServerApp arms and ClientApp."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower example needs the [flower] extra")

from flower_fleet import client_app, task
from flower_fleet.fleet import (
    ARMS,
    ClientRound,
    FleetConfig,
    PresetPlanner,
    _preset_figures,
    round_figures,
    run_arms,
)
from flower_fleet.summary import summary_line
from flower_grid import InProcessGrid, node_contexts
from flwr.app import ArrayRecord, ConfigRecord, Context, RecordDict
from flwr.serverapp.strategy import FedAvg
from jetpredict.models.catalogue import load_device

from jetpredict.integrations.flower import (
    PROVENANCE_KEYS,
    DeviceQueryError,
    JetpredictStrategy,
    LocalPlanner,
    NodeInfo,
    plan_nodes,
)


@pytest.mark.parametrize("split", task.SPLITS)
@pytest.mark.parametrize("clients", [1, 50, 200, 500, task.federation_size()])
def test_the_split_follows_the_number_of_clients(clients, split):
    parts = task.partitions(clients, split, 0.5)
    assert len(parts) == clients and min(len(p) for p in parts) >= 1
    together = np.concatenate(parts)
    assert len(together) == len(np.unique(together)) == task.federation_size()  # each image once
    scales = [task.epoch_scale(p, clients, split) for p in range(clients)]
    # The mean client does the same work at any size.
    assert np.mean(scales) == pytest.approx(task.MEAN_CLIENT_SHARE)
    x, y = task.client_data(clients - 1, clients, split)
    assert len(x) == len(y) == len(parts[-1])


def test_the_dirichlet_split_skews_labels():
    def label_share(split: str) -> float:
        y = task._split()[2]
        shares = [np.bincount(y[p], minlength=10).max() / len(p) for p in task.partitions(50, split, 0.5)]
        return float(np.mean(shares))

    assert label_share("dirichlet") > 1.5 * label_share("iid")


def test_bad_splits_and_settings_name_the_field():
    with pytest.raises(ValueError, match="num_clients must be at most 1437"):
        task.partitions(task.federation_size() + 1)
    with pytest.raises(ValueError, match="split must be one of"):
        task.partitions(10, "by-label")
    with pytest.raises(ValueError, match="partition_id must be in 0..9"):
        task.client_data(10, 10)
    with pytest.raises(ValueError, match="deadline-s must be a finite number > 0"):
        FleetConfig.from_run_config({"deadline-s": -1.0})
    with pytest.raises(ValueError, match="unknown run config key.*deadline"):
        FleetConfig.from_run_config({"deadline": 10.0})
    with pytest.raises(ValueError, match="arms must list some of"):
        FleetConfig.from_run_config({"arms": "maxn,fastest"})
    assert FleetConfig.from_run_config({"deadline-s": 5, "arms": "plan"}).deadline_s == 5.0


def test_the_preset_baseline_takes_the_least_energy_preset_that_meets_the_deadline(lenet_models):
    planner = PresetPlanner(LocalPlanner(lenet_models))
    # Whole epochs of the workload: 3 of the 9 presets meet 310 s (the twin: 292-452 s for 5 epochs).
    device, epochs, deadline = task.DEVICES[1], 5, 310.0
    figures = _preset_figures(device, task.TWIN_WORKLOAD)
    plan = planner.plan([{"id": "a", "device": device}], deadline, epochs)["clients"][0]
    meets = [f for f in figures if epochs * f[1] <= deadline]
    assert meets and len(meets) < len(figures)  # this deadline rules some presets out
    chosen = next(f for f in figures if f[0].mode == plan["mode"])
    assert plan["meets_deadline"] and chosen in meets
    cost = {f[0].mode: epochs * f[2] + f[3] * (deadline - epochs * f[1]) for f in meets}
    assert cost[plan["mode"]] == pytest.approx(min(cost.values()))
    late = planner.plan([{"id": "b", "device": device}], 1e-3, epochs)["clients"][0]
    assert not late["meets_deadline"] and "no preset meets deadline_s=0.001" in late["reason"]
    assert late["mode"] == min(figures, key=lambda f: f[1])[0].mode  # the fastest, reported as late
    # A node's record keeps the oracle's reason (its twin figures), not jetpredict's bound at that preset.
    # At epoch scale 0.05 a 10 s deadline is 200 s of whole epochs, which no preset meets (292.3 s at fastest).
    fastest_s = epochs * min(f[1] for f in figures)
    node = plan_nodes(planner, [NodeInfo(1, device, 0.05)], 10.0, epochs)[1]
    assert not node.meets_deadline and fastest_s > 200.0
    assert node.reason.endswith(f"says: no preset meets deadline_s=200: the fastest needs {fastest_s:.4g} s")


def app_grid(num_nodes: int, run_config: dict, silent: Iterable[int] = ()) -> InProcessGrid:
    """The app's ClientApp on ``num_nodes`` nodes (partition p on node p + 1); ``silent`` nodes never answer."""
    contexts = node_contexts(range(1, num_nodes + 1),
                             lambda n: {"partition-id": n - 1, "num-partitions": num_nodes}, run_config)
    return InProcessGrid(client_app.app, contexts, silent)


def run_config(cfg: FleetConfig) -> dict:
    """``cfg`` as the run config the app reads (its keys dashed, as the README writes them)."""
    return {k.replace("_", "-"): v for k, v in vars(cfg).items()}


@pytest.mark.slow
def test_all_arms_on_the_same_nodes_with_the_same_accounting(lenet_models, server_identity):
    # Node 1 is an AGX Xavier, node 2 a Xavier NX (round-robin); at 5 s the NX is late at MAXN.
    cfg = FleetConfig(num_server_rounds=1, local_epochs=5, deadline_s=5.0, min_nodes=2)
    runs = {r["arm"]: r for r in run_arms(app_grid(2, run_config(cfg)), cfg, lenet_models)}
    assert list(runs) == list(ARMS)
    maxn, drop, preset, plan = (runs[a]["rounds"][0] for a in ARMS)
    assert maxn["trained"] == drop["trained"] == 2
    # Same nodes, same twin: the two MAXN arms see the same times; one waits for the late, the other not.
    assert maxn["late"] == drop["late"] >= 1 and maxn["misses"] == maxn["late"] and drop["misses"] == 0
    assert drop["aggregated"] == 2 - drop["late"] and drop["round_end_s"] == pytest.approx(cfg.deadline_s)
    assert maxn["train_energy_j"] == pytest.approx(drop["train_energy_j"])
    assert drop["round_energy_j"] < maxn["round_energy_j"]
    for fig in (preset, plan):
        assert fig["late"] == fig["misses"] == 0 and fig["trained"] >= 1
    assert plan["train_energy_j"] < maxn["train_energy_j"]
    for arm, run in runs.items():
        assert not run["empty_rounds"], arm
        assert 0 <= run["accuracy"][1] <= 1
        for row in run["rows"]:
            # Every arm's rows carry jetpredict's prediction at the mode the client ran, for its work.
            assert row["pred_time_s_low"] <= row["pred_time_s"] <= row["pred_time_s_high"], arm
            assert row["device"] == task.device_of(row["node_id"] - 1)
    modes = {row["mode"] for row in runs["maxn"]["rows"]}
    assert modes == {load_device(d).maxn.mode for d in task.DEVICES[:2]}
    # The planner's models rest on twin rows: the plan says its confidence is not checked for them.
    assert runs["maxn"]["confidence_notes"] == [] and "simulated rows" in runs["plan"]["confidence_notes"][0]
    assert "the plan says:" in summary_line(runs["plan"], cfg.deadline_s)
    # ... and every arm states what its predictions rest on (the baselines' too, at the modes their nodes
    # ran): 4 twin-profiled modes per device type.
    for arm in ARMS:
        assert set(runs[arm]["provenance"]) <= set(task.DEVICES[:2]) and runs[arm]["provenance"], arm
        for prov in runs[arm]["provenance"].values():
            assert (prov["workload_source"], prov["profiled_modes"]) == ("simulated", 4), arm
            assert prov["workload_id"] and prov["model_version"] and prov["reference_source"], arm
        assert "rest on simulated workload rows" in summary_line(runs[arm], cfg.deadline_s), arm
    assert set(runs["maxn"]["provenance"]) == {row["device"] for row in runs["maxn"]["rows"]}


def test_a_round_that_trains_nobody_is_reported(lenet_models, server_identity):
    cfg = FleetConfig(num_server_rounds=1, deadline_s=1e-3, min_nodes=2, arms="plan")
    (run,) = run_arms(app_grid(2, run_config(cfg)), cfg, lenet_models)
    assert run["empty_rounds"] == [1] and run["excluded"] == {1: 2}


def test_the_device_query_fails_loudly_when_too_few_nodes_answer(lenet_models, server_identity):
    cfg = FleetConfig(min_nodes=2)
    grid = app_grid(2, run_config(cfg), silent={2})
    strategy = JetpredictStrategy(FedAvg(fraction_evaluate=0.0, min_train_nodes=1, min_available_nodes=2),
                                  LocalPlanner(lenet_models), deadline_s=10.0, query_timeout_s=0.5)
    with pytest.raises(DeviceQueryError, match=r"1 of the 2 nodes needed .* query_timeout_s=0.5"):
        strategy.configure_train(1, ArrayRecord(task.Net().state_dict()), ConfigRecord(), grid)
    # Enough nodes answered: the silent one is planned out and asked again next round.
    strategy.inner.min_available_nodes = 1
    strategy.configure_train(1, ArrayRecord(task.Net().state_dict()), ConfigRecord(), grid)
    assert {r.node_id: r.reason for r in strategy.records if not r.selected} == {2: "no reply to the device query"}
    with pytest.raises(Exception, match="query_timeout_s"):
        JetpredictStrategy(FedAvg(), LocalPlanner(lenet_models), deadline_s=10.0, query_timeout_s=0)


def test_a_train_message_without_a_partition_names_the_node_config():
    context = Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})
    with pytest.raises(ValueError, match="partition-id and num-partitions"):
        client_app.node_device(context)


def _client_round(node: int, energy_j: float | None, base_power_w: float | None = 2.0, time_s: float = 5.0,
                  reason: str | None = None) -> ClientRound:
    """A trained client of round 1 at 5 s (deadline 10 s), its energy interval 8..12 J."""
    return ClientRound("plan", 1, node, "nano", 0.02, "m", time_s, energy_j, base_power_w, True,
                       5.0, 4.0, 6.0, 10.0, 8.0, 12.0, energy_null_reason=reason)


def _summary(figs: list[dict]) -> str:
    return summary_line({"arm": "plan", "rounds": figs, "accuracy": {}, "empty_rounds": []}, 10.0)


def test_missing_energy_gives_null_and_a_reason_never_zero_or_a_partial_sum():
    unmetered = [_client_round(n, None, reason="no power meter found") for n in range(3)]
    (fig,) = round_figures(unmetered, 10.0, 1)
    assert fig["train_energy_j"] is None and fig["round_energy_j"] is None and fig["energy_reported"] == 0
    assert "3 of 3 trained clients reported no energy (no power meter found)" in fig["energy_note"]
    line = _summary([fig])
    assert "training energy unknown, to round ends unknown" in line and "0.0 J" not in line
    assert "no energy interval to check" in line
    # One client of four metered: its 10 J is not the round's energy.
    (fig,) = round_figures([*unmetered, _client_round(9, 10.0)], 10.0, 1)
    assert fig["train_energy_j"] is None and fig["round_energy_j"] is None and fig["energy_reported"] == 1
    assert "3 of 4 trained clients" in fig["energy_note"] and "10.0 J" not in _summary([fig])
    # Energy known, but no base power for client 1, idle from 5 s until the round ends at 8 s (client 2).
    (fig,) = round_figures([_client_round(1, 10.0, base_power_w=None), _client_round(2, 12.0, time_s=8.0)], 10.0, 1)
    assert fig["train_energy_j"] == pytest.approx(22.0) and fig["round_energy_j"] is None
    assert "1 of 2 trained clients reported no base power" in fig["energy_note"]
    # Every client reported: the totals (idle at base power until the round end) and no note.
    (fig,) = round_figures([_client_round(1, 10.0), _client_round(2, 12.0, time_s=8.0)], 10.0, 1)
    assert fig["train_energy_j"] == pytest.approx(22.0) and fig["round_energy_j"] == pytest.approx(22.0 + 2.0 * 3)
    assert fig["energy_note"] is None and fig["energy_reported"] == 2
    assert "training energy 22.0 J, to round ends 28.0 J" in _summary([fig])


def test_energy_coverage_counts_only_clients_whose_energy_interval_could_be_checked():
    rows = [*(_client_round(n, None, reason="no power meter found") for n in range(3)), _client_round(9, 10.0),
            _client_round(10, 20.0)]
    rows[-1].pred_energy_j_low = rows[-1].pred_energy_j_high = None  # no energy interval predicted
    (fig,) = round_figures(rows, 10.0, 1)
    assert fig["predicted"] == 5 and fig["energy_checked"] == 1 and fig["energy_cover"] == 1
    assert "time interval held 5/5 (upper bound 5/5), energy 1/1" in _summary([fig])


@pytest.mark.parametrize(("run_config", "refusal"), [
    ({"simulate-jetson": "false"}, "simulate-jetson must be true or false"),
    ({"simulate-jetson": 0}, "simulate-jetson must be true or false"),
    ({"twin-workload": "no-such-workload"}, "twin-workload must be one of lenet5-mnist"),
    ({"confidence": "high"}, "confidence must be between 0.5 and 0.999"),
    ({"confidence": "0.9"}, "confidence must be a number, not text"),
    ({"confidence": 90}, "confidence must be between 0.5 and 0.999"),
    ({"seed": "x"}, "seed must be a whole number from 0 to 4294967295"),
    ({"seed": -3}, "seed must be a whole number from 0"),
    ({"seed": 1.5}, "seed must be a whole number"),
    ({"models": 5}, "models must be text"),
    ({"results-out": 1}, "results-out must be text"),
    ({"arms": "plan,plan"}, "arms must name each arm once"),
    ({"arms": ""}, "arms must list some of"),
    ({"arms": 3}, "arms must be a comma-separated list"),
    ({"split": None}, "split must be one of iid, dirichlet"),
    ({"deadline-s": "5"}, "deadline-s must be a number, not text"),
    ({"dirichlet-alpha": True}, "dirichlet-alpha must be a finite number > 0"),
    ({"query-timeout-s": float("nan")}, "query-timeout-s must be a finite number > 0"),
    ({"node-wait-timeout-s": 0}, "node-wait-timeout-s must be a finite number > 0"),
    ({"local-epochs": True}, "local-epochs must be a whole number >= 1"),
])
def test_every_run_config_key_is_checked_by_name(run_config, refusal):
    (key,) = run_config
    with pytest.raises(ValueError, match=f"^run config {refusal}") as err:
        FleetConfig.from_run_config(run_config)
    assert err.value.field == key


def test_the_examples_run_config_is_fleet_configs_defaults_and_its_readme_names_every_key():
    """pyproject.toml states every FleetConfig key at its default (a new setting, such as node-wait-timeout-s,
    is not left out of it or given another value there), and the README's run config section names each."""
    from dataclasses import fields

    import tomllib
    from readme_tours import FLOWER_README

    given = tomllib.loads((FLOWER_README.parent / "pyproject.toml").read_text())["tool"]["flwr"]["app"]["config"]
    assert given == {f.name.replace("_", "-"): f.default for f in fields(FleetConfig)}
    section = FLOWER_README.read_text().split("## Run config", 1)[1].split("\n## ", 1)[0]
    assert [key for key in given if f"`{key}`" not in section] == []


def test_the_readme_names_every_provenance_key_of_the_results_json():
    """The README says what the results JSON's ``provenance`` holds per device: each of PROVENANCE_KEYS, read
    from the constant here, so a new field cannot leave the README behind."""
    from readme_tours import FLOWER_README

    said = next(p for p in FLOWER_README.read_text().split("\n\n") if "JSON's `provenance`" in p)
    assert [key for key in PROVENANCE_KEYS if f"`{key}`" not in said] == []


def test_good_run_config_values_pass_as_given():
    cfg = FleetConfig.from_run_config({"simulate-jetson": False, "seed": 4294967295, "twin-workload": "resnet18-cifar10",
                                       "confidence": 0.9, "arms": " plan , maxn ", "models": "m", "results-out": "r"})
    assert cfg.simulate_jetson is False and cfg.seed == 4294967295 and cfg.arm_list() == ["plan", "maxn"]


def test_the_maxn_arms_train_at_maxn_on_a_real_jetson_and_restore_its_mode(orin, monkeypatch):
    """``simulate-jetson = false``: the baseline arms' train messages carry no plan, yet the node must train at
    its fastest preset (Orin NX: MAXN, nvpmodel id 0), not at the 15W it was left in, and go back to 15W."""
    from flwr.app import Message, Metadata

    from jetpredict.integrations.flower import REPORT_RECORD

    maxn = load_device("orin-nx").maxn
    during: list[str] = []
    train_local = task.train_local

    def watched(*args, **kwargs):  # the board's mode while the example's train function runs
        during.append(orin.read("/var/lib/nvpmodel/status"))
        return train_local(*args, **kwargs)

    monkeypatch.setattr(task, "train_local", watched)
    context = Context(run_id=1, node_id=7, state=RecordDict(), run_config={"simulate-jetson": False},
                      node_config={"partition-id": 0, "num-partitions": 2, "jetpredict-device": "orin-nx"})
    # What BaselineFedAvg (arms maxn and maxn-drop) sends: FedAvg's train message, no jetpredict.plan record.
    message = Message(RecordDict({"arrays": ArrayRecord(task.Net().state_dict()),
                                  "config": ConfigRecord({"local-epochs": 1, "seed": 0, "server-round": 1})}),
                      metadata=Metadata(run_id=1, message_id="m", src_node_id=0, dst_node_id=7,
                                        reply_to_message_id="", group_id="1", created_at=0.0, ttl=3600.0,
                                        message_type="train"))
    assert orin.read("/var/lib/nvpmodel/status") == "pmode:0002"
    reply = client_app.app(message, context)
    assert [c[-1] for c in orin.calls() if c[0] == "nvpmodel" and "-m" in c] == [str(maxn.id), "2"]
    assert during == [f"pmode:{maxn.id:04d}"]
    assert orin.read("/var/lib/nvpmodel/status") == "pmode:0002"  # 15W again after the round
    report = reply.content.config_records[REPORT_RECORD]
    assert report["source"] == "measured" and report["mode"] == maxn.mode == "MAXN"
    assert report["mode-applied"] is True
