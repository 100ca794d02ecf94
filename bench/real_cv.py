"""Real-data cross-validation of the predictor: every small design, references that do not flatter.

Data: the three real AGX Xavier sweeps (ResNet-18/CIFAR-10, MobileNetV3/GLD-23k and the CPU-bound
LeNet-5/MNIST on the published modes a-j, POMACS 2022 Fig 9, ``models/reference/agx-xavier-published.csv``).
For each target workload, **every** design of 1, 2, 3 and 4 profiled modes among a-j (10 + 45 + 120 + 210
= 385 designs) is fitted and scored on the modes it did not profile, under three references, none of which
contains the target (:func:`jetpredict.predictor.calibration.references`):

- ``other real``: the other two real workloads' sweeps (leave one workload out);
- ``opposite regime``: the digital twin's sweep of the other regime on AGX Xavier (simulated; its CPU-bound
  LeNet-5 for the GPU-bound targets, its ResNet-18 for LeNet-5): a prior the rows must override;
- ``other device``: Xavier NX's simulated sweeps moved to AGX Xavier through device physics (the path a
  device without its own reference takes).

Per target, reference and design size it prints the median and 90th percentile over designs of the
time, energy and power MAPE (%), per component the median MAPE of the stall and the compute time and the
median error of the rest (% of the epoch: the rest is ~0.1% of a GPU-bound epoch), the coverage (%) of the
nominal 90% intervals over every held-out (design, mode) pair and their median width (% of the prediction,
high - low), and the mean-of-profiled baseline. The interval scales of each target are calibrated on the
other two workloads' cells only, whose ``other real`` references then leave the target out too (the third
workload alone: :func:`jetpredict.predictor.calibration.residual_cells` with ``excluded``), so its coverage
is out of sample. At the largest design size, where the energy error comes from (the energy MAPE with the measured
time, then with the measured power, in place of the predicted one) and the mean signed error per held-out
mode (what every design misses the same way). Then the leave-one-mode-out form check per workload (fitted
on 9 modes, the other two workloads as reference, predicting the 10th: time, energy and power, stall and
compute), and the data against physics: where a mode with more cores or faster clocks is slower or draws
less power, and the least error of any model that keeps that order (in sample). At 4 modes (other real),
every design again with columns left out of its profiled rows: ``[no meter]`` (power from the reference) and
``[no components]`` (epoch totals alone: the split is the reference's), scored against every measured column.
Then the real cross-device rows (``bench/data/published_cross_device.csv``): AGX Xavier ->
Xavier NX, Xavier NX -> Nano and back, AGX Xavier -> Orin AGX, from 1-4 profiled modes and from the whole sweep.

The scores are only as good as these 30 real rows: two GPU-bound CNNs and a CPU-bound one on ten modes whose
CPU clock takes three values; the model's constants were chosen with these rows in view.

Run: ``python bench/real_cv.py`` (about three minutes on one core) prints the tables; ``--write`` also writes
``bench/results/real_cv.md`` and ``.json``. ``--sizes 4`` or ``--cases "other real"`` run a subset. Its one
target is issue 11's interval bar (``real_cv_report.COVERAGE_BAR``): it prints met / NOT met and the run
exits 1 when any coverage falls under it; the MAPE figures are reported, not held to a bar.
This script runs the checks; what one design scores is in ``real_cv_scoring.py``, the text in ``real_cv_report.py``.
"""


from __future__ import annotations

import argparse
import itertools
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

# This checkout's packages first (an editable install may point at another tree).
sys.path[:0] = [str(Path(__file__).resolve().parent.parent)]
from jetpredict.models.catalogue import MODE_FIELDS, ModeArrays, load_device  # noqa: E402
from jetpredict.models.profile_files import read_profile_csv  # noqa: E402
from jetpredict.predictor import bundled  # noqa: E402
from jetpredict.predictor.bundled import fit_workload  # noqa: E402
from real_cv_report import (  # noqa: E402
    COVERAGE_BAR,
    cost_lines,
    coverage_check,
    cross_text,
    error_sources,
    markdown,
    row_text,
    rows_scatter_lines,
)
from real_cv_scoring import (  # noqa: E402
    CASES,
    COMPONENTS,
    CROSS_CSV,
    OUTPUTS,
    REAL_CSV,
    SCALES,
    SIZES,
    TARGETS,
    monotone_check,
    out_of_sample_scales,
    per_mode_bias,
    predict,
    references,
    score_design,
    summarise,
)
from results_io import report_targets, write_results  # noqa: E402


