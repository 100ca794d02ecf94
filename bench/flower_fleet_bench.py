"""Flower fleet: FedAvg on simulated Jetsons, four arms under one round deadline, at several sizes and seeds.

Runs the example app of ``examples/flower_fleet`` (its ServerApp's arms and its ClientApp, unchanged) for
every setting of clients x split x deadline and every seed, and prints per setting and arm: deadline
misses, training energy, energy to the round ends, test accuracy, and how often jetpredict's intervals
held the twin's time and energy; then the plan's energy against each baseline, with its spread over seeds.

    python bench/flower_fleet_bench.py            # 50 and 500 clients, IID and Dirichlet, 5/10/30 s, 3 (2) seeds, 5 rounds
    python bench/flower_fleet_bench.py --clients 50 --deadlines 10 --seeds 2     # a quick look
    python bench/flower_fleet_bench.py --write              # also writes bench/results/flower_fleet.md/.json

The run exits 1 when any verdict line says ``NO`` or ``ERROR``, as the other benches do on a missed target.

The apps run in this process on an in-process Grid (:class:`LocalGrid`: Flower's Grid interface, each
message handed to the ClientApp as a SuperNode would): hundreds of nodes x 4 arms x 3 rounds per setting
would take hours on 2 cores through the simulation engine's per-message overhead. The same app runs under
``flwr run`` (simulation engine) and under a SuperLink with SuperNodes (``tests/integrations``).

Every Jetson time and energy here is **simulated** (the digital twin), and the planner's models are fitted
on twin-profiled rows: the figures show the mechanism, never jetpredict's accuracy on real devices. The
CNN, its training and the accuracies are real (scikit-learn digits, CPU).
"""

from __future__ import annotations

import argparse
import logging
import math
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "flower_fleet"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from flower_fleet import client_app, task  # noqa: E402
from flower_fleet.fleet import ARMS, FleetConfig, fit_fleet_models, run_arms  # noqa: E402
from flwr.app import Context, Message, RecordDict  # noqa: E402
from flwr.serverapp import Grid  # noqa: E402
from flwr.supercore.task_identity import TaskIdentity  # noqa: E402
from results_io import growth_exponent, write_results  # noqa: E402

BASELINES = ("maxn", "maxn-drop", "preset")
#: The baselines whose rounds end by the deadline.
KEEP_DEADLINE = ("maxn-drop", "preset")
#: Fleets above this many clients run ``--seeds-large`` seeds (2 cores: a 500-client setting takes minutes).
LARGE = 100


def _total_j(figs: Sequence[dict[str, Any]], key: str) -> float:
    """The rounds' ``key`` energies summed (J). The twin reports every client's energy and base power, so
    an unknown one is a broken run, stopped with the round's reason rather than summed as a part."""
    for f in figs:
        if f[key] is None:
            raise RuntimeError(f"round {f['round']}: {key} is unknown ({f['energy_note']})")
    return math.fsum(f[key] for f in figs)


