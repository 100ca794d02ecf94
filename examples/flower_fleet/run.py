"""Federated learning on 50 simulated Jetsons with Flower: default FedAvg at MAXN vs. jetpredict's plan.

    python examples/flower_fleet/run.py            # 5 rounds, 2 seeds per arm, writes bench/results/flower_fleet.md

Both arms run Flower's real simulation engine (``flwr.simulation.run_simulation``, Ray) with the same 50
clients, the same small CNN on scikit-learn's digits (``task.py``), the same round deadline and local
epochs, and centralized evaluation on the held-out test set after every round:

(a) ``maxn``: Flower's ``FedAvg`` as it comes (every client trains every round) with every Jetson at MAXN;
(b) ``jetpredict``: the same ``FedAvg`` wrapped in :class:`JetpredictStrategy`: each round it plans every
    client's power mode under the deadline (fleet plans from workload models fitted on 4 twin-profiled
    modes per Jetson type) and trains only the clients whose planned mode meets it.

The CNN trains for real on this CPU; each client's Jetson time and energy are the digital twin's for its
device, its mode and its share of the work (``task.py`` explains the mapping). Every time and energy
figure printed here is **simulated** (twin), and the predictions are of a model fitted on twin rows: they
show the mechanism, not jetpredict's accuracy on real devices.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # task.py (Ray workers get sys.path through PYTHONPATH)

import task  # noqa: E402
import torch  # noqa: E402
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.serverapp import Grid, ServerApp  # noqa: E402
from flwr.serverapp.strategy import FedAvg  # noqa: E402
from flwr.simulation import run_simulation  # noqa: E402

from jetpredict.integrations.flower import (  # noqa: E402
    JetpredictStrategy,
    LocalPlanner,
    PlannedRound,
    TwinWorkload,
    add_device_query,
    read_report,
)

DEFAULT_OUT = HERE.parent.parent / "bench" / "results" / "flower_fleet.md"
ARMS = ("maxn", "jetpredict")


# ---------------------------------------------------------------------------------------------------
# The planner's workload models: 4 modes per Jetson type profiled on the twin, then fitted
# ---------------------------------------------------------------------------------------------------

def fit_fleet_models(workdir: Path) -> dict[str, Any]:
    """One fitted ``lenet5-mnist`` model per Jetson type, as a fleet operator would make them: ``jetpredict
    plan --budget 4`` modes, ``jetpredict profile --device sim:DEVICE``, ``jetpredict fit``."""
    from jetpredict.models.profile_rows import validate_records
    from jetpredict.predictor.bundled import fit_workload
    from jetpredict.predictor.service import plan_profiling
    from jetpredict.profiler.campaign import CampaignConfig, run_campaign

    models = {}
    for device in task.DEVICES:
        plan_csv = workdir / f"{device}-plan.csv"
        plan_profiling(device, 4).modes.to_csv(plan_csv, index=False)
        rows = run_campaign(CampaignConfig(device=f"sim:{device}", workload=task.TWIN_WORKLOAD,
                                           out=workdir / f"{device}.csv", modes=str(plan_csv), progress=False))
        models[device] = fit_workload(validate_records(rows))
    return models


# ---------------------------------------------------------------------------------------------------
# Flower apps
# ---------------------------------------------------------------------------------------------------

def _pid(context: Context) -> int:
    return int(context.node_config["partition-id"])


def make_client_app() -> ClientApp:
    app = ClientApp()
    # Simulated nodes share one node config: the Jetson type and epoch scale follow the partition id.
    add_device_query(app, device=lambda ctx: task.device_of(_pid(ctx)),
                     epoch_scale=lambda ctx: task.epoch_scale(_pid(ctx)))

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        pid = _pid(context)
        config = msg.content["config"]
        epochs = int(config["local-epochs"])
        x, y = task.client_data(pid)
        model = task.Net()
        model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
        twin = TwinWorkload(task.TWIN_WORKLOAD, epoch_scale=task.epoch_scale(pid), epochs=epochs)
        with PlannedRound(msg, context, device=task.device_of(pid), twin=twin) as planned:
            loss = task.train_local(model, x, y, epochs, seed=int(config["seed"]) * 100_003
                                    + int(config["server-round"]) * 1_009 + pid)
        content = RecordDict({"arrays": ArrayRecord(model.state_dict()),
                              "metrics": MetricRecord({"train-loss": loss, "num-examples": len(x)})})
        planned.attach(content)
        return Message(content, reply_to=msg)

    return app


class RecordingFedAvg(FedAvg):
    """Plain FedAvg that also keeps each reply's jetpredict report (the baseline's twin figures)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reports: list[dict[str, Any]] = []

    def aggregate_train(self, server_round: int, replies):  # type: ignore[override]
        replies = list(replies)
        for reply in replies:
            report = read_report(reply)
            if report is not None:
                self.reports.append({"round": server_round, "node_id": reply.metadata.src_node_id, **report})
        return super().aggregate_train(server_round, replies)