def within_device(real: pd.DataFrame, cases, sizes) -> list[dict]:
    refs = references(real, cases)
    results = []
    for target in TARGETS:
        rows = real[real["workload"] == target].reset_index(drop=True)
        for case in cases:
            ref = refs[(target, case)]
            for size in sizes:
                t0 = time.process_time()
                scores = [s for pick in itertools.combinations(range(len(rows)), size)
                          if (s := score_design(rows, pick, ref)) is not None]
                row = {"target": target, "reference": case, "modes": size, **summarise(scores),
                       "designs": len(scores), "cpu_s": time.process_time() - t0,
                       "rows_scatter_max_pct": max(s["rows_scatter_pct"] for s in scores)}
                if size == max(sizes):  # the largest size this run scores
                    row["per_mode_bias"] = per_mode_bias(scores)
                results.append(row)
                print(row_text(row), flush=True)
    return results


#: The fits with columns left out of the profiled rows: label -> score_design's arguments that leave them out.
WITHOUT = {"no meter": {"metered": False}, "no components": {"components": False}}


def without_columns(real: pd.DataFrame, label: str) -> list[dict]:
    """Every 4-mode design per target, the other real workloads as reference, fitted with the columns that
    ``WITHOUT[label]`` leaves out of the profiled rows (``no meter``: power and energy from the reference's
    power model; ``no components``: the epoch split from the reference's), scored against every measured
    column of the held-out modes."""
    refs = references(real, ("other real",))
    out = []
    for target in TARGETS:
        rows = real[real["workload"] == target].reset_index(drop=True)
        scores = [s for pick in itertools.combinations(range(len(rows)), 4)
                  if (s := score_design(rows, pick, refs[(target, "other real")], **WITHOUT[label])) is not None]
        row = {"target": target, "reference": "other real", "modes": 4, **summarise(scores)}
        out.append(row)
        print(f"[{label}] " + row_text(row), flush=True)
    return out


def leave_one_mode_out(real: pd.DataFrame) -> list[dict]:
    """The form check: each workload fitted on 9 of its modes (the other real workloads as reference)
    predicts the 10th; per output (time, energy, power) and component (stall, compute) the mean and max
    error (%), and the per-mode time and energy errors."""
    refs = references(real, ("other real",))
    names = [name for _, name in OUTPUTS] + list(COMPONENTS[:2])
    out = []
    for target in TARGETS:
        rows = real[real["workload"] == target].reset_index(drop=True)
        errors: dict[str, dict[str, float]] = {name: {} for name in names}
        for i in range(len(rows)):
            s = score_design(rows, tuple(j for j in range(len(rows)) if j != i), refs[(target, "other real")])
            if s is not None:
                for name in names:
                    errors[name][str(rows["mode"].iloc[i])] = float(s[f"{name}_err"][0])
        row: dict = {"target": target}
        for name in names:
            row[f"{name}_mape"] = float(np.mean(list(errors[name].values())))
            row[f"{name}_max"] = float(max(errors[name].values()))
        row["per_mode"], row["per_mode_energy"] = errors["time"], errors["energy"]
        out.append(row)
        print(f"leave-one-mode-out {target:<20} MAPE (max) time {row['time_mape']:.1f}% ({row['time_max']:.1f}%), "
              f"energy {row['energy_mape']:.1f}% ({row['energy_max']:.1f}%), power {row['power_mape']:.1f}% "
              f"({row['power_max']:.1f}%), stall {row['stall_mape']:.1f}%, compute {row['compute_mape']:.1f}%; "
              "time: " + " ".join(f"{m} {e:.1f}" for m, e in errors["time"].items())
              + "; energy: " + " ".join(f"{m} {e:.1f}" for m, e in errors["energy"].items()), flush=True)
    return out


def named_designs(real: pd.DataFrame) -> dict[str, list[str]]:
    """The designs a user would profile: the seed study's e,f,i,j, what ``plan --candidates <a-j>
    --budget 4`` picks, and MAXN (g) alone."""
    from jetpredict.predictor.service import plan_profiling

    cands = real.drop_duplicates("mode")[["mode", *MODE_FIELDS]]
    planned = list(plan_profiling("agx-xavier", 4, cands.reset_index(drop=True)).modes["mode"])
    return {"e,f,i,j": list("efij"), "plan: " + ",".join(planned): planned, "MAXN (g) alone": ["g"]}