class LocalGrid(Grid):
    """A Grid whose nodes are ClientApp calls in this process: node ``p + 1`` is partition ``p`` of
    ``num_nodes`` (the node config the simulation engine gives), all sharing ``run_config``."""

    def __init__(self, app: Any, num_nodes: int, run_config: dict[str, Any]) -> None:
        self.app = app
        self.contexts = {p + 1: Context(run_id=1, node_id=p + 1, node_config={"partition-id": p,
                                                                              "num-partitions": num_nodes},
                                        state=RecordDict(), run_config=dict(run_config))
                         for p in range(num_nodes)}

    def set_run(self, run_id: int) -> None:
        raise NotImplementedError("LocalGrid serves one run")

    @property
    def run(self) -> Any:
        raise NotImplementedError("LocalGrid serves one run")

    def create_message(self, content: RecordDict, message_type: str, dst_node_id: int, group_id: str,
                       ttl: float | None = None) -> Message:
        return Message(content=content, dst_node_id=dst_node_id, message_type=message_type, group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        return list(self.contexts)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        raise NotImplementedError("LocalGrid answers through send_and_receive")

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        raise NotImplementedError("LocalGrid answers through send_and_receive")

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        return [self.app(m, self.contexts[m.metadata.dst_node_id]) for m in messages]


def run_config(cfg: FleetConfig) -> dict[str, Any]:
    """``cfg`` as the app's run config (what the ClientApp reads)."""
    return {f.replace("_", "-"): v for f, v in vars(cfg).items()}


def run_setting(models: dict[str, Any], clients: int, split: str, deadline_s: float, seed: int,
                args: argparse.Namespace) -> dict[str, Any]:
    """All arms of one setting and seed; per arm the totals over the rounds."""
    cfg = FleetConfig(num_server_rounds=args.rounds, local_epochs=args.local_epochs, deadline_s=deadline_s,
                      confidence=args.confidence, min_nodes=clients, seed=seed, split=split,
                      query_timeout_s=args.query_timeout_s)
    grid = LocalGrid(client_app.app, clients, run_config(cfg))
    t0 = time.perf_counter()
    before = TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 0  # what a ServerApp process has
    try:
        runs = run_arms(grid, cfg, models)
    finally:
        TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = before
    wall = time.perf_counter() - t0
    arms = {}
    for run in runs:
        figs = run["rounds"]
        total = {k: sum(f[k] for f in figs) for k in ("trained", "aggregated", "late", "misses", "predicted",
                                                      "time_cover", "time_upper_cover", "energy_cover",
                                                      "energy_checked", "work")}
        total.update(train_energy_j=_total_j(figs, "train_energy_j"),
                     round_energy_j=_total_j(figs, "round_energy_j"),
                     accuracy=run["accuracy"][args.rounds], empty_rounds=run["empty_rounds"],
                     confidence_notes=run["confidence_notes"],
                     excluded=sum(run["excluded"].values()) if run["excluded"] else 0)
        arms[run["arm"]] = total
    # Training energy on the client-rounds both the plan and a baseline trained: the arms leave out
    # different clients (the slowest hold the most data), so totals alone flatter the arm that trains less.
    plan_rows = {(row["round"], row["node_id"]): row["energy_j"] for run in runs if run["arm"] == "plan"
                 for row in run["rows"]}
    for run in runs:
        if run["arm"] != "plan" and plan_rows:
            base = {(row["round"], row["node_id"]): row["energy_j"] for row in run["rows"]}
            both = [k for k in plan_rows if k in base and plan_rows[k] is not None and base[k] is not None]
            arms[run["arm"]]["shared"] = {"client_rounds": len(both),
                                          "plan_j": math.fsum(plan_rows[k] for k in both),
                                          "baseline_j": math.fsum(base[k] for k in both)}
    return {"clients": clients, "split": split, "deadline_s": deadline_s, "seed": seed, "wall_s": wall,
            "client_rounds": sum(a["trained"] for a in arms.values()), "arms": arms}


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else float("nan"))


def _pm(values: Sequence[float], fmt: str = ".0f") -> str:
    mean, sd = _mean_sd(values)
    return f"{mean:{fmt}}" if math.isnan(sd) else f"{mean:{fmt}} ± {sd:{fmt}}"


def _less(savings: Sequence[float]) -> str:
    """Savings in % (mean ± SD over seeds) as "x% less", or "x% more" when the plan used more."""
    if not savings:
        return "–"
    mean, sd = _mean_sd(savings)
    spread = "" if math.isnan(sd) else f" ± {sd:.1f}"
    return f"{mean:.1f}{spread}% less" if mean >= 0 else f"{-mean:.1f}{spread}% more"


def _share(num: int, den: int) -> str:
    return f"{num}/{den} ({100 * num / den:.0f}%)" if den else "–"


