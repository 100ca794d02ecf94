"""Adaptive profiling replayed on the real AGX Xavier sweeps, and shown on the digital twin.

Real part: each published workload of ``models/reference/agx-xavier-published.csv`` (ResNet-18/CIFAR-10,
MobileNetV3/GLD-23k, LeNet-5/MNIST on the modes a-j, POMACS 2022 Fig 9) is replayed as a device: asking
for a mode returns its measured row (:class:`tools.replay.SweepReplay`). The adaptive
loop (:class:`~jetpredict.predictor.adaptive.AdaptiveChooser`, the code ``profile --adaptive`` drives)
starts from the first 1 or 2 modes of the D-optimal plan over a-j and then picks each next mode among
a-j only, for min-time under a 15 W cap and for min-energy. Leave one workload out: the reference of
the fit holds the *other* real workloads only (as in ``bench/real_cv.py``).

After each step it prints the profiled modes, the recommended mode, its predicted vs measured epoch time
(error %), the width of its 90% time interval, and the measured regret (the recommended mode's measured
objective against the best measured mode of a-j meeting the cap by its measured power). Per run: the
number of profiled modes after which the recommended mode's time is within 3% of its measurement (first
time, and from then on), and where the loop stops with the default ``--target-width``. Target: at the
default stop, every real run within 3% in <= 6 modes; it prints met / NOT met, and the run exits 1 on a miss.

The loop runs to the end of the sweep (target width 0) so every step is shown; a second run with the
default target width gives the stop (its path may differ: a rival that alone holds the stop back is
profiled next).

Twin part (simulated, no accuracy claim): ``profile --device sim:agx-xavier --adaptive`` through the
profiler's campaign, over the same a-j modes; the twin's own sweep of a-j is the "measurement". Then the
README's command as it runs, over the default candidates (the presets and every mode of AGX Xavier and
of Orin Nano; budget ``WHOLE_SPACE_BUDGET``): where it stops, and its pick against the twin's noise-free
figures of every mode (time error; regret against the best mode by the twin's power -- a pick must
certify the cap by its interval's upper end, so under a cap some regret is the rule's, not the loop's).

Cost: seconds per proposed mode against the size of the decision set (a-j, 1,000 modes, the whole space).

Run: ``python bench/adaptive_replay.py`` (about a minute on one core); ``--write`` also writes
``bench/results/adaptive_replay.md`` and ``.json``; ``--no-twin`` skips the twin.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

# This checkout's packages first (an editable install may point at another tree).
sys.path[:0] = [str(Path(__file__).resolve().parent.parent)]
from jetpredict.models.catalogue import MODE_FIELDS, ModeArrays, load_device  # noqa: E402
from jetpredict.models.profile_files import read_profile_csv  # noqa: E402
from jetpredict.predictor import adaptive as A  # noqa: E402
from jetpredict.predictor.constants import LACK_OF_FIT_REL  # noqa: E402
from jetpredict.predictor.decision import Goal  # noqa: E402
from jetpredict.predictor.fit_check import time_scatter  # noqa: E402
from jetpredict.predictor.limits import OBJECTIVES  # noqa: E402
from jetpredict.predictor.reference import build_reference  # noqa: E402
from results_io import (  # noqa: E402
    exponent_text,
    growth_exponent,
    growth_exponents,
    report_targets,
    run_seconds,
    target_lines,
    write_results,
)

from jetpredict.cli import _adaptive_chooser  # noqa: E402
from tools import replay as R  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
REAL_CSV = ROOT / "models" / "reference" / "agx-xavier-published.csv"
#: Where the LeNet-5 sweep may live when the published reference does not hold it.
EXTRA_REAL = sorted((ROOT / "bench" / "data").glob("*lenet5*.csv"))
DEVICE = "agx-xavier"
CAP_W = 15.0
GOALS = (Goal("min-time", max_power_w=CAP_W), Goal("min-energy"))
STARTS = (1, 2)
#: The issue's bar: the recommended mode's time within 3% of its measurement ...
WITHIN = 0.03
#: ... in at most this many profiled modes.
TARGET_MODES = 6
#: Decision-set sizes of the cost table (the device's every mode comes last); the fixed cost of a proposal
#: dominates below 1,000 modes, so the growth is read from there on too.
SET_SIZES = (10, 1_000, 3_000, 10_000)
TWIN_WORKLOADS = ("lenet5-mnist", "resnet18-cifar10", "mobilenetv3-small-gld23k")
#: Measured minibatches per mode of the twin's runs, unless ``--minibatches`` says otherwise.
TWIN_MINIBATCHES = 20
#: Budget of the whole-space twin runs: above TARGET_MODES, so each run shows where it stops by itself.
WHOLE_SPACE_BUDGET = 10
#: Devices of the whole-space twin runs: the largest space, and the smallest (Orin Nano, 1,800 modes).
WHOLE_SPACE_DEVICES = ("agx-xavier", "orin-nano")


def real_rows() -> pd.DataFrame:
    """Every real sweep of AGX Xavier in the repository (duplicates of a workload-mode pair dropped)."""
    frames = [read_profile_csv(REAL_CSV), *(read_profile_csv(p) for p in EXTRA_REAL)]
    real = pd.concat(frames, ignore_index=True)
    return real.drop_duplicates(subset=["workload", "mode"]).reset_index(drop=True)


def measured_best(rows: pd.DataFrame, goal: Goal) -> pd.Series:
    """The best measured mode of a sweep for ``goal`` (the cap on its measured power)."""
    power = rows["epoch_energy_j"] / rows["epoch_time_s"]
    ok = np.ones(len(rows), dtype=bool) if goal.max_power_w is None else (power <= goal.max_power_w).to_numpy()
    key = OBJECTIVES[goal.objective]
    return rows[ok].sort_values(key).iloc[0]


def replay(rows: pd.DataFrame, goal: Goal, start: int, reference, label: str) -> dict:
    """One adaptive run over a sweep; prints each step; returns the run's record."""
    device = R.SweepReplay(rows)
    cands = device.modes()
    from jetpredict.predictor.service import plan_profiling

    first = plan_profiling(DEVICE, start, cands).modes[["mode", *MODE_FIELDS]]
    chooser = A.AdaptiveChooser(load_device(DEVICE), goal, budget=len(rows), target_width=1e-9, candidates=cands,
                                reference=reference, start=first)
    t0 = time.perf_counter()
    R.run_loop(chooser, device.measure)
    seconds = time.perf_counter() - t0
    best_true = measured_best(rows, goal)
    key = OBJECTIVES[goal.objective]
    steps = []
    print(f"\n{label}: {goal.describe()}, start {start} mode(s); best measured mode {best_true['mode']}")
    for st in chooser.steps:
        b = st.decision.best_row
        if b is None:
            steps.append({"modes": len(st.profiled), "profiled": "".join(st.profiled), "recommended": None})
            print(f"  {len(st.profiled):2d} [{''.join(st.profiled):<10}] no mode meets the cap")
            continue
        meas = rows[rows["mode"] == b["mode"]].iloc[0]
        err = b["epoch_time_s"] / meas["epoch_time_s"] - 1.0
        regret = float(meas[key] / best_true[key] - 1.0)
        rec = {"modes": len(st.profiled), "profiled": "".join(st.profiled), "recommended": str(b["mode"]),
               "predicted_s": float(b["epoch_time_s"]), "measured_s": float(meas["epoch_time_s"]),
               "error_pct": 100 * err, "width_pct": 100 * st.decision.time_width_rel,
               "regret_pct": 100 * regret, "rival_gain_pct": 100 * st.decision.rival_gain, "next": None if st.next_mode is None else st.next_mode["mode"],
               "reason": st.reason}
        steps.append(rec)
        print(f"  {rec['modes']:2d} [{rec['profiled']:<10}] recommended {rec['recommended']}: "
              f"{rec['predicted_s']:.1f} s predicted vs {rec['measured_s']:.1f} s measured ({rec['error_pct']:+.1f}%), "
              f"interval {rec['width_pct']:.0f}% wide, rival gain {rec['rival_gain_pct']:.1f}%, "
              f"regret {rec['regret_pct']:.1f}%"
              + (f"; next {rec['next']}: {rec['reason']}" if rec["next"] else ""))
    scored = [s for s in steps if s["recommended"] is not None]
    within = [s["modes"] for s in scored if abs(s["error_pct"]) <= 100 * WITHIN]
    stays = next((s["modes"] for i, s in enumerate(scored)
                  if all(abs(t["error_pct"]) <= 100 * WITHIN for t in scored[i:])), None)
    # ``profile --adaptive`` with the default target, run to its own stop (its path may differ from the
    # full run's above: a rival that alone holds the stop back is profiled next).
    default = A.AdaptiveChooser(load_device(DEVICE), goal, budget=len(rows), candidates=cands, reference=reference,
                                start=first)
    R.run_loop(default, device.measure)
    last = default.steps[-1]
    stop = None
    if last.decision is not None and last.decision.best_row is not None:
        b = last.decision.best_row
        meas = rows[rows["mode"] == b["mode"]].iloc[0]
        stop = {"modes": len(last.profiled), "profiled": "".join(last.profiled),
                "error_pct": 100 * (b["epoch_time_s"] / meas["epoch_time_s"] - 1.0),
                "regret_pct": 100 * float(meas[key] / best_true[key] - 1.0)}
    record = {"workload": label, "objective": goal.objective, "max_power_w": goal.max_power_w, "start": start,
              "best_measured": str(best_true["mode"]),
              "best_measured_power_w": float(best_true["epoch_energy_j"] / best_true["epoch_time_s"]),
              "first_within_3pct": within[0] if within else None,
              "within_3pct_from": stays, "stop_modes": None if stop is None else stop["modes"],
              "stop_profiled": None if stop is None else stop["profiled"],
              "stop_error_pct": None if stop is None else stop["error_pct"],
              "stop_regret_pct": None if stop is None else stop["regret_pct"],
              "seconds": seconds, "steps": steps}
    print(f"  -> within 3% first after {record['first_within_3pct']} mode(s), from {stays} on; "
          f"default stop after {record['stop_modes']} mode(s): "
          f"error {_pct(record['stop_error_pct'])}, regret {_pct(record['stop_regret_pct'])}; {seconds:.1f} s")
    return record


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:+.1f}%"