def _fedavg(cls: type = FedAvg, num_clients: int = task.NUM_CLIENTS) -> FedAvg:
    return cls(fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=2, min_available_nodes=num_clients)


def make_server_app(arm: str, seed: int, rounds: int, deadline_s: float, epochs: int, models: dict[str, Any],
                    out: dict[str, Any], num_clients: int) -> ServerApp:
    app = ServerApp()
    x_test, y_test = task.test_data()

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        net = task.Net()
        net.load_state_dict(arrays.to_torch_state_dict())
        return MetricRecord({"accuracy": task.accuracy(net, x_test, y_test)})

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        torch.manual_seed(seed)
        if arm == "maxn":
            strategy = _fedavg(RecordingFedAvg, num_clients)
        else:
            strategy = JetpredictStrategy(_fedavg(num_clients=num_clients), LocalPlanner(models),
                                          deadline_s=deadline_s, local_epochs=epochs)
        result = strategy.start(grid=grid, initial_arrays=ArrayRecord(task.Net().state_dict()), num_rounds=rounds,
                                train_config=ConfigRecord({"local-epochs": epochs, "seed": seed}),
                                evaluate_fn=evaluate)
        out["strategy"] = strategy
        out["accuracy"] = {r: float(m["accuracy"]) for r, m in result.evaluate_metrics_serverapp.items()}

    return app


# ---------------------------------------------------------------------------------------------------
# One run and its figures
# ---------------------------------------------------------------------------------------------------

def client_rows(arm: str, strategy: Any) -> list[dict[str, Any]]:
    """Per (round, trained client): the twin's time (s), energy (J), base power (W), and predictions."""
    if arm == "maxn":
        return [{"round": r["round"], "device": r["device"], "time_s": r["time-s"], "energy_j": r["energy-j"],
                 "base_power_w": r["base-power-w"], "mode": r["mode"]} for r in strategy.reports]
    rows = []
    for rec in strategy.records:
        if rec.selected and rec.replied:
            rows.append({"round": rec.round, "device": rec.device, "time_s": rec.reported_time_s,
                         "energy_j": rec.reported_energy_j, "base_power_w": rec.reported_base_power_w,
                         "mode": rec.mode, "pred_time_s": rec.pred_time_s, "pred_time_s_low": rec.pred_time_s_low,
                         "pred_time_s_high": rec.pred_time_s_high, "pred_energy_j": rec.pred_energy_j,
                         "pred_energy_j_low": rec.pred_energy_j_low, "pred_energy_j_high": rec.pred_energy_j_high})
    return rows