def named(real: pd.DataFrame, cases) -> list[dict]:
    """Time/energy/power MAPE, coverage and width of each named design, per target and reference."""
    refs = references(real, cases)
    out = []
    for label, modes in named_designs(real).items():
        for target in TARGETS:
            rows = real[real["workload"] == target].reset_index(drop=True)
            pick = tuple(int(i) for i in np.flatnonzero(rows["mode"].isin(modes)))
            for case in cases:
                s = score_design(rows, pick, refs[(target, case)])
                if s is None:
                    continue
                row = {"design": label, "target": target, "reference": case, **summarise([s])}
                out.append(row)
                print(f"[{label}] " + row_text({**row, "modes": len(pick)}), flush=True)
    return out


def cross_device(real: pd.DataFrame) -> list[dict]:
    """Real cross-device checks: a model fitted on one device predicts a real row of another."""
    cross = read_profile_csv(CROSS_CSV)
    refs = references(real, ("other real",))

    def row_of(device: str, workload: str) -> pd.DataFrame:
        return cross[(cross["device"] == device) & (cross["workload"] == workload)].reset_index(drop=True)

    out = []

    def record(label: str, models: list, target: pd.DataFrame) -> None:
        dev = str(target["device"].iloc[0])
        preds = [predict(m, target, device_id=dev) for m in models]
        entry = {"case": label, "designs": len(models), "target_device": dev,
                 "time_real_s": float(target["epoch_time_s"].iloc[0])}
        e_real = float(target["epoch_energy_j"].iloc[0])
        entry["energy_real_j"] = None if np.isnan(e_real) else e_real
        # Which designs' predictions flag the target mode as outside the profiled share of a knob's top.
        knobs = [str(p["extrapolated_knobs"][0]) for p in preds]
        flagged = np.array([k != "" for k in knobs])
        entry["flagged_share"] = float(np.mean(flagged) * 100)
        entry["flagged_knobs"] = max(set(knobs), key=knobs.count) if flagged.any() else ""
        moves = widening_moves([m for m, f in zip(models, flagged, strict=True) if f], target, preds=[
            p for p, f in zip(preds, flagged, strict=True) if f])
        entry["widening_move_median"] = float(np.median(moves)) if moves.size else None
        entry["widening_move_max"] = float(np.max(moves)) if moves.size else None
        for col, name, real_v in (("epoch_time_s", "time", entry["time_real_s"]),
                                  ("epoch_energy_j", "energy", entry["energy_real_j"])):
            pred = np.array([float(p[col][0]) for p in preds])
            lo = np.array([float(p[f"{col}_low"][0]) for p in preds])
            hi = np.array([float(p[f"{col}_high"][0]) for p in preds])
            entry[f"{name}_pred_median"] = float(np.median(pred))
            entry[f"{name}_low_median"] = float(np.median(lo))
            entry[f"{name}_high_median"] = float(np.median(hi))
            if real_v is not None:
                err = np.abs(pred / real_v - 1.0) * 100.0
                entry[f"{name}_err_median"] = float(np.median(err))
                entry[f"{name}_err_p90"] = float(np.percentile(err, 90))
                held = (real_v >= lo) & (real_v <= hi)
                entry[f"{name}_coverage"] = float(np.mean(held) * 100)
                entry[f"{name}_coverage_flagged"] = float(np.mean(held[flagged]) * 100) if flagged.any() else None
            entry[f"{name}_width_median"] = float(np.median((hi - lo) / pred * 100))
        out.append(entry)
        print(cross_text(entry), flush=True)

    # MobileNetV3 fitted on AGX Xavier (every 1-4-mode design of a-j, ResNet-18 as the reference).
    mob = real[real["workload"] == "mobilenetv3-gld23k"].reset_index(drop=True)
    ref = refs[("mobilenetv3-gld23k", "other real")]
    designs = [mob.iloc[list(p)] for k in SIZES for p in itertools.combinations(range(len(mob)), k)]
    models = [fit_workload(d, reference=ref) for d in designs]
    record("MobileNetV3 AGX Xavier (every 1-4-mode design of a-j) -> Xavier NX 15W", models,
           row_of("xavier-nx", "mobilenetv3-gld23k"))
    record("MobileNetV3 AGX Xavier (every 1-4-mode design of a-j) -> Orin AGX MAXN (PowerTrain, time only)",
           models, row_of("orin-agx", "mobilenetv3-gld23k"))
    # The same from the whole sweep: more profiled modes on the source must not make the transfer worse.
    whole = [fit_workload(mob, reference=ref)]
    record("MobileNetV3 AGX Xavier (all 10 modes a-j) -> Xavier NX 15W", whole, row_of("xavier-nx", "mobilenetv3-gld23k"))
    record("MobileNetV3 AGX Xavier (all 10 modes a-j) -> Orin AGX MAXN (PowerTrain, time only)", whole,
           row_of("orin-agx", "mobilenetv3-gld23k"))
    # Single real rows of one device predicting another (default bundled references on both sides).
    for src, dst, workload, label in (
            ("agx-xavier", "xavier-nx", "mobilenetv3-gld23k", "MobileNetV3 AGX Xavier MAXN (1 mode) -> Xavier NX 15W"),
            ("xavier-nx", "agx-xavier", "mobilenetv3-gld23k", "MobileNetV3 Xavier NX 15W (1 mode) -> AGX Xavier MAXN"),
            ("xavier-nx", "nano", "lenet5-mnist", "LeNet-5 Xavier NX 15W (1 mode) -> Nano MAXN"),
            ("nano", "xavier-nx", "lenet5-mnist", "LeNet-5 Nano MAXN (1 mode) -> Xavier NX 15W")):
        record(label, [fit_workload(row_of(src, workload))], row_of(dst, workload))
    return out


