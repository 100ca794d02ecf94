"""What ``bench/real_cv.py`` scores: the real sweeps and their references, one design fitted and scored on the
modes it did not profile, the summaries over designs, and the data against physics (monotonicity).

Imported by ``bench/real_cv.py``, which puts this checkout's packages first on the path.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import MODE_FIELDS, ModeArrays, load_device
from jetpredict.models.errors import InputError
from jetpredict.predictor import bundled, calibration
from jetpredict.predictor.bundled import fit_workload
from jetpredict.predictor.constants import IntervalScales
from jetpredict.predictor.fit_check import time_scatter
from scipy.optimize import linprog

ROOT = Path(__file__).resolve().parent.parent
REAL_CSV = ROOT / "models" / "reference" / "agx-xavier-published.csv"
CROSS_CSV = Path(__file__).resolve().parent / "data" / "published_cross_device.csv"
TARGETS = ("resnet18-cifar10", "mobilenetv3-gld23k", "lenet5-mnist")
CASES = calibration.CASES
SIZES = (1, 2, 3, 4)
#: Quantities scored: (prediction column, short name).
OUTPUTS = (("epoch_time_s", "time"), ("epoch_energy_j", "energy"), ("avg_power_w", "power"))
COLUMN_OF = {name: col for col, name in OUTPUTS}
#: Components scored: stall and compute (relative error), rest (error as a share of the epoch).
COMPONENTS = ("stall", "compute", "rest")
#: The columns a profile has only when a power meter was read: left out for the designs timed without one.
METER_COLUMNS = ("epoch_energy_j", "avg_power_w", "base_power_w")
#: The columns that split the epoch (optional in a row written by hand): left out for the designs fitted
#: from epoch totals alone.
COMPONENT_COLUMNS = ("stall_time_s", "compute_time_s")


def predict(model, modes: pd.DataFrame, device_id: str | None = None) -> dict[str, np.ndarray]:
    """The model's predictions (arrays by column name, 90% intervals) at the knob columns of ``modes``."""
    device = None if device_id is None else load_device(device_id)
    return bundled.predict_modes(model, ModeArrays.from_frame(modes), device).columns()


def power_of(rows: pd.DataFrame) -> np.ndarray:
    """Mean training power per row (W): ``avg_power_w``, else energy / time."""
    p = rows["avg_power_w"].to_numpy(float)
    return np.where(np.isnan(p), rows["epoch_energy_j"].to_numpy(float) / rows["epoch_time_s"].to_numpy(float), p)


def references(real: pd.DataFrame, cases: tuple[str, ...] | None = None) -> dict[tuple[str, str], object]:
    """Each (target, case) reference of ``cases`` (default all), built once, the simulated ones once for every
    target; the other cases' are not built (none contains the target workload)."""
    simulated = calibration.SimulatedReferences()
    return {(target, case): ref for target in TARGETS
            for case, ref in calibration.references(real, target, cases, simulated).items()}


def out_of_sample_scales(sizes: tuple[int, ...] = SIZES) -> dict[str, dict[int, IntervalScales]]:
    """Per target, the interval scales calibrated on the other two real workloads' cells, fitted with
    references that hold none of the target's rows either."""
    # The simulated references hold no real rows: their cells are scored once and shared by every target.
    simulated = calibration.residual_cells(sizes, cases=("opposite regime", "other device"))
    return {t: calibration.calibrate({**calibration.residual_cells(sizes, cases=("other real",), excluded=(t,)),
                                      **{k: v for k, v in simulated.items() if k[0] != t}}) for t in TARGETS}


SCALES: dict[str, dict[int, IntervalScales]] = {}


def with_scales(model, target: str):
    """``model`` with ``target``'s out-of-sample interval scales (its regime widening kept)."""
    if target not in SCALES:
        return model
    table = SCALES[target]
    s = table[min(model.profiled_modes, max(table))]
    return replace(model, interval_scales=replace(s, extrapolation=model.interval_scales.extrapolation))