def setting_tables(results: list[dict[str, Any]], rounds: int,
                   confidence: float) -> tuple[list[str], list[str], int]:
    """Per setting and arm over the seeds (Markdown rows), the verdict lines, and how many of them fail the run
    (a bar not met, or a round that trained nobody: the bench then exits 1)."""
    arm_rows = ["| clients | split | deadline (s) | arm | client-rounds trained | not trained (excluded) | late "
                "| misses | training energy per round (J) | energy to round ends per round (J) | final accuracy "
                "| time interval held (upper bound) | energy interval held |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    saving_rows = ["| clients | split | deadline (s) | baseline | plan's training energy vs baseline "
                   "| on the client-rounds both trained | plan's energy to round ends vs baseline |",
                   "|---|---|---|---|---|---|---|"]
    verdicts: list[str] = []
    failed = 0
    said_notes: set[str] = set()

    def verdict(ok: bool, text: str, passed: str = "yes", missed: str = "NO") -> None:
        nonlocal failed
        failed += not ok
        verdicts.append(f"- {passed if ok else missed}: {text}")

    keys = sorted({(r["clients"], r["split"], r["deadline_s"]) for r in results})
    for key in keys:
        rs = [r for r in results if (r["clients"], r["split"], r["deadline_s"]) == key]
        label = f"{key[0]} | {key[1]} | {key[2]:g}"
        for arm in ARMS:
            a = [r["arms"][arm] for r in rs if arm in r["arms"]]
            if not a:
                continue
            pred = sum(x["predicted"] for x in a)
            arm_rows.append(
                f"| {label} | {arm} | {_pm([x['trained'] for x in a])} | {_pm([x['excluded'] for x in a])} | "
                f"{_pm([x['late'] for x in a], '.1f')} | {_pm([x['misses'] for x in a], '.1f')} | "
                f"{_pm([x['train_energy_j'] / rounds for x in a])} | {_pm([x['round_energy_j'] / rounds for x in a])} | "
                f"{_pm([x['accuracy'] for x in a], '.3f')} | "
                f"{_share(sum(x['time_cover'] for x in a), pred)} ({_share(sum(x['time_upper_cover'] for x in a), pred)}) | "
                f"{_share(sum(x['energy_cover'] for x in a), sum(x['energy_checked'] for x in a))} |")
        where = f"{key[0]} clients, {key[1]}, {key[2]:g} s"
        plan = [r["arms"]["plan"] for r in rs if "plan" in r["arms"]]
        for arm in BASELINES:
            pairs = [(r["arms"]["plan"], r["arms"][arm]) for r in rs if "plan" in r["arms"] and arm in r["arms"]]
            if not pairs:
                continue
            train = [100 * (1 - p["train_energy_j"] / b["train_energy_j"]) for p, b in pairs if b["train_energy_j"]]
            end = [100 * (1 - p["round_energy_j"] / b["round_energy_j"]) for p, b in pairs if b["round_energy_j"]]
            per = [100 * (1 - b["shared"]["plan_j"] / b["shared"]["baseline_j"])
                   for _, b in pairs if b.get("shared") and b["shared"]["baseline_j"]]
            saving_rows.append(f"| {label} | {arm} | {_less(train)} | {_less(per)} | {_less(end)} |")
        for r in rs:
            for arm, a in r["arms"].items():
                if a["empty_rounds"]:
                    verdict(False, f"{where}, seed {r['seed']}: {arm} trained nobody in round(s) {a['empty_rounds']}",
                            missed="ERROR")
        if plan:
            misses = sum(p["misses"] for p in plan)
            pred = sum(p["predicted"] for p in plan)
            upper = sum(p["time_upper_cover"] for p in plan)
            verdict(misses == 0, f"{where}: the plan missed the deadline {misses} times in "
                    f"{sum(p['trained'] for p in plan)} client-rounds it planned as feasible "
                    f"({sum(p['excluded'] for p in plan)} excluded as infeasible)")
            if pred and upper / pred < confidence:
                notes = {n for p in plan for n in p.get("confidence_notes", [])}
                said_notes |= notes
                said = ", as the plan said it might (its word below)" if notes else ""
                verdict(bool(notes), f"{where}: the plan's upper time bound held {_share(upper, pred)}, under its "
                        f"{100 * confidence:g}% confidence{said}", passed="said so")
            # Accuracy: the plan against the best baseline that keeps the deadline (maxn does not: it waits
            # for the late clients, so it also trains on their data), within 2 SD of run-to-run noise.
            accs = {arm: [r["arms"][arm]["accuracy"] for r in rs if arm in r["arms"]] for arm in ARMS}
            best = max(KEEP_DEADLINE, key=lambda a: statistics.fmean(accs[a]) if accs[a] else -1.0)
            if accs[best] and len(accs["plan"]) > 1:
                noise = max(statistics.stdev(accs["plan"]), statistics.stdev(accs[best]))
                ok = statistics.fmean(accs["plan"]) >= statistics.fmean(accs[best]) - 2 * noise
                verdict(ok, f"{where}: final accuracy {_pm(accs['plan'], '.3f')}, "
                        f"within 2 SD of run-to-run noise of the best deadline-keeping baseline's ({best}, "
                        f"{_pm(accs[best], '.3f')}); maxn, late rounds included: {_pm(accs['maxn'], '.3f')}")
    verdicts += [f"\nThe plan's word on its confidence: \"{note}\"" for note in sorted(said_notes)]
    return arm_rows + [""] + saving_rows, verdicts, failed