def round_figures(rows: list[dict[str, Any]], deadline_s: float, rounds: int) -> list[dict[str, Any]]:
    """Per round: clients trained, deadline misses, round time (slowest client, s), training energy and
    energy until the round ends (idle at the mode's base power after finishing), J; predicted vs twin."""
    out = []
    for r in range(1, rounds + 1):
        rs = [row for row in rows if row["round"] == r]
        round_s = max((row["time_s"] for row in rs), default=0.0)
        fig: dict[str, Any] = {
            "round": r, "trained": len(rs), "misses": sum(row["time_s"] > deadline_s for row in rs),
            "round_time_s": round_s, "train_energy_j": math.fsum(row["energy_j"] for row in rs),
            "round_energy_j": math.fsum(row["energy_j"] + row["base_power_w"] * (round_s - row["time_s"])
                                        for row in rs)}
        if rs and "pred_time_s" in rs[0]:
            fig["pred_train_energy_j"] = math.fsum(row["pred_energy_j"] for row in rs)
            fig["pred_round_time_s"] = max(row["pred_time_s"] for row in rs)
            fig["pred_round_time_s_high"] = max(row["pred_time_s_high"] for row in rs)
            fig["time_ape"] = statistics.fmean(abs(row["pred_time_s"] / row["time_s"] - 1) for row in rs)
            fig["energy_ape"] = statistics.fmean(abs(row["pred_energy_j"] / row["energy_j"] - 1) for row in rs)
            fig["time_cover"] = sum(row["pred_time_s_low"] <= row["time_s"] <= row["pred_time_s_high"] for row in rs)
            fig["energy_cover"] = sum(row["pred_energy_j_low"] <= row["energy_j"] <= row["pred_energy_j_high"]
                                      for row in rs)
        out.append(fig)
    return out


def run_arm(arm: str, seed: int, args: argparse.Namespace, models: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    run_simulation(server_app=make_server_app(arm, seed, args.rounds, args.deadline_s, args.local_epochs, models,
                                              out, args.clients),
                   client_app=make_client_app(), num_supernodes=args.clients,
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                   "init_args": {"num_cpus": 2, "logging_level": "ERROR",
                                                 "log_to_driver": False}})
    if "strategy" not in out:
        raise RuntimeError(f"the {arm} simulation did not finish (see the log above)")
    rows = client_rows(arm, out["strategy"])
    return {"arm": arm, "seed": seed, "wall_s": time.perf_counter() - t0, "accuracy": out["accuracy"],
            "rounds": round_figures(rows, args.deadline_s, args.rounds), "rows": rows,
            "strategy": out["strategy"]}


# ---------------------------------------------------------------------------------------------------
# Printing and the results file
# ---------------------------------------------------------------------------------------------------