def widening_moves(models: list, target: pd.DataFrame, preds: list[dict[str, np.ndarray]]) -> np.ndarray:
    """Per model, how far (%) the extrapolation widening moves the farthest end of the target mode's 90%
    time and energy intervals: ``preds`` (the models' predictions of ``target`` on its device) against the
    same moved models with no profiled ranges (nothing flagged, nothing widened)."""
    device, modes = load_device(str(target["device"].iloc[0])), ModeArrays.from_frame(target)
    ends = [f"{col}_{end}" for col in ("epoch_time_s", "epoch_energy_j") for end in ("low", "high")]
    out = []
    for model, pred in zip(models, preds, strict=True):
        plain = replace(bundled.on_device(model, device), profiled_ranges=None).predict(modes).columns()
        out.append(max(abs(float(pred[c][0]) / float(plain[c][0]) - 1.0) * 100.0 for c in ends))
    return np.array(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="design sizes, e.g. 1,4")
    parser.add_argument("--cases", default=",".join(CASES), help=f"references among {', '.join(CASES)}")
    parser.add_argument("--no-cross-device", action="store_true", help="skip the cross-device rows")
    parser.add_argument("--write", action="store_true", help="write bench/results/real_cv.md and .json")
    args = parser.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(","))
    cases = tuple(c.strip() for c in args.cases.split(","))
    unknown = [c for c in cases if c not in CASES] + [s for s in sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown case/size {unknown[0]!r}; cases: {', '.join(CASES)}; sizes 1-4")
    t0 = time.perf_counter()
    real = read_profile_csv(REAL_CSV)
    SCALES.update(out_of_sample_scales())
    for target, table in SCALES.items():
        print(f"scales for {target} (from the other two): " + ", ".join(
            f"{k}: time {v.time} power {v.power} energy {v.energy}" for k, v in table.items()), flush=True)
    monotone = monotone_check(real)
    lomo = leave_one_mode_out(real)
    within = within_device(real, cases, sizes)
    covered: bool | None = None  # no summary row: the bar is not measured
    if within:
        line, covered = coverage_check(within)
        print(line, *error_sources(within), *rows_scatter_lines(within), sep="\n", flush=True)
    designs = named(real, cases)
    wanted = "other real" in cases and 4 in sizes
    no_meter = without_columns(real, "no meter") if wanted else []
    no_components = without_columns(real, "no components") if wanted else []
    cross = [] if args.no_cross_device else cross_device(real)
    seconds = time.perf_counter() - t0
    text = markdown(within, designs, cross, lomo, monotone, seconds, no_meter, no_components)
    for line in cost_lines(within):  # the cost-growth figure, on every run (not only into --write's file)
        print(line, flush=True)
    print(f"done in {seconds:.0f} s", file=sys.stderr)
    if args.write:
        path = write_results("real_cv", text, {"within_device": within, "named_designs": designs,
                                                "cross_device": cross, "leave_one_mode_out": lomo,
                                                "no_meter": no_meter, "no_components": no_components,
                                                "monotone": monotone,
                                                "scales": {t: {k: vars(v) for k, v in table.items()}
                                                           for t, table in SCALES.items()},
                                                # the run time, the one input of the .md not above
                                                "seconds": seconds}, indent=1)
        print(f"wrote {path} and .json", file=sys.stderr)
    # Issue 11's interval bar is this bench's one target; the MAPE figures are reported, not held to a bar.
    return report_targets({f"every coverage of the 90% intervals >= {COVERAGE_BAR:.0f}%": covered})


if __name__ == "__main__":
    raise SystemExit(main())