def score_design(rows: pd.DataFrame, pick: tuple[int, ...], ref, metered: bool = True, components: bool = True
                 ) -> dict[str, Any] | None:
    """Fit ``rows`` at positions ``pick`` with ``ref`` and score the other rows; None if the fit refuses.
    ``metered=False``: the profiled rows lose their power columns (timed without a meter), so the power
    comes from the reference; ``components=False``: they lose their stall and compute columns (epoch totals
    alone), so the split is the reference's. The held-out rows are scored against their measured values all
    the same."""
    prof = rows.iloc[list(pick)]
    test = rows.drop(index=rows.index[list(pick)])
    dropped = [*(() if metered else METER_COLUMNS), *(() if components else COMPONENT_COLUMNS)]
    fitted = prof.drop(columns=dropped)
    try:
        model = with_scales(fit_workload(fitted, reference=ref), str(rows["workload"].iloc[0]))
        p = predict(model, test)
    except InputError as exc:
        print(f"  design {','.join(prof['mode'])}: {exc}", file=sys.stderr)
        return None
    obs = {"epoch_time_s": test["epoch_time_s"].to_numpy(float),
           "epoch_energy_j": test["epoch_energy_j"].to_numpy(float), "avg_power_w": power_of(test)}
    out: dict[str, Any] = {"modes": test["mode"].to_numpy(str),
                           "rows_scatter_pct": 100.0 * time_scatter(model).rms_rel}
    for col, name in OUTPUTS:
        pred, lo, hi = (np.asarray(p[c], float) for c in (col, f"{col}_low", f"{col}_high"))
        out[f"{name}_signed"] = (pred / obs[col] - 1.0) * 100.0
        out[f"{name}_err"] = np.abs(out[f"{name}_signed"])
        out[f"{name}_hit"] = (obs[col] >= lo) & (obs[col] <= hi)
        out[f"{name}_width"] = (hi - lo) / pred * 100.0
    # Where the energy error comes from: energy with the measured time (only the power predicted), and with
    # the measured power (only the time predicted).
    for known, other in (("time", "power"), ("power", "time")):
        energy = np.asarray(p[COLUMN_OF[other]], float) * obs[COLUMN_OF[known]]
        out[f"energy_err_measured_{known}"] = np.abs(energy / obs["epoch_energy_j"] - 1.0) * 100.0
    # Per component: stall and compute relative errors; the rest as a share of the epoch.
    epoch = obs["epoch_time_s"]
    for col in ("stall_time_s", "compute_time_s"):
        out[f"{col[:-7]}_err"] = np.abs(np.asarray(p[col], float) / test[col].to_numpy(float) - 1.0) * 100.0
    rest_obs = epoch - test["stall_time_s"].to_numpy(float) - test["compute_time_s"].to_numpy(float)
    rest_pred = np.asarray(p["epoch_time_s"], float) - np.asarray(p["stall_time_s"], float) \
        - np.asarray(p["compute_time_s"], float)
    out["rest_err"] = np.abs(rest_pred - rest_obs) / epoch * 100.0
    # The trivial baseline: every unprofiled mode gets the mean of the profiled ones.
    for col, name in OUTPUTS[:2]:
        mean = float(prof[col].mean()) if col != "avg_power_w" else float(power_of(prof).mean())
        out[f"{name}_mean_err"] = np.abs(mean / obs[col] - 1.0) * 100.0
    return out


def summarise(scores: list[dict[str, np.ndarray]]) -> dict[str, float]:
    """Per-design MAPE (median and 90th percentile over designs); coverage and width pooled over pairs."""
    row: dict[str, float] = {"designs": len(scores)}
    for _, name in OUTPUTS:
        mapes = np.array([s[f"{name}_err"].mean() for s in scores])
        row[f"{name}_mape_median"] = float(np.median(mapes))
        row[f"{name}_mape_p90"] = float(np.percentile(mapes, 90))
        row[f"{name}_coverage"] = float(np.concatenate([s[f"{name}_hit"] for s in scores]).mean() * 100)
        row[f"{name}_width_median"] = float(np.median(np.concatenate([s[f"{name}_width"] for s in scores])))
    for name in COMPONENTS:
        row[f"{name}_mape_median"] = float(np.median([s[f"{name}_err"].mean() for s in scores]))
    for name in ("time", "energy"):
        row[f"{name}_mean_baseline_median"] = float(np.median([s[f"{name}_mean_err"].mean() for s in scores]))
    for known in ("time", "power"):
        row[f"energy_measured_{known}_mape_median"] = float(
            np.median([s[f"energy_err_measured_{known}"].mean() for s in scores]))
    return row