def round_table(run: dict[str, Any]) -> list[str]:
    lines = ["| round | trained | deadline misses | round time (s) | training energy (J) | energy to round end (J) "
             "| predicted training energy (J) | predicted / twin time, mean abs. error | 90% interval holds twin "
             "time / energy | accuracy |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for fig in run["rounds"]:
        acc = run["accuracy"].get(fig["round"], float("nan"))
        if "pred_train_energy_j" in fig:
            pred = (f"{fig['pred_train_energy_j']:.1f}", f"{100 * fig['time_ape']:.1f}%",
                    f"{fig['time_cover']}/{fig['trained']} / {fig['energy_cover']}/{fig['trained']}")
        else:
            pred = ("–", "–", "–")
        lines.append(f"| {fig['round']} | {fig['trained']} | {fig['misses']} | {fig['round_time_s']:.2f} | "
                     f"{fig['train_energy_j']:.1f} | {fig['round_energy_j']:.1f} | {pred[0]} | {pred[1]} | {pred[2]} "
                     f"| {acc:.3f} |")
    return lines


def device_table(baseline: dict[str, Any], planned: dict[str, Any], deadline_s: float) -> list[str]:
    """Round 1 per Jetson type: MAXN misses; the planned mode(s), who trained, predicted vs twin sums."""
    lines = ["| device | clients | MAXN: misses | MAXN: twin time, slowest (s) | planned modes | trained "
             "| predicted time, slowest [90% interval] (s) | twin time, slowest (s) | predicted energy (J) "
             "| twin energy (J) |", "|---|---|---|---|---|---|---|---|---|---|"]
    base = [r for r in baseline["rows"] if r["round"] == 1]
    records = [r for r in planned["strategy"].records if r.round == 1]
    for device in task.DEVICES:
        b = [r for r in base if r["device"] == device]
        recs = [r for r in records if r.device == device]
        trained = [r for r in recs if r.selected and r.replied]
        modes = {r.mode for r in trained if r.mode}
        slow = max(trained, key=lambda r: r.pred_time_s, default=None)
        # Clients of one type differ in data size, so they get different modes: count them, show the slowest's.
        shown = f"{len(modes)}: slowest client {slow.mode}" if slow else "–"
        pred = (f"{slow.pred_time_s:.2f} [{slow.pred_time_s_low:.2f}, {slow.pred_time_s_high:.2f}]"
                if slow else "–")
        lines.append(
            f"| {device} | {len(recs)} | {sum(r['time_s'] > deadline_s for r in b)} | "
            f"{max(r['time_s'] for r in b):.2f} | {shown} | {len(trained)} | {pred} | "
            f"{max((r.reported_time_s for r in trained), default=0.0):.2f} | "
            f"{math.fsum(r.pred_energy_j for r in trained):.1f} | {math.fsum(r.reported_energy_j for r in trained):.1f} |")
    return lines


def summary(runs: list[dict[str, Any]], rounds: int) -> dict[str, dict[str, Any]]:
    out = {}
    for arm in ARMS:
        rs = [r for r in runs if r["arm"] == arm]
        accs = [r["accuracy"][rounds] for r in rs]
        out[arm] = {
            "runs": len(rs), "misses": statistics.fmean(sum(f["misses"] for f in r["rounds"]) for r in rs),
            "trained": statistics.fmean(sum(f["trained"] for f in r["rounds"]) for r in rs),
            "train_energy_j": statistics.fmean(sum(f["train_energy_j"] for f in r["rounds"]) for r in rs),
            "round_energy_j": statistics.fmean(sum(f["round_energy_j"] for f in r["rounds"]) for r in rs),
            "round_time_s": statistics.fmean(sum(f["round_time_s"] for f in r["rounds"]) for r in rs),
            "acc_mean": statistics.fmean(accs), "acc_sd": statistics.stdev(accs) if len(accs) > 1 else float("nan"),
            "accs": accs, "wall_s": statistics.fmean(r["wall_s"] for r in rs)}
    return out


def summary_lines(s: dict[str, dict[str, Any]], deadline_s: float, rounds: int) -> list[str]:
    lines = [f"| arm | runs | client-rounds trained | deadline misses ({deadline_s:g} s) | total round time (s) "
             "| training energy (J) | energy to round ends (J) | final accuracy (per run) | mean ± sd | wall (s) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for arm in ARMS:
        a = s[arm]
        lines.append(f"| {arm} | {a['runs']} | {a['trained']:.0f} | {a['misses']:.1f} | {a['round_time_s']:.2f} | "
                     f"{a['train_energy_j']:.1f} | {a['round_energy_j']:.1f} | "
                     f"{', '.join(f'{x:.3f}' for x in a['accs'])} | {a['acc_mean']:.3f} ± {a['acc_sd']:.3f} | "
                     f"{a['wall_s']:.0f} |")
    return lines


def verdict(s: dict[str, dict[str, Any]]) -> list[str]:
    b, j = s["maxn"], s["jetpredict"]
    # Run-to-run noise: the larger of the two arms' SDs of final accuracy over seeds (2 SD allowed).
    noise = max(b["acc_sd"], j["acc_sd"])
    checks = [("fewer deadline misses", j["misses"] < b["misses"]),
              ("less training energy", j["train_energy_j"] < b["train_energy_j"]),
              ("less energy to round ends", j["round_energy_j"] < b["round_energy_j"]),
              (f"final accuracy no worse than the baseline's within 2 SD of run-to-run noise ({noise:.3f})",
               j["acc_mean"] >= b["acc_mean"] - 2 * noise)]
    return [f"- {'yes' if ok else 'NO'}: {text}" for text, ok in checks]


def fleet_lines(args: argparse.Namespace) -> list[str]:
    counts = {d: 0 for d in task.DEVICES}
    for p in range(args.clients):
        counts[task.device_of(p)] += 1
    scales = [task.epoch_scale(p, args.clients) for p in range(args.clients)]
    return [f"- clients: {args.clients} ({', '.join(f'{n} {d}' for d, n in counts.items())}); local data "
            f"{min(len(task.client_data(p, args.clients)[0]) for p in range(args.clients))}–"
            f"{max(len(task.client_data(p, args.clients)[0]) for p in range(args.clients))} digits images "
            f"(epoch scale {min(scales):.4f}–{max(scales):.4f} of an MNIST epoch)",
            f"- rounds: {args.rounds}; local epochs: {args.local_epochs}; round deadline: {args.deadline_s:g} s "
            f"(simulated Jetson time); seeds per arm: {args.seeds}"]


def write_results(path: Path, args: argparse.Namespace, runs: list[dict[str, Any]], total_s: float) -> None:
    s = summary(runs, args.rounds)
    lines = ["# Flower fleet: default FedAvg at MAXN vs. jetpredict's fleet plans (simulated Jetsons)", "",
             "Written by `python examples/flower_fleet/run.py` "
             f"(`--rounds {args.rounds} --seeds {args.seeds} --deadline-s {args.deadline_s:g} "
             f"--local-epochs {args.local_epochs}`); whole run {total_s:.0f} s on this machine.", "",
             "**All Jetson times and energies are simulated** (the digital twin, `profiler/sim`), and the "
             "planner's models are fitted on twin-profiled rows (4 modes per Jetson type): predicted-vs-twin "
             "figures show the mechanism, not jetpredict's accuracy on real devices. The CNN, its training "
             "and the accuracies are real (scikit-learn digits, CPU).", "",
             "Mapping: a client's local epoch costs what the twin gives for LeNet-5/MNIST (`lenet5-mnist`) on "
             "its share of the federation's data, the federation standing for one MNIST epoch (60,000 images); "
             "client `p` is a Jetson of type `DEVICES[p % 6]`. Round time = the slowest trained client (the "
             "server waits for every reply); energy to round end = training energy plus each trained client's "
             "idle power at its mode (twin base power) until the round ends. Clients not trained in a round "
             "are not counted in either arm. The twin's figures are its noise-free means, so every round of an "
             "arm repeats the same times and energies; only the training (accuracy) differs between rounds "
             "and seeds. Run-to-run noise of accuracy is estimated from the seeds of each arm (few: a rough "
             "estimate).", "", "## Fleet", "", *fleet_lines(args), "",
             "## Summary (totals over the rounds, mean over seeds)", "", *summary_lines(s, args.deadline_s, args.rounds),
             "", *verdict(s), ""]
    first = {arm: next(r for r in runs if r["arm"] == arm) for arm in ARMS}
    lines += ["## Round 1 by Jetson type (seed 0)", "", *device_table(first["maxn"], first["jetpredict"],
                                                                       args.deadline_s), ""]
    for arm in ARMS:
        run = first[arm]
        lines += [f"## Per round: {arm}, seed {run['seed']}", "", *round_table(run), ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=task.NUM_CLIENTS)
    parser.add_argument("--local-epochs", type=int, default=5)
    parser.add_argument("--deadline-s", type=float, default=10.0, help="round deadline, simulated Jetson seconds")
    parser.add_argument("--seeds", type=int, default=2, help="runs per arm (run-to-run noise of accuracy)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    logging.getLogger("flwr").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=FutureWarning)
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        models = fit_fleet_models(Path(tmp))
    print(f"fitted {len(models)} workload models (4 twin-profiled modes each) in {time.perf_counter() - t0:.1f} s",
          flush=True)
    print("\n".join(fleet_lines(args)), flush=True)
    runs = []
    for seed in range(args.seeds):
        for arm in ARMS:
            run = run_arm(arm, seed, args, models)
            runs.append(run)
            print(f"\n{arm}, seed {seed}: {run['wall_s']:.0f} s", flush=True)
            print("\n".join(round_table(run)), flush=True)
    s = summary(runs, args.rounds)
    print("\nround 1 by Jetson type (seed 0):")
    print("\n".join(device_table(runs[0], runs[1], args.deadline_s)))
    print("\n" + "\n".join(summary_lines(s, args.deadline_s, args.rounds)))
    print("\n".join(verdict(s)))
    total = time.perf_counter() - t0
    write_results(args.out, args, runs, total)
    print(f"\nwrote {args.out} ({total:.0f} s in all)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