def cost_lines(results: list[dict[str, Any]]) -> list[str]:
    """Wall time per setting run against the client-rounds it trained: how the cost grows with size."""
    lines = ["| clients | runs | client-rounds per run (4 arms) | wall per run (s) | ms per client-round |",
             "|---|---|---|---|---|"]
    points = []
    for n in sorted({r["clients"] for r in results}):
        rs = [r for r in results if r["clients"] == n]
        cr = statistics.fmean(r["client_rounds"] for r in rs)
        wall = statistics.fmean(r["wall_s"] for r in rs)
        points.append((n, wall))
        lines.append(f"| {n} | {len(rs)} | {cr:.0f} | {wall:.1f} | {1000 * wall / cr:.1f} |")
    b = growth_exponent(points)
    if b is not None:
        lines += ["", f"Wall time per run ~ clients^{b:.2f} ({points[0][0]:,}-{points[-1][0]:,} clients; 1 = linear)."]
    return lines


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=_ints, default=[50, 500], help="comma-separated, e.g. 50,500")
    parser.add_argument("--splits", default="iid,dirichlet", help=f"comma-separated of {', '.join(task.SPLITS)}")
    parser.add_argument("--deadlines", type=_floats, default=[5.0, 10.0, 30.0], help="round deadlines, simulated s")
    parser.add_argument("--seeds", type=int, default=3, help="seeds (twin profiling noise and training)")
    parser.add_argument("--seeds-large", type=int, default=2,
                        help=f"seeds for more than {LARGE} clients (each costs ~10x a 50-client run)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--local-epochs", type=int, default=5)
    parser.add_argument("--confidence", type=float, default=FleetConfig.confidence)
    parser.add_argument("--query-timeout-s", type=float, default=FleetConfig.query_timeout_s)
    parser.add_argument("--write", action="store_true", help="write bench/results/flower_fleet.md/.json")
    args = parser.parse_args(argv)
    logging.getLogger("flwr").setLevel(logging.WARNING)  # Flower logs every round of every arm at INFO
    splits = [s.strip() for s in args.splits.split(",") if s.strip()]
    for n in args.clients:
        for split in splits:
            task.check_split(n, split, FleetConfig.dirichlet_alpha)  # fail before minutes of fitting
    t0 = time.perf_counter()
    results: list[dict[str, Any]] = []
    for seed in range(max(args.seeds, args.seeds_large)):
        t_fit = time.perf_counter()
        models = fit_fleet_models(seed)
        print(f"seed {seed}: fitted {len(models)} workload models (4 twin-profiled modes each) in "
              f"{time.perf_counter() - t_fit:.1f} s", flush=True)
        for n in args.clients:
            if seed >= (args.seeds if n <= LARGE else args.seeds_large):
                continue
            for split in splits:
                for deadline in args.deadlines:
                    r = run_setting(models, n, split, deadline, seed, args)
                    results.append(r)
                    plan = r["arms"].get("plan", {})
                    print(f"  {n} clients, {split}, {deadline:g} s: {r['wall_s']:.1f} s; plan misses "
                          f"{plan.get('misses')}, " + ", ".join(
                              f"{arm} {a['train_energy_j'] / args.rounds:.0f} J/round" for arm, a in r["arms"].items()),
                          flush=True)
    tables, verdicts, failed = setting_tables(results, args.rounds, args.confidence)
    cost = cost_lines(results)
    total = time.perf_counter() - t0
    print("\n" + "\n".join(tables) + "\n\n" + "\n".join(verdicts) + "\n\n" + "\n".join(cost))
    print(f"\nwhole run {total:.0f} s")
    if args.write:
        text = "\n".join(results_text(args, splits, tables, verdicts, cost, total)) + "\n"
        print(write_results("flower_fleet", text, {"settings": vars(args) | {"splits": splits},
                                                   "runs": results}))
    return 1 if failed else 0