def per_mode_bias(scores: list[dict[str, np.ndarray]]) -> dict[str, dict[str, float]]:
    """Per held-out mode, the mean signed error (%, predicted over measured) of each output over the designs
    that did not profile it: a mode every design misses the same way is the form's (or the mode's reading's),
    not a design's."""
    modes = np.concatenate([s["modes"] for s in scores])
    out: dict[str, dict[str, float]] = {}
    for _, name in OUTPUTS:
        signed = np.concatenate([s[f"{name}_signed"] for s in scores])
        out[name] = {str(m): float(signed[modes == m].mean()) for m in sorted(set(modes))}
    return out


#: Quantities that physics orders along dominance: (name, column, +1 = falls as the knobs rise, -1 = rises).
MONOTONE = (("time", "epoch_time_s", 1), ("stall", "stall_time_s", 1), ("compute", "compute_time_s", 1),
            ("power", "avg_power_w", -1), ("dynamic power", "dynamic_power_w", -1))
#: An inversion is listed when it exceeds this (%): smaller ones are within a figure's digitizing.
INVERSION_MIN_PCT = 1.0


def dominance_pairs(knobs: np.ndarray) -> list[tuple[int, int]]:
    """(i, j) for every row j whose knobs are all >= row i's and not all equal."""
    n = len(knobs)
    return [(i, j) for i in range(n) for j in range(n)
            if i != j and np.all(knobs[j] >= knobs[i]) and np.any(knobs[j] > knobs[i])]


def monotone_fit(values: np.ndarray, pairs: list[tuple[int, int]], falls: int) -> np.ndarray:
    """The fit closest to ``values`` (summed absolute log ratio, a linear program) among those that never
    rise (``falls`` = 1; never fall: -1) from a row to one that dominates it: the least in-sample error of
    any model that orders the quantity as physics does."""
    obs = np.log(values)
    n = len(obs)
    eye = np.eye(n)
    # Variables: the fitted logs y, then u >= |y - obs|.
    rows = [np.r_[eye[i], -eye[i]] for i in range(n)] + [np.r_[-eye[i], -eye[i]] for i in range(n)]
    bounds = list(obs) + list(-obs)
    for i, j in pairs:
        rows.append(np.r_[falls * (eye[j] - eye[i]), np.zeros(n)])
        bounds.append(0.0)
    res = linprog(np.r_[np.zeros(n), np.ones(n)], A_ub=np.array(rows), b_ub=np.array(bounds),
                  bounds=[(None, None)] * n + [(0.0, None)] * n)
    return np.exp(res.x[:n])


def monotone_check(real: pd.DataFrame) -> list[dict]:
    """Per workload and quantity: the inversions (a faster mode slower, or drawing less power, by more than
    ``INVERSION_MIN_PCT``) and the least MAPE (%) of any model that orders the quantity as physics does."""
    out = []
    for target in TARGETS:
        rows = real[real["workload"] == target].reset_index(drop=True)
        rows = rows.assign(dynamic_power_w=rows["avg_power_w"] - rows["base_power_w"])
        pairs = dominance_pairs(rows[list(MODE_FIELDS)].to_numpy(float))
        modes = rows["mode"].astype(str).to_list()
        for name, col, falls in MONOTONE:
            values = rows[col].to_numpy(float)
            gap = {(modes[i], modes[j]): falls * (values[j] / values[i] - 1.0) * 100.0 for i, j in pairs}
            floor = np.abs(monotone_fit(values, pairs, falls) / values - 1.0) * 100.0
            row = {"target": target, "quantity": name, "floor_mape": float(floor.mean()),
                   "inversions": {f"{a}->{b}": round(g, 1) for (a, b), g in gap.items() if g > INVERSION_MIN_PCT}}
            out.append(row)
            if row["inversions"]:
                print(f"monotone {target:<20} {name:<13} floor {row['floor_mape']:.2f}%; inversions: "
                      + ", ".join(f"{k} {v:+.1f}%" for k, v in row["inversions"].items()), flush=True)
    return out