def _goal_text(record: dict) -> str:
    """A run's goal as the tables write it: the objective and its power cap."""
    cap = record["max_power_w"]
    return record["objective"] + (f" <= {cap:g} W" if cap else "")


def _table_head(title: str, intro: str, columns: tuple[str, ...]) -> list[str]:
    """The lines that open a results section: its title, a sentence, a table's header."""
    return ["", title, "", intro, "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]


def _n(v: int | None) -> str:
    """A mode count, or "never" (within the sweep)."""
    return "never" if v is None else str(v)


def real_part() -> list[dict]:
    real = real_rows()
    records = []
    for workload in sorted(real["workload"].unique()):
        rows = real[real["workload"] == workload].reset_index(drop=True)
        others = real[real["workload"] != workload].reset_index(drop=True)
        reference = build_reference(others, DEVICE)  # leave one workload out: never the target's rows
        for goal in GOALS:
            for start in STARTS:
                records.append(replay(rows, goal, start, reference, workload))
    return records


def twin_chooser(device_id: str, start, goal: Goal, target_width: float, candidates: pd.DataFrame
                 ) -> A.AdaptiveChooser:
    """``profile --adaptive``'s own chooser over ``candidates``: a-j's published clocks (1200 MHz, ...) lie off
    the steps the twin runs and records (1190.4 MHz, ...), and the CLI moves the candidates onto them. Unmoved,
    the chooser did not know a profiled mode as its candidate and proposed it again (2026-12-06: LeNet-5
    min-energy profiled a,h,e then a seven times)."""
    return _adaptive_chooser(device_id, start, budget=len(candidates), objective=goal.objective,
                             max_power_w=goal.max_power_w, target_width=target_width, candidates=candidates)


def twin_part(minibatches: int) -> list[dict]:
    """``profile --adaptive`` on the twin over a-j (simulated), against the twin's own sweep of a-j."""
    from jetpredict.profiler.campaign import CampaignConfig, run_campaign

    cands = real_rows().drop_duplicates("mode")[["mode", *MODE_FIELDS]].reset_index(drop=True)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        modes_csv = Path(tmp) / "a-j.csv"
        cands.to_csv(modes_csv, index=False)
        for workload in TWIN_WORKLOADS:
            sweep = pd.DataFrame(run_campaign(CampaignConfig(
                device=f"sim:{DEVICE}", workload=workload, out=Path(tmp) / "sweep.csv", modes=str(modes_csv),
                minibatches=minibatches, progress=False)))
            for goal in GOALS:
                def run(target_width: float, goal=goal, workload=workload) -> tuple[A.AdaptiveChooser, list, float]:
                    box: list[A.AdaptiveChooser] = []

                    def factory(device_id, start):
                        box.append(twin_chooser(device_id, start, goal, target_width, cands))
                        return box[-1]

                    t0 = time.perf_counter()
                    rows = run_campaign(CampaignConfig(device=f"sim:{DEVICE}", workload=workload,
                                                       out=Path(tmp) / "adaptive.csv", minibatches=minibatches,
                                                       progress=False, adaptive=factory))
                    return box[0], rows, time.perf_counter() - t0

                chooser, rows, seconds = run(1e-9)
                print(f"\n[simulated] twin {workload}: {goal.describe()} ({len(rows)} modes profiled, "
                      f"{seconds:.1f} s)")
                steps = []
                for st in chooser.steps:
                    b = st.decision.best_row
                    if b is None:
                        continue
                    meas = sweep[sweep["mode"] == b["mode"]].iloc[0]
                    err = 100 * (b["epoch_time_s"] / meas["epoch_time_s"] - 1.0)
                    steps.append({"modes": len(st.profiled), "profiled": "".join(st.profiled),
                                  "recommended": str(b["mode"]), "error_pct": err,
                                  "width_pct": 100 * st.decision.time_width_rel,
                                  "settled": chooser.settled(st.decision) is not None})
                    print(f"  {len(st.profiled):2d} [{''.join(st.profiled):<10}] recommended {b['mode']}: "
                          f"{err:+.1f}% vs the twin's sweep, "
                          f"interval {100 * st.decision.time_width_rel:.0f}% wide")
                within = [s["modes"] for s in steps if abs(s["error_pct"]) <= 100 * WITHIN]
                # ``profile --adaptive`` with the default target, to its own stop.
                default, _, _ = run(A.DEFAULT_TARGET_WIDTH_REL)
                last = default.steps[-1]
                stop = None
                if last.decision is not None and last.decision.best_row is not None:
                    b = last.decision.best_row
                    meas = sweep[sweep["mode"] == b["mode"]].iloc[0]
                    stop = {"modes": len(last.profiled),
                            "error_pct": 100 * (b["epoch_time_s"] / meas["epoch_time_s"] - 1.0)}
                out.append({"workload": workload, "source": "simulated", "objective": goal.objective,
                            "max_power_w": goal.max_power_w, "first_within_3pct": within[0] if within else None,
                            "stop_modes": None if stop is None else stop["modes"],
                            "stop_error_pct": None if stop is None else stop["error_pct"],
                            "seconds": seconds, "steps": steps})
                print(f"  -> within 3% first after {out[-1]['first_within_3pct']} mode(s); default stop after "
                      f"{out[-1]['stop_modes']} mode(s), error {_pct(out[-1]['stop_error_pct'])}")
    return out


def whole_space_part(minibatches: int) -> list[dict]:
    """``profile --device sim:DEVICE --adaptive`` over the default candidates (simulated) on each of
    ``WHOLE_SPACE_DEVICES``, its pick scored against the twin's noise-free figures of every candidate."""
    from jetpredict.profiler.campaign import CampaignConfig, run_campaign
    from jetpredict.profiler.sim import workload_complexity
    from jetpredict.profiler.sim.physics import DevicePhysics
    from jetpredict.profiler.sim.twin import Twin

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for device_id in WHOLE_SPACE_DEVICES:
            device = load_device(device_id)
            every = A.Adviser(device, GOALS[0]).candidates  # the loop's own default candidates
            knobs = every[list(MODE_FIELDS)].to_numpy(dtype=float)
            print(f"\n[simulated] twin {device_id}, default candidates ({len(every):,} modes), "
                  f"budget {WHOLE_SPACE_BUDGET}:")
            for workload in TWIN_WORKLOADS:
                truth = Twin(DevicePhysics(device), workload_complexity(workload)).epoch(ModeArrays.from_frame(every))
                for goal in GOALS:
                    box: list[A.AdaptiveChooser] = []

                    def factory(device_id, start, goal=goal, box=box):
                        box.append(A.AdaptiveChooser(load_device(device_id), goal, budget=WHOLE_SPACE_BUDGET))
                        return box[-1]

                    t0 = time.perf_counter()
                    rows = run_campaign(CampaignConfig(device=f"sim:{device_id}", workload=workload,
                                                       out=Path(tmp) / "adaptive.csv", minibatches=minibatches,
                                                       progress=False, adaptive=factory))
                    seconds = time.perf_counter() - t0
                    last = box[0].steps[-1]
                    b = last.decision.best_row
                    key = OBJECTIVES[goal.objective]
                    ok = np.ones(len(every), dtype=bool)
                    if goal.max_power_w is not None:
                        ok &= truth["avg_power_w"] <= goal.max_power_w
                    at = int(np.flatnonzero(np.all(np.isclose(knobs, [b[k] for k in MODE_FIELDS]), axis=1))[0])
                    rec = {"device": device_id, "workload": workload, "objective": goal.objective,
                           "max_power_w": goal.max_power_w, "modes": len(rows),
                           "profiled": [str(r["mode"]) for r in rows], "recommended": str(b["mode"]),
                           "error_pct": 100 * (b["epoch_time_s"] / truth["epoch_time_s"][at] - 1.0),
                           "regret_pct": 100 * (truth[key][at] / truth[key][ok].min() - 1.0),
                           "stop": last.stop, "seconds": seconds,
                           "rows_scatter_pct": 100 * time_scatter(box[0].adviser.fit_model(pd.DataFrame(rows))).rms_rel}
                    out.append(rec)
                    print(f"  {workload} (simulated), {goal.describe()}: {rec['modes']} modes "
                          f"[{', '.join(rec['profiled'])}] -> {rec['recommended']}, time {rec['error_pct']:+.1f}% "
                          f"vs the twin, regret {rec['regret_pct']:+.1f}%; stop: {rec['stop']} ({seconds:.1f} s)")
    return out


def _best_of(repeats: int, work) -> float:
    """The least wall time (s) of ``repeats`` runs of ``work()``: one run on shared cores is noisy."""
    return min(run_seconds(work, repeats, time.perf_counter))


def cost_part(repeats: int = 3) -> list[dict]:
    """Seconds to propose one mode against the size of the decision set (a fitted ResNet-18, 2 modes) and
    against the profiled modes (1,000 candidates); the best of ``repeats`` runs each."""
    real = real_rows()
    rows = real[real["workload"] == "resnet18-cifar10"].reset_index(drop=True)
    space = load_device(DEVICE).modes()
    allm = pd.DataFrame(space.arrays().columns(), columns=list(MODE_FIELDS))
    allm.insert(0, "mode", space.labels())
    out = []
    print("\ncost of one proposal (s) vs decision-set size:")
    for n in SET_SIZES + (len(allm),):
        cands = rows[["mode", *MODE_FIELDS]] if n == 10 else allm.sample(n, random_state=0) if n < len(allm) else None
        adviser = A.Adviser(load_device(DEVICE), GOALS[0], cands)
        seconds = _best_of(repeats, lambda a=adviser: a.propose(rows.iloc[[0, 7]], 1))
        size = len(adviser.candidates)
        out.append({"decision_set": size, "profiled_modes": 2, "seconds": seconds})
        print(f"  {size:6d} modes: {seconds:.2f} s ({A.SHORTLIST} refits at most)")
    # 1,000 modes of the device: the open candidates stay ~constant as modes are profiled (not so among 10).
    # Its 2-profiled point is the one above (the same 1,000 modes): measured and counted once.
    print("cost of one proposal (s) vs profiled modes (decision set: 1,000 modes of the device):")
    adviser = A.Adviser(load_device(DEVICE), GOALS[0], allm.sample(1000, random_state=0))
    for k in (4, 8):
        seconds = _best_of(repeats, lambda k=k: adviser.propose(rows.iloc[:k], 1))
        out.append({"decision_set": len(adviser.candidates), "profiled_modes": k, "seconds": seconds})
        print(f"  {k} profiled: {seconds:.2f} s")
    return out


def cost_slopes(cost: list[dict]) -> tuple[float | None, float | None, float | None]:
    """Growth exponents of the proposal cost: with the decision set over all sizes and from 1,000 modes on
    (2 profiled modes), and with the profiled modes (1,000 candidates)."""
    by_set = [(c["decision_set"], c["seconds"]) for c in cost if c["profiled_modes"] == 2]
    return (*growth_exponents(by_set, 1000),
            growth_exponent((c["profiled_modes"], c["seconds"]) for c in cost if c["decision_set"] == 1000))


def bar_met(real: list[dict]) -> list[bool]:
    """The issue's bar, per real run: at the default stop, <= TARGET_MODES modes and the time within 3%."""
    return [r["stop_modes"] is not None and r["stop_modes"] <= TARGET_MODES and r["stop_error_pct"] is not None
            and abs(r["stop_error_pct"]) <= 100 * WITHIN for r in real]


def verdict(real: list[dict]) -> dict[str, bool | None]:
    """The bench's target: every real run meets the bar (:func:`bar_met`); None without a run."""
    ok = bar_met(real)
    return {f"time within {WITHIN:.0%} at the default stop in <= {TARGET_MODES} modes, every real run "
            f"({sum(ok)} of {len(ok)})": all(ok) if ok else None}


def bar_line(real: list[dict]) -> str:
    """The issue's bar, per run, and the runs that missed it."""
    ok = bar_met(real)
    misses = [f"{r['workload']} {r['objective']} start {r['start']} ({r['stop_modes']} modes, "
              f"{_pct(r['stop_error_pct'])})" for r, good in zip(real, ok, strict=True) if not good]
    return (f"Bar (recommended mode's time within 3% at the default stop, in <= {TARGET_MODES} modes): "
            f"{sum(ok)} of {len(ok)} runs" + (f"; missed: {'; '.join(misses)}" if misses else ""))


def markdown(real: list[dict], twin: list[dict], whole: list[dict], cost: list[dict], minibatches: int) -> str:
    lines = ["# Adaptive profiling replayed on real sweeps", "",
             "`python bench/adaptive_replay.py --write`. Real: AGX Xavier, modes a-j (POMACS 2022 Fig 9), "
             "each workload replayed with a reference of the other real workloads only; candidates a-j. "
             f"Goals: min-time under {CAP_W:g} W (measured power), min-energy. Error = predicted vs measured "
             "epoch time of the recommended mode; regret = its measured objective vs the best measured mode.",
             "", "| workload | goal | start | within 3% first / from | default stop: modes, error, regret |",
             "|---|---|---|---|---|"]
    for r in real:
        goal = _goal_text(r)
        lines.append(f"| {r['workload']} | {goal} | {r['start']} | {_n(r['first_within_3pct'])} / "
                     f"{_n(r['within_3pct_from'])} | {_n(r['stop_modes'])}, {_pct(r['stop_error_pct'])}, "
                     f"{_pct(r['stop_regret_pct'])} |")
    capped = sorted({(r["workload"], r["best_measured"], r["best_measured_power_w"]) for r in real
                     if r["max_power_w"] and r["stop_regret_pct"]})
    lines += ["", bar_line(real), "", *(f"- {line}" for line in target_lines(verdict(real))), ""]
    if capped:
        lines += ["Regret under the cap: the fastest mode by *measured* power ("
                  + ", ".join(f"{w} {m} at {pw:.2f} W" for w, m, pw in capped)
                  + f") lies so close to {CAP_W:g} W that the upper end of its 90% power interval passes the cap "
                  "even once profiled (the power-noise floor), so `recommend` cannot certify it: the rule "
                  "that caps hold for the interval, not a profiling shortfall.", ""]
    lines += ["## Steps (real)", ""]
    for r in real:
        goal = _goal_text(r)
        lines.append(f"- {r['workload']}, {goal}, start {r['start']}: " + "; ".join(
            f"{s['profiled']} -> {s['recommended']} {s.get('error_pct', float('nan')):+.1f}% "
            f"(w {s.get('width_pct', float('nan')):.0f}%)" for s in r["steps"] if s["recommended"]))
    if twin:
        lines += _table_head("## Digital twin (simulated: no accuracy claim)",
                             f"`profile --device sim:agx-xavier --adaptive --minibatches {minibatches}` over the modes a-j; error against the "
                             "twin's own sweep of a-j.",
                             ("workload", "goal", "within 3% first", "default stop: modes, error", "steps"))
        for r in twin:
            lines.append(f"| {r['workload']} (simulated) | {_goal_text(r)} | {_n(r['first_within_3pct'])} | "
                         f"{_n(r['stop_modes'])}, {_pct(r['stop_error_pct'])} | " + "; ".join(
                             f"{s['profiled']} -> {s['recommended']} {s['error_pct']:+.1f}%" for s in r["steps"]) + " |")
    if whole:
        lines += _table_head("### Over the default candidates (simulated)",
                             f"`profile --device sim:DEVICE --adaptive --budget {WHOLE_SPACE_BUDGET} --minibatches {minibatches}` as the README "
                             "runs it (the presets and every mode); time error and regret against the twin's "
                             "noise-free figures of every mode (the cap by its power); the stop's reason, shortened; "
                             "the profiled rows' scatter about the loop's last fit (RMS; `fit` warns past "
                             f"{LACK_OF_FIT_REL:.0%}).",
                             ("device", "workload", "goal", "modes", "profiled", "pick", "time error", "regret",
                              "stop", "rows' scatter"))
        for r in whole:
            stop = str(r["stop"]).split(",")[0].split(";")[0]
            lines.append(f"| {r['device']} | {r['workload']} (simulated) | {_goal_text(r)} | {r['modes']} | "
                         f"{', '.join(r['profiled'])} | {r['recommended']} | {_pct(r['error_pct'])} | "
                         f"{_pct(r['regret_pct'])} | {stop} | {r['rows_scatter_pct']:.1f}% |")
    lines += ["", "## Cost (best of 3 runs each)", "", "| decision set (modes) | profiled modes | s per proposed mode |",
              "|---|---|---|"]
    lines += [f"| {c['decision_set']} | {c['profiled_modes']} | {c['seconds']:.2f} |" for c in cost]
    by_set, by_set_large, by_rows = cost_slopes(cost)
    lines += ["", f"s per proposal ~ decision set^{exponent_text(by_set)} over all sizes, "
              f"^{exponent_text(by_set_large)} from 1,000 modes on (2 profiled modes; below, the fixed cost), "
              f"~ profiled modes^{exponent_text(by_rows)} (1,000 candidates): each proposal refits the model on "
              f"the profiled rows for a shortlist of at most {A.SHORTLIST} candidates."]
    return "\n".join(lines) + "\n"


def without_steps(text: str) -> str:
    """``text`` without its per-step detail (the "## Steps (real)" section): the summary tables, the twin's and
    the Cost section (its growth figures)."""
    head, steps = text.split("## Steps", 1)
    rest = steps.split("\n## ", 1)
    return head + ("## " + rest[1] if len(rest) > 1 else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write bench/results/adaptive_replay.md/.json")
    parser.add_argument("--no-twin", action="store_true", help="skip the digital twin part")
    parser.add_argument("--minibatches", type=int, default=TWIN_MINIBATCHES, help="twin: measured minibatches per mode")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", RuntimeWarning)  # a stale bundled reference is refitted: not our subject
    real = real_part()
    twin = [] if args.no_twin else twin_part(args.minibatches)
    whole = [] if args.no_twin else whole_space_part(args.minibatches)
    cost = cost_part()
    text = markdown(real, twin, whole, cost, args.minibatches)
    print("\n" + without_steps(text))
    if args.write:
        path = write_results("adaptive_replay", text, {"real": real, "twin": twin, "whole_space": whole, "cost": cost})
        print(f"wrote {path}")
    return report_targets(verdict(real))


if __name__ == "__main__":
    sys.exit(main())