def results_text(args: argparse.Namespace, splits: list[str], tables: list[str], verdicts: list[str],
                 cost: list[str], total_s: float) -> list[str]:
    command = (f"python bench/flower_fleet_bench.py --clients {','.join(map(str, args.clients))} --splits {','.join(splits)} "
               f"--deadlines {','.join(f'{d:g}' for d in args.deadlines)} --seeds {args.seeds} --seeds-large {args.seeds_large} "
               f"--rounds {args.rounds} "
               f"--local-epochs {args.local_epochs} --confidence {args.confidence:g} --write")
    return [
        "# Flower fleet: FedAvg at MAXN, MAXN dropping late clients, the least-energy preset, and jetpredict's plan",
        "", f"Written by `{command}`; whole run {total_s:.0f} s on this 2-core machine.", "",
        "**All Jetson times and energies are simulated** (the digital twin, `profiler/sim`), and the planner's "
        "models are fitted on twin-profiled rows (4 modes per Jetson type, profiling noise seeded by the run's "
        "seed): the figures show the mechanism, not jetpredict's accuracy on real devices. The CNN, its training "
        "and the accuracies are real (scikit-learn digits, CPU).", "",
        "Setup: the app of `examples/flower_fleet` (its ServerApp's arms and its ClientApp) on an in-process Grid. "
        f"{args.rounds} rounds of FedAvg, {args.local_epochs} local epochs, one round deadline for every arm; "
        "client `p` is a Jetson of type `DEVICES[p % 6]` whose local epoch costs what the twin gives for "
        "LeNet-5/MNIST on its share of the data (the mean client holds 1/50 of an MNIST epoch at any size); "
        "splits `iid` (log-normal sizes) and `dirichlet` (alpha 0.5 per label). Arms: `maxn` (FedAvg as it "
        "comes, every Jetson at its fastest preset, the server waits for all); `maxn-drop` (the same, replies "
        "after the deadline dropped: late clients spend their energy for nothing); `preset` (per client the "
        "preset of its type with the least energy until the deadline among those that meet it, chosen on the "
        "twin's own figures: an oracle); `plan` (`JetpredictStrategy` at confidence "
        f"{args.confidence:g}). `preset` and `plan` do not train clients they cannot get there in time "
        "(`not trained`).", "",
        "Accounting, the same for every arm: `late` = trained clients whose time exceeded the deadline; `misses` = "
        "late clients the round waited for; training energy counts every trained client, dropped ones included; "
        "energy to round ends adds each trained client's idle power at its mode (twin base power) until the round "
        "ends (the slowest client waited for, or the deadline when late ones were dropped); clients not trained "
        "are counted in no arm. Intervals: jetpredict's prediction at the mode each client ran "
        f"({100 * args.confidence:g}% intervals, for its work), two-sided and, in brackets, the upper time bound alone "
        "(the one a deadline needs). Figures are per run, mean ± SD over seeds. The plan's energy against each "
        "baseline is given in total, on the client-rounds both arms trained (the fair comparison: `plan` and "
        "`preset` leave out the slowest clients, which hold the most data), and to the round ends.", "",
        "## Per setting and arm", "", *tables, "", "## Verdict", "", *verdicts, "",
        "## Cost against size", "", *cost, ""]


if __name__ == "__main__":
    raise SystemExit(main())
